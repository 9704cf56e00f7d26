"""The batched demo's model as numbers, without torch: its shape (`DecoderSpec`) and the
batch sizes a replica keeps buffers for. The application module imports only this at
load time, so building the application (Serve's build task, which imports the module to
find `app`) and the ingress need not import torch; demo_apps/decoder.py is the model."""

from __future__ import annotations

from dataclasses import dataclass

BUCKETS = (1, 2, 4, 8, 16, 32, 64)  # batch sizes with their own buffers (and graphs)


@dataclass(frozen=True)
class DecoderSpec:
    """A decoder-only transformer (`depth` layers of `width`, `heads` heads) and how much
    a request generates: a prompt of `prompt_tokens`, then `new_tokens` new ones."""

    width: int
    depth: int
    heads: int
    dtype: str  # a torch dtype's name
    vocab: int = 4096
    prompt_tokens: int = 8
    new_tokens: int = 64
    graphs: bool = True  # capture a step as a CUDA graph (CUDA only)

    @property
    def max_len(self) -> int:
        return self.prompt_tokens + self.new_tokens

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    @property
    def name(self) -> str:
        return (f"decoder {self.depth}×{self.width}, {self.prompt_tokens}+{self.new_tokens} "
                "tokens")


def bucket_for(n: int) -> int:
    """The smallest bucket holding a batch of n (1 ≤ n ≤ the largest bucket)."""
    for b in BUCKETS:
        if n <= b:
            return b
    raise ValueError(f"a batch of {n} is larger than the largest bucket ({BUCKETS[-1]})")
