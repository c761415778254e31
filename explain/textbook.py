"""The Illustrated Transformer's "Thinking Machines" example as real tensors.

The lecture notes walk one query through self-attention with d_k = 64:

    q1·k1 = 112, q1·k2 = 96  ->  / sqrt(64) = 8  ->  14, 12  ->  softmax  ->  0.88, 0.12

Here q1, k1, k2 (and q2, v1, v2) are concrete 64-dimensional vectors chosen so that those dot
products come out exactly, and they go through the very same `scaled_dot_product_attention` as the
model. The vectors are a clearly labelled textbook construction, not weights of any trained model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.trace import Trace
from model.transformer import scaled_dot_product_attention

D_K = 64
WORDS = ("Thinking", "Machines")
# Which queries' numbers the Illustrated Transformer prints: only the query of "Thinking" (112, 96 -> 14, 12
# -> 0.88, 0.12). The numbers of the query of "Machines" (32, 80 -> 4, 10 -> 0.00, 1.00) are this app's own
# construction (any vectors would do; these make "Machines" attend to itself).
FROM_BOOK = (0,)


def from_book(query: int) -> bool:
    """True when the Illustrated Transformer prints this query's numbers, False for the app's own construction."""
    return query in FROM_BOOK


@dataclass(frozen=True)
class ThinkingMachines:
    """Every number of the worked example, each one a real tensor."""

    q: torch.Tensor  # [2, 64] queries of "Thinking", "Machines"
    k: torch.Tensor  # [2, 64] keys
    v: torch.Tensor  # [2, 64] values
    scores: torch.Tensor  # [2, 2] q_i · k_j           (row 0: 112, 96)
    scaled: torch.Tensor  # [2, 2] scores / sqrt(d_k)   (row 0: 14, 12)
    weights: torch.Tensor  # [2, 2] softmax per row      (row 0: 0.88, 0.12)
    z: torch.Tensor  # [2, 64] weighted sum of the values


def _vectors() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Integer-valued 64-d vectors with q1·k1 = 112 and q1·k2 = 96 (and q2·k2 > q2·k1)."""
    q = torch.zeros(2, D_K)
    k = torch.zeros(2, D_K)
    q[0, :16] = 1.0  # q1 = 1 in dims 0..15
    k[0, :16] = 7.0  # k1 · q1 = 16 * 7 = 112
    k[1, :16] = 6.0  # k2 · q1 = 16 * 6 = 96
    q[1, 16:32] = 1.0  # q2 = 1 in dims 16..31
    k[0, 16:32] = 2.0  # k1 · q2 = 32
    k[1, 16:32] = 5.0  # k2 · q2 = 80
    v = torch.zeros(2, D_K)
    v[0, 0::2] = 1.0  # v1: ones in the even dimensions
    v[1, 1::2] = 1.0  # v2: ones in the odd dimensions
    return q, k, v


def thinking_machines() -> ThinkingMachines:
    q, k, v = _vectors()
    trace = Trace()
    z, weights = scaled_dot_product_attention(
        q[None, None], k[None, None], v[None, None], trace=trace, name="textbook"
    )  # [1, 1, 2, 64]
    return ThinkingMachines(
        q=q,
        k=k,
        v=v,
        scores=trace["textbook.scores"][0, 0],
        scaled=trace["textbook.scaled"][0, 0],
        weights=weights[0, 0],
        z=z[0, 0],
    )
