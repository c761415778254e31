"""The Illustrated Transformer's worked numbers, through the model's own attention function."""

import math

import pytest
import torch

from explain.textbook import D_K, thinking_machines


def test_thinking_machines_numbers():
    tm = thinking_machines()
    assert tm.q.shape == tm.k.shape == tm.v.shape == (2, D_K) and D_K == 64
    assert tm.scores[0].tolist() == [112.0, 96.0]
    assert tm.scaled[0].tolist() == [14.0, 12.0]
    assert round(tm.weights[0, 0].item(), 2) == 0.88
    assert round(tm.weights[0, 1].item(), 2) == 0.12
    assert tm.weights[0, 0].item() == pytest.approx(1 / (1 + math.exp(-2)), abs=1e-6)
    assert torch.allclose(tm.z[0], tm.weights[0, 0] * tm.v[0] + tm.weights[0, 1] * tm.v[1])
    assert torch.allclose(tm.weights.sum(-1), torch.ones(2))
