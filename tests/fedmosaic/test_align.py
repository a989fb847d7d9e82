"""Weight alignment (Eq. 8, 21-25): A by MSE + orthogonality, B by CCA, and the cache."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from baselines.fedmosaic import (
    LayerFeatures,
    align_A,
    align_B,
    align_features,
    aligned_pair,
    block_map,
    cca,
    collect_features,
    inject_pqlora,
    nearest_row_orthonormal,
    orthogonality_penalty,
    orthonormal_rows,
    pq_frozen_state,
    pq_modules,
)

log = logging.getLogger(__name__)


def orthonormal_columns(d: int, k: int, seed: int) -> torch.Tensor:
    return orthonormal_rows(k, d, seed=seed, stream="E").double().T  # d x k, Eᵀ E = I


def synthetic_pair(m: int, d_i: int, d_j: int, seed: int):
    """Pivot inputs X_i (anisotropic, low-rank + noise) and X_j = X_i Eᵀ + noise, E isometric.

    A_j* = A_i Eᵀ has orthonormal rows and maps X_j onto the pivot's features, so a good
    alignment exists inside the constraint set.
    """
    gen = torch.Generator().manual_seed(seed)
    Z = torch.randn(m, 6, generator=gen, dtype=torch.float64)
    X_i = Z @ torch.randn(6, d_i, generator=gen, dtype=torch.float64)
    X_i = X_i + 0.1 * torch.randn(m, d_i, generator=gen, dtype=torch.float64)
    E = orthonormal_columns(d_j, d_i, seed)
    X_j = X_i @ E.T + 0.05 * torch.randn(m, d_j, generator=gen, dtype=torch.float64)
    return X_i.float(), X_j.float()


def test_penalty_and_projection():
    A = orthonormal_rows(3, 10, seed=0)
    assert float(orthogonality_penalty(A)) < 1e-10
    assert abs(float(orthogonality_penalty(2 * A)) - 3 * 9.0) < 1e-4  # ‖4I - I‖² = 3 · 3²
    gen = torch.Generator().manual_seed(1)
    M = torch.randn(3, 10, generator=gen)
    P = nearest_row_orthonormal(M)
    torch.testing.assert_close(P @ P.T, torch.eye(3), atol=1e-6, rtol=0)
    torch.testing.assert_close(nearest_row_orthonormal(A), A, atol=1e-6, rtol=0)
    # the SVD projection is nearer to M than other matrices with orthonormal rows
    for seed in range(5):
        other = orthonormal_rows(3, 10, seed=seed, stream="x")
        assert torch.linalg.norm(M - P) <= torch.linalg.norm(M - other)


def test_A_alignment_drops_heldout_mse_and_stays_orthonormal():
    r, d_i, d_j = 4, 24, 40
    X_i, X_j = synthetic_pair(800, d_i, d_j, seed=0)
    fit, test = slice(0, 600), slice(600, 800)
    A_i = orthonormal_rows(r, d_i, seed=1, stream="pivot")
    A_j0 = orthonormal_rows(r, d_j, seed=2, stream="other")

    def mse(A_j):
        return float(((X_j[test] @ A_j.T - X_i[test] @ A_i.T) ** 2).mean())

    A_j = align_A(X_i[fit], A_i, X_j[fit], A_j0, lam=0.5, steps=400, lr=1e-2)
    before, after = mse(A_j0), mse(A_j)
    log.info("synthetic A alignment: held-out MSE %.4f -> %.5f", before, after)
    assert after < 0.02 * before
    torch.testing.assert_close(A_j @ A_j.T, torch.eye(r), atol=1e-5, rtol=0)


def test_cca_recovers_planted_correlations():
    m = 20000
    gen = torch.Generator().manual_seed(0)
    s = torch.randn(m, 2, generator=gen, dtype=torch.float64)
    noise = torch.randn(m, 5, generator=gen, dtype=torch.float64)
    rho = torch.tensor([0.9, 0.5], dtype=torch.float64)
    x_lat = torch.cat([s, noise[:, :1]], 1)  # 3 latent dims: s1, s2, independent
    y_lat = torch.cat([rho * s + (1 - rho**2).sqrt() * noise[:, 1:3], noise[:, 3:5]], 1)
    # CCA is invariant to invertible mixing of either side
    X = x_lat @ torch.randn(3, 3, generator=gen, dtype=torch.float64)
    Y = y_lat @ torch.randn(4, 4, generator=gen, dtype=torch.float64)
    res = cca(X, Y)
    log.info("planted correlations (0.9, 0.5, 0): CCA gives %s", res.correlations.tolist())
    torch.testing.assert_close(res.correlations, torch.tensor([0.9, 0.5, 0.0], dtype=torch.float64),
                               atol=0.02, rtol=0)
    u = (X - res.mean_x) @ res.proj_x
    v = (Y - res.mean_y) @ res.proj_y
    assert abs(float(torch.corrcoef(torch.stack([u[:, 0], v[:, 0]]))[0, 1]) - 0.9) < 0.02
    torch.testing.assert_close(torch.cov(u.T), torch.eye(3, dtype=torch.float64), atol=1e-3, rtol=0)


def test_B_alignment_follows_the_output_correspondence():
    gen = torch.Generator().manual_seed(0)
    H_i = torch.randn(500, 12, generator=gen, dtype=torch.float64) @ torch.randn(
        12, 12, generator=gen, dtype=torch.float64)
    Q = orthonormal_columns(12, 12, seed=3)  # an orthogonal change of basis
    H_j = H_i @ Q.T
    B_i = orthonormal_rows(3, 12, seed=4).T
    res = cca(H_i, H_j, reg=0.0)
    torch.testing.assert_close(res.correlations, torch.ones(12, dtype=torch.float64), atol=1e-6,
                               rtol=0)
    B_j, _, _ = align_B(H_i, B_i, H_j)  # the ridge leaves this exact: S_yy + ρI = Q(S_xx + ρI)Qᵀ
    torch.testing.assert_close(B_j.double(), Q @ B_i.double(), atol=1e-4, rtol=0)
    # a wider target: the map still returns orthonormal columns, and records its raw deviation
    E = orthonormal_columns(20, 12, seed=5)
    H_w = H_i @ E.T + 0.01 * torch.randn(500, 20, generator=gen, dtype=torch.float64)
    B_w, res_w, raw_err = align_B(H_i, B_i, H_w)
    torch.testing.assert_close(B_w.T @ B_w, torch.eye(3), atol=1e-5, rtol=0)
    assert res_w.correlations[0] > 0.99 and raw_err >= 0.0
    torch.testing.assert_close(B_w.double(), E @ B_i.double(), atol=0.05, rtol=0)


def test_align_features_reports_heldout_figures():
    r = 3
    X_i, X_j = synthetic_pair(400, 16, 28, seed=1)
    feats_i = {"block0.x": LayerFeatures(X_i, X_i @ orthonormal_columns(16, 16, 7).float())}
    feats_j = {"block0.x": LayerFeatures(X_j, X_j)}
    frozen_i = {"block0.x.A": orthonormal_rows(r, 16, seed=0),
                "block0.x.B": orthonormal_rows(r, 16, seed=1).T}
    frozen_j = {"block0.x.A": orthonormal_rows(r, 28, seed=2),
                "block0.x.B": orthonormal_rows(r, 28, seed=3).T}
    new, report = align_features(feats_i, frozen_i, feats_j, frozen_j, steps=300, seed=0)
    (layer,) = report.layers
    assert report.rows_fit == 300 and report.rows_heldout == 100
    assert layer.mse_after < 0.05 * layer.mse_before
    assert layer.a_orth_error < 1e-5 and layer.b_orth_error < 1e-5
    assert new["block0.x.A"].shape == (r, 28) and new["block0.x.B"].shape == (28, r)
    assert len(layer.correlations) == r and layer.correlations[0] > 0.99


def test_tiny_llama_qwen_alignment_and_cache(make_bundle, public_samples, tmp_path):
    def fresh():
        pair = make_bundle("tiny-llava-llama"), make_bundle("tiny-llava-qwen")
        for bundle in pair:
            inject_pqlora(bundle.model, block_map(bundle.num_layers, 1), r=4,
                          modules=("self_attn.q_proj", "mlp.down_proj"))
        return pair

    llama, qwen = fresh()  # the smaller Llama (hidden 128) is the pivot
    before, pivot_before = pq_frozen_state(qwen.model), pq_frozen_state(llama.model)
    report, hit = aligned_pair(llama, qwen, public_samples, cache_dir=tmp_path, steps=200)
    assert not hit
    for la in report.layers:
        log.info("tiny %s: held-out MSE %.3g -> %.3g, canonical correlations fit %s held-out %s",
                 la.key, la.mse_before, la.mse_after, la.correlations, la.heldout_correlations)
        assert la.mse_after < 0.5 * la.mse_before
        assert la.a_orth_error < 1e-5 and la.b_orth_error < 1e-5
    after = pq_frozen_state(qwen.model)
    assert not torch.equal(after["block0.mlp.down_proj.A"], before["block0.mlp.down_proj.A"])
    pivot_after = pq_frozen_state(llama.model)
    assert all(torch.equal(pivot_after[k], pivot_before[k]) for k in pivot_before)  # frozen pivot
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".json", ".safetensors"]
    assert json.loads(next(tmp_path.glob("*.json")).read_text())["report"]["layers"]

    llama2, qwen2 = fresh()
    report2, hit2 = aligned_pair(llama2, qwen2, public_samples, cache_dir=tmp_path, steps=200)
    assert hit2 and report2 == report
    cached = pq_frozen_state(qwen2.model)
    assert all(torch.equal(cached[k], after[k]) for k in after)
    _, hit3 = aligned_pair(*fresh(), public_samples, cache_dir=tmp_path, steps=201)
    assert not hit3  # a different setting is a different cache entry


def test_collected_features_share_inputs_and_skip_outputs(make_bundle, public_samples):
    """q/k/v (and gate/up) keep one copy of the hidden states they read, and ``outputs=False``
    keeps none, without changing a value: checked against a plain hook on every layer."""
    bundle = make_bundle("tiny-llava-qwen")
    inject_pqlora(bundle.model, block_map(bundle.num_layers, 2), r=4)
    samples = list(public_samples[:6])
    assert len(samples) == 6
    plain: dict[str, list[torch.Tensor]] = {}
    mods = pq_modules(bundle.model)
    hooks = [m.base.register_forward_hook(
        lambda mod, args, out, k=k: plain.setdefault(k, []).append((args[0], out)))
        for k, m in mods.items()]
    try:
        full, tokens = collect_features(bundle, samples, batch_size=4)
    finally:
        for h in hooks:
            h.remove()
    lean, tokens2 = collect_features(bundle, samples, batch_size=4, outputs=False)
    assert torch.equal(tokens, tokens2) and len(full) == len(lean) == 14
    batches = [bundle.collate(list(samples[i:i + 4]), train=True) for i in range(0, 6, 4)]
    masks = [b["attention_mask"].bool() for b in batches]
    for key in mods:
        want_in = torch.cat([h.float()[m] for (h, _), m in zip(plain[key], masks)])
        want_out = torch.cat([o.float()[m] for (_, o), m in zip(plain[key], masks)])
        assert torch.equal(full[key].inputs, want_in) and torch.equal(lean[key].inputs, want_in)
        assert torch.equal(full[key].outputs, want_out) and lean[key].outputs is None
    for block in ("block0", "block1"):
        q, k, v = (lean[f"{block}.self_attn.{m}_proj"].inputs for m in "qkv")
        assert q is k is v
        assert lean[f"{block}.mlp.gate_proj"].inputs is lean[f"{block}.mlp.up_proj"].inputs
        assert lean[f"{block}.self_attn.o_proj"].inputs is not q
    frozen = pq_frozen_state(bundle.model)
    with pytest.raises(ValueError, match="needs the base outputs"):
        align_features(lean, frozen, lean, frozen, b_features="layer", steps=1)
