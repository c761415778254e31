"""An embedding lookup, step by step: a one-hot row times the embedding matrix picks out one row of it
(onehot @ E == E[id]), and the model scales that row by √d_model (the paper's section 3.4), which is what the trace
records as ``src.embed``. viz/embeddings.py draws these numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor


def one_hot(ids: Iterable[int] | Tensor, size: int) -> Tensor:
    """[T] ids -> [T, size] float rows with a single 1 at each id."""
    index = torch.as_tensor(list(ids), dtype=torch.long)  # [T]
    return torch.nn.functional.one_hot(index, size).to(torch.float32)


@dataclass(frozen=True)
class LookupDemo:
    """One token's trip from id to the scaled embedding, every step a real tensor."""

    token_id: int
    d_model: int
    one_hot: Tensor  # [V]
    product: Tensor  # [D] one_hot @ E
    row: Tensor  # [D] E[id]
    scale: float  # √d_model
    scaled: Tensor  # [D] E[id] * √d_model
    traced: Tensor | None  # [D] the model's traced embedding at that position ("src.embed")
    traced_name: str = "src.embed"

    @property
    def lookup_error(self) -> float:
        """max |onehot @ E - E[id]|: 0, a one-hot row selects a row."""
        return float((self.product - self.row).abs().max())

    @property
    def trace_error(self) -> float | None:
        """max |E[id] * √d_model - traced|: 0 when the trace is the scaled row."""
        return None if self.traced is None else float((self.scaled - self.traced).abs().max())


def lookup_demo(E: Tensor, token_id: int, traced: Tensor | None = None, traced_name: str = "src.embed") -> LookupDemo:
    """onehot(id) @ E, E[id], and E[id] * √d_model (the model's scale) beside the traced row."""
    E = E.detach()
    V, D = E.shape
    if not 0 <= token_id < V:
        raise ValueError(f"id {token_id} is outside the vocabulary of {V} tokens")
    oh = one_hot([token_id], V)[0].to(E.dtype)  # [V]
    scale = math.sqrt(D)
    return LookupDemo(
        int(token_id),
        D,
        oh,
        oh @ E,  # [V] @ [V, D] = [D]
        E[token_id].clone(),
        scale,
        E[token_id] * scale,
        None if traced is None else traced.detach().reshape(-1).clone(),  # [D]
        traced_name,
    )
