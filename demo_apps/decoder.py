"""A small decoder-only transformer that generates tokens with a KV cache: the batched
demo's model.

Why generation: a decode step reads every weight of the model and launches the same
kernels whether it advances 1 sequence or 32, so its cost is almost flat in the batch size
— which is exactly what `@serve.batch` amortizes, and why LLM servers batch. A request
here is a prompt (from its seed or features) and `new_tokens` greedily generated tokens.

How a step runs: every buffer is allocated once per batch size ("bucket": 1, 2, 4, …, 64;
a batch is padded up to its bucket): the token fed in, the position, the KV cache
(`max_len` positions), the generated tokens. One step reads the position from a device
tensor, writes K/V at it, attends over the positions up to it (a mask, so shapes never
change), picks the next token (the prompt's while inside it, else the argmax) and advances
the position — all on the device. So on CUDA a step is captured once per bucket as a CUDA
graph and a request's generation is `max_len - 1` graph replays with no host round trip
until its tokens are read back (the way inference servers run decode steps): the GPU runs
kernels back to back instead of waiting for Python to launch each one. Where capture is
not possible (CPU, or a capture that fails) the same step runs eagerly.

Plain torch only (no Ray, no Serve): unit tests and benchmarks use it directly.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from demo_apps.decoder_spec import BUCKETS, DecoderSpec, bucket_for


class _Dense(torch.nn.Module):
    """A bias-free linear layer whose weight is stored [in, out] (as GPT-2's Conv1D):
    `x @ W` takes the same BLAS path for one row as for many on a CPU, where
    `F.linear` (x @ Wᵀ) costs a batch of 16 noticeably more than one row."""

    def __init__(self, n_in: int, n_out: int, **factory) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_in, n_out, **factory))

    def forward(self, x):
        return x @ self.weight


class _Layer(torch.nn.Module):
    def __init__(self, width: int, heads: int, **factory) -> None:
        super().__init__()
        self.heads = heads
        self.scale = 1.0 / math.sqrt(width // heads)
        self.norm1 = torch.nn.LayerNorm(width, **factory)
        self.qkv = _Dense(width, 3 * width, **factory)
        self.out = _Dense(width, width, **factory)
        self.norm2 = torch.nn.LayerNorm(width, **factory)
        self.up = _Dense(width, 4 * width, **factory)
        self.down = _Dense(4 * width, width, **factory)

    def step(self, x, k_cache, v_cache, pos, mask):
        """x [B, W] at position pos (a 1-element device tensor); caches [B, H, T, D]."""
        b, w = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).view(b, 3, h, w // h).unbind(1)
        # index_copy_ with a device index: the write position is data, not shape, so the
        # step can be captured once and replayed at every position.
        k_cache.index_copy_(2, pos, k.unsqueeze(2))
        v_cache.index_copy_(2, pos, v.unsqueeze(2))
        # Attention of one query over the cache as two batched matmuls: one call each
        # whatever the batch (a fused kernel's per-sequence work grows with it on a CPU).
        scores = torch.matmul(q.unsqueeze(2), k_cache.transpose(-1, -2)) * self.scale
        a = torch.matmul(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1),
                         v_cache)
        x = x + self.out(a.reshape(b, w))
        return x + self.down(F.silu(self.up(self.norm2(x))))


class Decoder(torch.nn.Module):
    def __init__(self, spec: DecoderSpec, **factory) -> None:
        super().__init__()
        self.spec = spec
        self.embed = torch.nn.Embedding(spec.vocab, spec.width, **factory)
        self.position = torch.nn.Embedding(spec.max_len, spec.width, **factory)
        self.layers = torch.nn.ModuleList(
            _Layer(spec.width, spec.heads, **factory) for _ in range(spec.depth))
        self.norm = torch.nn.LayerNorm(spec.width, **factory)
        self.head = _Dense(spec.width, spec.vocab, **factory)


class _Buffers:
    """Everything one bucket's step reads and writes, allocated once."""

    def __init__(self, spec: DecoderSpec, batch: int, device) -> None:
        f = {"device": device}
        d = spec.width // spec.heads
        shape = (batch, spec.heads, spec.max_len, d)
        self.k = [torch.zeros(shape, dtype=spec.torch_dtype, **f) for _ in range(spec.depth)]
        self.v = [torch.zeros(shape, dtype=spec.torch_dtype, **f) for _ in range(spec.depth)]
        self.prompt = torch.zeros(batch, spec.prompt_tokens, dtype=torch.long, **f)
        self.tokens = torch.zeros(batch, spec.max_len, dtype=torch.long, **f)
        self.pos = torch.zeros(1, dtype=torch.long, **f)
        self.arange = torch.arange(spec.max_len, **f)
        self.graph = None  # torch.cuda.CUDAGraph once captured


class Generator:
    """Greedy generation for batches of prompts on one device (see the module docstring).
    Not thread-safe: one batch at a time (the replica's event loop guarantees it)."""

    def __init__(self, spec: DecoderSpec, device: torch.device | str = "cpu",
                 seed: int = 0) -> None:
        self.spec = spec
        self.device = torch.device(device)
        torch.manual_seed(seed)
        self.model = Decoder(spec, device=self.device, dtype=spec.torch_dtype).eval()
        with torch.no_grad():
            for p in self.model.parameters():
                if p.dim() > 1:  # small weights keep activations at scale through depth
                    p.normal_(0.0, 1.0 / math.sqrt(p.shape[0]))
        self._buffers: dict[int, _Buffers] = {}
        self.graphs_used = False  # whether any bucket runs as a CUDA graph

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def weights_mb(self) -> int:
        return round(sum(p.numel() * p.element_size() for p in self.model.parameters())
                     / 2**20)

    def _step(self, buf: _Buffers) -> None:
        """One decode step on *buf*: feed tokens[:, pos], write tokens[:, pos + 1]."""
        m, s = self.model, self.spec
        pos = buf.pos
        tok = buf.tokens.index_select(1, pos).squeeze(1)
        x = m.embed(tok) + m.position(pos)
        mask = (buf.arange > pos).view(1, 1, 1, -1)  # True: not attended yet
        for layer, k, v in zip(m.layers, buf.k, buf.v):
            x = layer.step(x, k, v, pos, mask)
        nxt = m.head(m.norm(x)).argmax(dim=-1)
        # Inside the prompt the next token is the prompt's, after it the model's choice.
        in_prompt = pos + 1 < s.prompt_tokens
        forced = buf.prompt.index_select(1, (pos + 1).clamp(max=s.prompt_tokens - 1))
        nxt = torch.where(in_prompt, forced.squeeze(1), nxt)
        buf.tokens.index_copy_(1, pos + 1, nxt.unsqueeze(1))
        pos.add_(1)

    def _buffers_for(self, batch: int) -> _Buffers:
        buf = self._buffers.get(batch)
        if buf is None:
            buf = self._buffers[batch] = _Buffers(self.spec, batch, self.device)
            if self.device.type == "cuda" and self.spec.graphs:
                self._capture(buf)
        return buf

    def _capture(self, buf: _Buffers) -> None:
        """Record one step as a CUDA graph (after warm-up steps on a side stream, as CUDA
        graph capture requires); on any failure the step stays eager."""
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.no_grad(), torch.cuda.stream(stream):
                for _ in range(3):
                    buf.pos.zero_()
                    self._step(buf)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(graph):
                self._step(buf)
            buf.graph = graph
            self.graphs_used = True
        except Exception:  # noqa: BLE001 - eager is always correct, only slower
            buf.graph = None

    def warm(self, sizes=BUCKETS) -> None:
        """Allocate (and on CUDA capture) the buckets of *sizes* now, so that no request
        pays for it later."""
        for n in sizes:
            self.generate(self.prompts_from_seeds(list(range(n))))

    def generate(self, prompts: torch.Tensor) -> torch.Tensor:
        """prompts [n, prompt_tokens] (int64, any device) → the generated tokens
        [n, new_tokens] on the CPU. Waits for the device (the tokens are read back).
        A batch larger than the largest bucket runs in pieces of that bucket."""
        n = prompts.shape[0]
        if n > BUCKETS[-1]:
            return torch.cat([self.generate(prompts[i:i + BUCKETS[-1]])
                              for i in range(0, n, BUCKETS[-1])])
        buf = self._buffers_for(bucket_for(n))
        with torch.no_grad():
            buf.prompt.zero_()
            buf.prompt[:n].copy_(prompts)
            buf.tokens.zero_()
            buf.tokens[:, 0].copy_(buf.prompt[:, 0])
            buf.pos.zero_()
            for _ in range(self.spec.max_len - 1):
                if buf.graph is not None:
                    buf.graph.replay()
                else:
                    self._step(buf)
            # A copy: on the CPU .cpu() would hand out the bucket's own buffer, which the
            # next batch of this size overwrites.
            return buf.tokens[:n, self.spec.prompt_tokens:].to("cpu", copy=True)

    @staticmethod
    def token_tensor(prompts: list[list[int]]) -> torch.Tensor:
        """Prompts as token ids (lists of ints) in the tensor `generate` takes."""
        return torch.tensor(prompts, dtype=torch.long)

    def prompts_from_seeds(self, seeds: list[int]) -> torch.Tensor:
        """A prompt per seed: the same seed, the same prompt (and so the same answer)."""
        rows = [torch.randint(0, self.spec.vocab, (self.spec.prompt_tokens,),
                              generator=torch.Generator().manual_seed(int(s)))
                for s in seeds]
        return torch.stack(rows)

    def time_batches(self, sizes=(1, 8, 16, 32), calls: int = 7) -> dict[int, float]:
        """{batch size: ms of the fastest of `calls` generations}, after a warm-up call of
        each size (and the graph capture that comes with a bucket's first use);
        synchronised, since `generate` reads its tokens back. The sizes take turns, call
        by call, and the fastest call is the model's cost: a replica times itself while
        others start beside it, and a busy moment only ever adds time (a median of 5 read
        1.32× for 16 vs 1 on a busy 2-core machine where the fastest read 1.2×)."""
        prompts = {n: self.prompts_from_seeds(list(range(n))) for n in sizes}
        for n in sizes:
            self.generate(prompts[n])
        times: dict[int, list[float]] = {n: [] for n in sizes}
        for _ in range(calls):
            for n in sizes:
                started = time.perf_counter()
                self.generate(prompts[n])
                times[n].append((time.perf_counter() - started) * 1000)
        return {n: min(t) for n, t in times.items()}
