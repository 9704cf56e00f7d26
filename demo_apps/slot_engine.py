"""The generate demo's model runner: demo_apps/decoder.py's decoder over a KV cache of
slots, one sequence per slot, each at its own position.

decoder.py's Generator runs a batch in lockstep (one position for all); serving
requests that arrive and finish at different times needs a position per sequence. So the
runner keeps, per layer, one cache [slots, heads, context, head_dim] and per slot the
number of positions filled. Sequences in use are packed in slots 0…n-1: a step computes
rows 0…n-1 only, attending over the cache up to the longest of them (a mask hides each
row's unfilled positions), and a sequence that leaves is replaced by the last one
(`release`, one copy of that row's cache).

- `prefill(slot, tokens)`: the whole prompt in one causal pass; fills the slot's cache;
  returns the logits of the next token.
- `decode(n, tokens)`: one step of rows 0…n-1, each fed its last token at its own
  position; returns the logits [n, vocab].
- `sample(logits, temperature, generator)`: greedy at temperature 0, else a draw from the
  softmax at that temperature with the sequence's own generator (its `seed`).

The weights are decoder.py's (`Generator(spec).model`, the same initialisation). Plain
torch, no Ray: unit tests and benchmarks use it directly. Not thread-safe: the replica
calls it from one worker thread.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from demo_apps.decoder import Generator
from demo_apps.decoder_spec import DecoderSpec


class SlotEngine:
    def __init__(self, spec: DecoderSpec, slots: int, device: torch.device | str = "cpu",
                 seed: int = 0) -> None:
        self.spec = spec
        self.slots = slots
        self.device = torch.device(device)
        gen = Generator(spec, self.device, seed)
        self.params = gen.params
        self.weights_mb = gen.weights_mb
        self.model = gen.model
        d = spec.width // spec.heads
        shape = (slots, spec.heads, spec.max_len, d)
        f = {"device": self.device, "dtype": spec.torch_dtype}
        self.k = [torch.zeros(shape, **f) for _ in range(spec.depth)]
        self.v = [torch.zeros(shape, **f) for _ in range(spec.depth)]
        self.filled = [0] * slots        # positions of each slot's cache in use
        self.arange = torch.arange(spec.max_len, device=self.device)

    @property
    def context(self) -> int:
        return self.spec.max_len

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        m = self.model
        return m.head(m.norm(x)).float()

    @torch.no_grad()
    def prefill(self, slot: int, tokens: list[int]) -> torch.Tensor:
        """Fill *slot*'s cache with *tokens* (the prompt, ≤ context - 1 of them); the
        logits [vocab] of the token after them."""
        m, n = self.model, len(tokens)
        ids = torch.tensor(tokens, dtype=torch.long, device=self.device)
        x = m.embed(ids) + m.position(self.arange[:n])            # [n, W]
        for layer, kc, vc in zip(m.layers, self.k, self.v):
            h, w = layer.heads, x.shape[1]
            q, k, v = layer.qkv(layer.norm1(x)).view(n, 3, h, w // h).unbind(1)
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))      # [H, n, D]
            kc[slot, :, :n] = k
            vc[slot, :, :n] = v
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + layer.out(a.transpose(0, 1).reshape(n, w))
            x = x + layer.down(F.silu(layer.up(layer.norm2(x))))
        self.filled[slot] = n
        return self._logits(x[-1])

    @torch.no_grad()
    def decode(self, n: int, tokens: list[int]) -> torch.Tensor:
        """One step of slots 0…n-1: slot i is fed tokens[i] at its next position.
        Returns the logits [n, vocab]."""
        m = self.model
        # A sequence done early in a held batch goes on computing with it; at the end of
        # the context it rewrites the last position (its tokens are thrown away anyway).
        last = self.spec.max_len - 1
        pos = torch.tensor([min(f, last) for f in self.filled[:n]], dtype=torch.long,
                           device=self.device)
        span = int(pos.max()) + 1                                 # positions attended
        rows = self.arange[:n]
        x = m.embed(torch.tensor(tokens, dtype=torch.long, device=self.device)) \
            + m.position(pos)                                     # [n, W]
        mask = (self.arange[:span].view(1, -1) > pos.view(-1, 1)).view(n, 1, span)
        for layer, kc, vc in zip(m.layers, self.k, self.v):
            h, w = layer.heads, x.shape[1]
            q, k, v = layer.qkv(layer.norm1(x)).view(n, 3, h, w // h).unbind(1)
            kc[rows, :, pos] = k                                  # each row at its position
            vc[rows, :, pos] = v
            kk, vv = kc[:n, :, :span], vc[:n, :, :span]
            scores = torch.matmul(q.unsqueeze(2), kk.transpose(-1, -2)).squeeze(2)
            scores = scores * layer.scale                         # [n, H, span]
            p = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
            a = torch.matmul(p.unsqueeze(2), vv).squeeze(2)
            x = x + layer.out(a.reshape(n, w))
            x = x + layer.down(F.silu(layer.up(layer.norm2(x))))
        for i in range(n):
            self.filled[i] = min(self.filled[i] + 1, self.spec.max_len)
        return self._logits(x)

    def release(self, slot: int, n: int) -> int | None:
        """Free *slot* of the n in use, keeping slots 0…n-2 packed: the last one's cache
        moves into it. Returns the slot that moved (now *slot*), or None."""
        last = n - 1
        self.filled[slot] = 0
        if slot == last:
            return None
        used = self.filled[last]
        for kc, vc in zip(self.k, self.v):
            kc[slot, :, :used] = kc[last, :, :used]
            vc[slot, :, :used] = vc[last, :, :used]
        self.filled[slot], self.filled[last] = used, 0
        return last

    @staticmethod
    def generator(seed: int) -> torch.Generator:
        """A sampler's own random stream: the same seed, the same draws."""
        return torch.Generator().manual_seed(int(seed) % 2**63)  # any int: in range

    @staticmethod
    def sample(logits: torch.Tensor, temperature: float,
               generator: torch.Generator | None = None) -> int:
        """The next token from *logits* [vocab]: greedy at temperature 0."""
        if temperature <= 0:
            return int(logits.argmax())
        probs = torch.softmax(logits / temperature, dim=-1)
        return int(torch.multinomial(probs, 1, generator=generator))
