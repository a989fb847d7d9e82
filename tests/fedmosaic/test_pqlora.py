"""PQ-LoRA layer (Eq. 6, 9, 20): hand-computed outputs, initialisation, what trains."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from baselines.fedmosaic import FusionGate, PQLoRALinear, orthonormal_rows


def hand_layer() -> PQLoRALinear:
    """d_I = d_O = 3, r = 2 with explicit W_p, A, B, P_local, Q_local, P_global, Q_global."""
    base = nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        base.weight.copy_(torch.tensor([[1.0, 0.0, 1.0], [0.0, 2.0, 0.0], [1.0, 1.0, 1.0]]))
    layer = PQLoRALinear(base, 2, adapters=("local", "global"))
    with torch.no_grad():
        layer.A.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))  # A Aᵀ = I
        layer.B.copy_(torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]))  # Bᵀ B = I
        layer.P["local"].copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        layer.Q["local"].copy_(torch.tensor([0.5, -1.0]))
        layer.P["global"].copy_(torch.eye(2))
        layer.Q["global"].zero_()
    return layer


def test_eq6_by_hand():
    layer = hand_layer()
    x = torch.tensor([1.0, 2.0, 3.0])
    # W_p x = [1+3, 4, 1+2+3] = [4, 4, 6]; A x = [1, 2]; P A x = [1+4, 3+8] = [5, 11];
    # + Q = [5.5, 10]; B(...) = [5.5, 0, 10]; h_O = [9.5, 4, 16]
    layer.set_active(("local",))
    torch.testing.assert_close(layer(x), torch.tensor([9.5, 4.0, 16.0]))
    layer.set_active(())
    torch.testing.assert_close(layer(x), torch.tensor([4.0, 4.0, 6.0]))


def test_eq9_gated_fusion_by_hand():
    layer = hand_layer()
    with torch.no_grad():
        layer.gate.beta.fill_(math.log(3.0))  # σ(β) = 0.75
    layer.set_active(("local", "global"))
    x = torch.tensor([[1.0, 2.0, 3.0]])
    # h_L = [5.5, 0, 10]; h_G = B(I A x + 0) = B [1, 2] = [1, 0, 2]
    # h_O = W_p x + 0.25 h_L + 0.75 h_G = [4 + 1.375 + 0.75, 4, 6 + 2.5 + 1.5]
    torch.testing.assert_close(layer(x), torch.tensor([[6.125, 4.0, 10.0]]))
    torch.testing.assert_close(layer.branch(x, "global"), torch.tensor([[1.0, 0.0, 2.0]]))


def test_gate_starts_at_one_half():
    w_local, w_global = FusionGate().weights()
    assert w_local.item() == w_global.item() == 0.5


@pytest.mark.parametrize(("d_in", "d_out", "r"), [(64, 32, 8), (96, 192, 4), (7, 5, 5)])
def test_init_is_orthonormal_deterministic_and_output_preserving(d_in, d_out, r):
    torch.manual_seed(0)
    base = nn.Linear(d_in, d_out)
    layer = PQLoRALinear(base, r, adapters=("local", "global"), seed=3, stream="block0.x")
    eye = torch.eye(r)
    torch.testing.assert_close(layer.A @ layer.A.T, eye, atol=1e-5, rtol=0)  # Eq. 20
    torch.testing.assert_close(layer.B.T @ layer.B, eye, atol=1e-5, rtol=0)
    assert layer.A.shape == (r, d_in) and layer.B.shape == (d_out, r)
    for name in ("local", "global"):  # P and Q start at zero
        assert layer.P[name].shape == (r, r) and not layer.P[name].any()
        assert layer.Q[name].shape == (r,) and not layer.Q[name].any()
    x = torch.randn(2, 5, d_in)
    for active in [("local",), ("local", "global")]:
        layer.set_active(active)
        torch.testing.assert_close(layer(x), base(x))
    same = PQLoRALinear(nn.Linear(d_in, d_out), r, seed=3, stream="block0.x")
    other = PQLoRALinear(nn.Linear(d_in, d_out), r, seed=3, stream="block1.x")
    assert torch.equal(same.A, layer.A) and torch.equal(same.B, layer.B)
    assert not torch.allclose(other.A, layer.A)


def test_only_local_P_Q_and_gate_get_gradients():
    torch.manual_seed(0)
    layer = PQLoRALinear(nn.Linear(6, 4), 3, adapters=("local", "global"))
    with torch.no_grad():
        layer.P["global"].normal_()  # a non-trivial global module so that β matters
    layer.P["global"].requires_grad_(False)
    layer.Q["global"].requires_grad_(False)
    layer.set_active(("local", "global"))
    layer(torch.randn(5, 6)).pow(2).sum().backward()
    assert {n for n, p in layer.named_parameters() if p.requires_grad} == {
        "lora_PQ.local.P", "lora_PQ.local.Q", "lora_gate.local.beta"}
    assert layer.P["local"].grad.abs().sum() > 0 and layer.Q["local"].grad.abs().sum() > 0
    assert layer.gate.beta.grad.abs() > 0
    assert layer.P["global"].grad is None and layer.base.weight.grad is None
    assert "A" in dict(layer.named_buffers()) and "A" not in dict(layer.named_parameters())


def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="1 <= r <= 4"):
        PQLoRALinear(nn.Linear(8, 4), 5)
    with pytest.raises(TypeError, match="nn.Linear"):
        PQLoRALinear(nn.Conv1d(2, 2, 1), 1)
    layer = PQLoRALinear(nn.Linear(4, 4), 2, adapters=("local",))
    with pytest.raises(KeyError, match="no adapter 'global'"):
        layer.set_active(("local", "global"))
    with pytest.raises(ValueError, match="1 <= r <= d"):
        orthonormal_rows(5, 4, seed=0)
