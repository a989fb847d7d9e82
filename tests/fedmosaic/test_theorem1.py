"""Theorem 1: with orthonormal A and B the updates B P A span r² dimensions; not without."""

from __future__ import annotations

import pytest
import torch

from baselines.fedmosaic import orthonormal_rows


def span_dim(A: torch.Tensor, B: torch.Tensor) -> int:
    """Rank of {vec(B E_ij A) : i, j < r}, the span of PQ-LoRA's weight updates (Eq. 16-18)."""
    r = A.shape[0]
    maps = []
    for i in range(r):
        for j in range(r):
            E = torch.zeros(r, r, dtype=torch.float64)
            E[i, j] = 1.0
            maps.append((B @ E @ A).reshape(-1))
    return int(torch.linalg.matrix_rank(torch.stack(maps)))


@pytest.mark.parametrize(("r", "d_in", "d_out"), [(1, 5, 3), (2, 3, 3), (3, 16, 7), (4, 64, 32),
                                                   (5, 12, 40), (8, 96, 192)])
def test_orthonormal_A_B_span_r_squared(r, d_in, d_out):
    A = orthonormal_rows(r, d_in, seed=r, stream="A").double()
    B = orthonormal_rows(r, d_out, seed=r, stream="B").double().T
    torch.testing.assert_close(A @ A.T, torch.eye(r, dtype=torch.float64), atol=1e-6, rtol=0)
    torch.testing.assert_close(B.T @ B, torch.eye(r, dtype=torch.float64), atol=1e-6, rtol=0)
    assert span_dim(A, B) == r * r


@pytest.mark.parametrize(("r", "d_in", "d_out"), [(2, 8, 8), (3, 16, 7), (4, 64, 32)])
def test_rank_deficient_A_loses_dimensions(r, d_in, d_out):
    A = orthonormal_rows(r, d_in, seed=0, stream="A").double()
    A[-1] = 0.7 * A[:-1].sum(0)  # last row a combination of the others: rank(A) = r - 1
    B = orthonormal_rows(r, d_out, seed=0, stream="B").double().T
    assert int(torch.linalg.matrix_rank(A)) == r - 1
    # the span is {b_i a_jᵀ}: its dimension is rank(B) * rank(A) = r (r - 1) < r²
    assert span_dim(A, B) == r * (r - 1) < r * r
