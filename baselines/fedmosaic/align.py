"""Weight alignment of PQ-LoRA across architectures (FedMosaic §4.2.2, A.4, Alg. 3-4).

Before federated training, the frozen ``A`` and ``B`` of paired PQ-LoRA layers (block ``k`` of
one model, block ``k`` of the other) are aligned once on public data, so that heterogeneous
clients start from a shared initialisation and their ``P``/``Q`` can be averaged without
interference. The smaller model is the *pivot*: its orthonormal ``A_i``, ``B_i`` stay as they
are and the larger model's ``A_j``, ``B_j`` move.

* **A** (Eq. 8, 22): minimise ``MSE(A_i h_i, A_j h_j) + λ ‖A_j A_jᵀ - I_r‖²_F`` over ``A_j`` on the
  two models' inputs ``h`` to the paired layer (same public tokens), λ = 0.5, then replace
  ``A_j`` by the nearest matrix with orthonormal rows, ``U Vᵀ`` from the thin SVD
  ``A_j = U Σ Vᵀ`` (Eq. 23-25).
* **B** (Eq. 21): canonical correlation analysis of the two models' output features ``H_i``,
  ``H_j`` gives projections ``Π_i``, ``Π_j`` onto maximally correlated coordinates; ``B_i`` is
  carried over as ``B_j = (Π_j⁺)ᵀ Π_iᵀ B_i`` and its columns are made orthonormal again.

Where the paper's text does not type-check, and how we read it:

* Eq. 22 writes ``‖A_jᵀ A_j - I‖²_F``; with ``A_j ∈ R^{r x d}``, ``r < d``, ``A_jᵀ A_j`` (``d x d``,
  rank ``r``) can never be ``I``. The constraint of Eq. 20 is ``A Aᵀ = I_r``, so the penalty here
  is ``‖A_j A_jᵀ - I_r‖²_F`` (and Eq. 23's constraint likewise ``A* A*ᵀ = I``). Eq. 24-25's full
  SVD (``V ∈ R^{d x d}``) is read as the thin SVD, which gives ``U Vᵀ ∈ R^{r x d}``.
* A.4 writes ``B_j = (Π_i⁻¹)ᵀ Π_iᵀ B_i``; §4.2.2 and Alg. 4 have ``(Π_j⁻¹)ᵀ``, which we use,
  with the pseudo-inverse since ``Π_j`` is ``d_j x k``, not square.
* A.4 claims the CCA map keeps ``B_j`` orthonormal; it does not in general (``Π`` whitens, it is
  not orthogonal), so ``B_j`` is projected to the nearest orthonormal-column matrix afterwards
  (the report records how far it was).
* "Output features from ``B_1`` and ``B_2``" (§4.2.2, Alg. 4): the output of ``B`` itself
  (with ``P = I``), i.e. ``B_j A_j h``, as the public code hooks it too. That is the default,
  ``b_features="adapter"``. Those features are linear in the already aligned ``A`` features, so
  the CCA map then mostly reproduces ``B_j``'s own random initialisation; ``b_features="layer"``
  is a recorded option that correlates the output of the frozen base layer ``W_p h`` instead
  (the space ``B`` writes into).
* The public code's orthogonality term is the mean squared cosine between the *columns* of
  ``A`` (a ``d x d`` matrix), weighted 0.5 and averaged over layers; we use Eq. 22 (corrected).

Aligned weights are cached per model pair (:func:`aligned_pair`) as one safetensors file plus a
JSON report, keyed by a hash of both models' names and configs, the rank, the seed and every
alignment setting. Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors.torch import load_file, save_file

from baselines.fedmosaic.pqlora import (
    adapters_off,
    load_pq_frozen_state,
    pq_frozen_state,
    pq_modules,
)

__all__ = [
    "CCAResult",
    "cca",
    "orthogonality_penalty",
    "nearest_row_orthonormal",
    "nearest_column_orthonormal",
    "align_A",
    "align_B",
    "LayerFeatures",
    "collect_features",
    "LayerAlignment",
    "AlignmentReport",
    "align_features",
    "align_pair",
    "alignment_key",
    "aligned_pair",
]

log = logging.getLogger(__name__)

_CACHE_VERSION = 1


# --------------------------------------------------------------------------- linear algebra

@dataclass
class CCAResult:
    """Canonical correlation analysis of ``X`` (``m x d_x``) and ``Y`` (``m x d_y``).

    ``(X - mean_x) @ proj_x`` and ``(Y - mean_y) @ proj_y`` have identity covariance (up to the
    ridge) and their ``i``-th columns correlate with ``correlations[i]``, in decreasing order.
    """

    proj_x: torch.Tensor
    proj_y: torch.Tensor
    correlations: torch.Tensor
    mean_x: torch.Tensor
    mean_y: torch.Tensor


def _inv_sqrt(S: torch.Tensor) -> torch.Tensor:
    vals, vecs = torch.linalg.eigh(S)
    return (vecs * vals.clamp_min(torch.finfo(S.dtype).tiny).rsqrt()) @ vecs.T


def cca(X: torch.Tensor, Y: torch.Tensor, *, k: int | None = None, reg: float = 1e-4) -> CCAResult:
    """Canonical correlation analysis by whitening and SVD (De Bie et al., 2005).

    With ``S_xx``, ``S_yy``, ``S_xy`` the (co)variances of the centred data, ``M = S_xx^{-1/2}
    S_xy S_yy^{-1/2} = U diag(ρ) Vᵀ``; the projections are ``Π_x = S_xx^{-1/2} U`` and
    ``Π_y = S_yy^{-1/2} V`` and ``ρ`` are the canonical correlations.

    Parameters
    ----------
    X, Y : Tensor
        Paired rows (same ``m``), any widths. Computed in float64.
    k : int, optional
        Number of canonical pairs (default and maximum ``min(d_x, d_y)``).
    reg : float
        Ridge added to each covariance, relative to its mean eigenvalue
        (``S + reg · tr(S)/d · I``), so rank-deficient features (more dimensions than samples)
        stay invertible.

    Raises
    ------
    ValueError
        When the row counts differ or there are fewer than two rows.
    """
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"cca needs two matrices with the same rows, got {tuple(X.shape)} and "
                         f"{tuple(Y.shape)}")
    m = X.shape[0]
    if m < 2:
        raise ValueError(f"cca needs at least 2 rows, got {m}")
    kmax = min(X.shape[1], Y.shape[1])
    k = kmax if k is None else int(k)
    if not 1 <= k <= kmax:
        raise ValueError(f"k must be in [1, {kmax}], got {k}")
    X = X.detach().to(torch.float64)
    Y = Y.detach().to(torch.float64)
    mx, my = X.mean(0), Y.mean(0)
    Xc, Yc = X - mx, Y - my
    sxx = Xc.T @ Xc / (m - 1)
    syy = Yc.T @ Yc / (m - 1)
    sxy = Xc.T @ Yc / (m - 1)
    sxx = sxx + reg * (torch.trace(sxx) / sxx.shape[0]) * torch.eye(sxx.shape[0], dtype=X.dtype)
    syy = syy + reg * (torch.trace(syy) / syy.shape[0]) * torch.eye(syy.shape[0], dtype=X.dtype)
    wx, wy = _inv_sqrt(sxx), _inv_sqrt(syy)
    u, s, vt = torch.linalg.svd(wx @ sxy @ wy, full_matrices=False)
    return CCAResult(
        proj_x=wx @ u[:, :k],
        proj_y=wy @ vt[:k].T,
        correlations=s[:k].clamp(0.0, 1.0),
        mean_x=mx,
        mean_y=my,
    )


def orthogonality_penalty(A: torch.Tensor) -> torch.Tensor:
    """``‖A Aᵀ - I_r‖²_F`` for ``A ∈ R^{r x d}``: zero iff the rows are orthonormal (Eq. 22, corrected)."""
    gram = A @ A.T
    return ((gram - torch.eye(A.shape[0], dtype=A.dtype, device=A.device)) ** 2).sum()


def nearest_row_orthonormal(A: torch.Tensor) -> torch.Tensor:
    """The matrix with orthonormal rows nearest to ``A`` in Frobenius norm: ``U Vᵀ`` (Eq. 23-25).

    ``A = U Σ Vᵀ`` is the thin SVD (``U ∈ R^{r x r}``, ``V ∈ R^{d x r}``); computed in float64 and
    returned in ``A``'s dtype.
    """
    if A.shape[0] > A.shape[1]:
        raise ValueError(f"A must be wide (r <= d) to have orthonormal rows, got {tuple(A.shape)}")
    u, _, vt = torch.linalg.svd(A.detach().to(torch.float64), full_matrices=False)
    return (u @ vt).to(A.dtype)


def nearest_column_orthonormal(B: torch.Tensor) -> torch.Tensor:
    """The matrix with orthonormal columns nearest to ``B`` (``d x r``, ``r <= d``)."""
    return nearest_row_orthonormal(B.T).T.contiguous()


def align_A(
    X_pivot: torch.Tensor,
    A_pivot: torch.Tensor,
    X_other: torch.Tensor,
    A_other: torch.Tensor,
    *,
    lam: float = 0.5,
    steps: int = 500,
    lr: float = 1e-2,
    batch_size: int | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """Align the other model's ``A`` to the pivot's on paired inputs (Eq. 8, 22-25).

    Minimises ``mean((X_other A_jᵀ - X_pivot A_iᵀ)²) + lam ‖A_j A_jᵀ - I‖²_F`` over ``A_j``,
    starting from ``A_other``, with Adam (full batch, or seeded mini-batches of ``batch_size``
    rows), then projects the result to orthonormal rows.

    Parameters
    ----------
    X_pivot, X_other : Tensor
        ``m x d_i`` and ``m x d_j`` inputs of the paired layers for the same public tokens.
    A_pivot, A_other : Tensor
        ``r x d_i`` (frozen) and ``r x d_j`` (the starting point).

    Returns
    -------
    Tensor
        The aligned ``A_j`` (``r x d_j``, float32) with ``A_j A_jᵀ = I``.
    """
    if X_pivot.shape[0] != X_other.shape[0]:
        raise ValueError(f"paired features need equal rows, got {X_pivot.shape[0]} and "
                         f"{X_other.shape[0]}")
    if A_pivot.shape[0] != A_other.shape[0]:
        raise ValueError(f"ranks differ: {A_pivot.shape[0]} vs {A_other.shape[0]}")
    target = (X_pivot.detach().float() @ A_pivot.detach().float().T)
    X = X_other.detach().float()
    A = torch.nn.Parameter(A_other.detach().float().clone())
    opt = torch.optim.Adam([A], lr=lr)
    gen = torch.Generator().manual_seed(int(seed))
    m = X.shape[0]
    for _ in range(int(steps)):
        if batch_size is None or batch_size >= m:
            xb, tb = X, target
        else:
            idx = torch.randperm(m, generator=gen)[:batch_size]
            xb, tb = X[idx], target[idx]
        loss = ((xb @ A.T - tb) ** 2).mean() + lam * orthogonality_penalty(A)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return nearest_row_orthonormal(A.detach())


def align_B(H_pivot: torch.Tensor, B_pivot: torch.Tensor, H_other: torch.Tensor, *,
            reg: float = 1e-4) -> tuple[torch.Tensor, CCAResult, float]:
    """Carry the pivot's ``B`` into the other model's output space by CCA (Eq. 21).

    ``B_j = (Π_j⁺)ᵀ Π_iᵀ B_i`` with ``Π_i``, ``Π_j`` from :func:`cca` of ``(H_pivot, H_other)``,
    then projected to orthonormal columns.

    Returns
    -------
    B_other : Tensor
        ``d_j x r`` float32 with ``Bᵀ B = I``.
    result : CCAResult
        The CCA fit (its ``correlations`` are the canonical correlations).
    orth_error : float
        ``max |B̃ᵀ B̃ / s - I|`` of the map's raw output ``B̃`` (``s`` the mean squared column norm):
        how far the CCA map alone is from keeping ``B`` orthogonal.
    """
    res = cca(H_pivot, H_other, reg=reg)
    if B_pivot.shape[1] > res.proj_x.shape[1]:
        raise ValueError(f"rank {B_pivot.shape[1]} exceeds the {res.proj_x.shape[1]} canonical "
                         "pairs; lower r")
    raw = torch.linalg.pinv(res.proj_y).T @ (res.proj_x.T @ B_pivot.detach().to(torch.float64))
    gram = raw.T @ raw
    gram = gram / torch.diagonal(gram).mean()
    orth_error = float((gram - torch.eye(gram.shape[0], dtype=gram.dtype)).abs().max())
    return nearest_column_orthonormal(raw).float(), res, orth_error


# --------------------------------------------------------------------------- features

@dataclass
class LayerFeatures:
    """Inputs ``h_I`` (``m x d_I``) and base outputs ``W_p h_I`` (``m x d_O``) of one PQ-LoRA layer.

    ``outputs`` is None when they were not collected (only ``b_features="layer"`` reads them).
    Layers that read the same tensor (a decoder layer's q/k/v projections, its gate/up
    projections) share one ``inputs`` tensor.
    """

    inputs: torch.Tensor
    outputs: torch.Tensor | None


def collect_features(bundle: Any, samples: Sequence[Mapping[str, Any]], *, batch_size: int = 8,
                     pool: Literal["tokens", "mean"] = "tokens", outputs: bool = True
                     ) -> tuple[dict[str, LayerFeatures], torch.Tensor]:
    """Inputs and base outputs of every PQ-LoRA layer of ``bundle.model`` on ``samples``.

    The model runs with all adapters off (Alg. 3, ``scale=0``), in eval mode, without gradients,
    on ``bundle.collate(samples, train=True)`` (prompt and answer). Padding is dropped.

    Memory: with ``pool="tokens"`` every attended token of every sample is a row, for every
    layer. Layers fed by one tensor keep one copy of it (q/k/v read the same hidden states), and
    ``outputs=False`` keeps no outputs; neither changes a value.

    Parameters
    ----------
    bundle : ModelBundle
        Anything with ``model`` (PQ-LoRA injected) and ``collate``.
    pool : {"tokens", "mean"}
        One row per attended token (two models pair token by token, which needs one tokenizer),
        or one row per sample, the mean over its tokens (pairs across tokenizers).
    outputs : bool
        Collect the base outputs too (``align_features(b_features="layer")`` needs them).

    Returns
    -------
    features : dict
        ``"block{k}.{module}"`` -> :class:`LayerFeatures` (float32, CPU).
    tokens : Tensor
        The token ids behind the rows (``pool="tokens"``) or each sample's token count
        (``"mean"``), to check that two models saw the same thing.
    """
    if pool not in ("tokens", "mean"):
        raise ValueError(f"pool must be 'tokens' or 'mean', got {pool!r}")
    model = bundle.model
    mods = pq_modules(model)
    if not mods:
        raise KeyError("the model has no PQ-LoRA layer; add them with inject_pqlora")
    captured: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}

    def hook_for(key: str):
        def hook(module, args, output):
            # the tensor itself (no_grad holds): its identity says which layers read one input
            captured[key] = (args[0], output if outputs else None)
        return hook

    def pooled(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = h.detach().float().cpu()
        if pool == "tokens":
            return h[mask]
        w = mask.unsqueeze(-1).float()
        return (h * w).sum(1) / w.sum(1).clamp_min(1.0)

    handles = [m.base.register_forward_hook(hook_for(k)) for k, m in mods.items()]
    # the key whose input each layer shares (itself when it reads a tensor of its own); fixed
    # on the first batch and checked on every later one
    source: dict[str, str] = {}
    ins: dict[str, list[torch.Tensor]] = {}
    outs: dict[str, list[torch.Tensor]] = {k: [] for k in mods}
    tokens: list[torch.Tensor] = []
    was_training = model.training
    try:
        model.eval()
        with adapters_off(model), torch.no_grad():
            for start in range(0, len(samples), batch_size):
                batch = bundle.collate(list(samples[start:start + batch_size]), train=True)
                captured.clear()
                model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False)
                mask = batch["attention_mask"].bool().cpu()
                owner: dict[int, str] = {}
                for key in mods:
                    first = owner.setdefault(id(captured[key][0]), key)
                    if source.setdefault(key, first) != first:
                        raise RuntimeError(f"{key}: its input tensor changed owner between "
                                           f"batches ({source[key]} then {first})")
                for key in mods:
                    h_in, h_out = captured[key]
                    if source[key] == key:
                        ins.setdefault(key, []).append(pooled(h_in, mask))
                    if h_out is not None:
                        outs[key].append(pooled(h_out, mask))
                ids = batch["input_ids"].cpu()
                tokens.append(ids[mask] if pool == "tokens" else mask.sum(1))
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    merged = {k: torch.cat(v) for k, v in ins.items()}
    feats = {k: LayerFeatures(merged[source[k]], torch.cat(outs[k]) if outputs else None)
             for k in mods}
    return feats, torch.cat(tokens)


# --------------------------------------------------------------------------- reports

@dataclass
class LayerAlignment:
    """What alignment did to one PQ-LoRA layer (``block{k}.{module}``)."""

    key: str
    mse_before: float
    mse_after: float
    a_orth_error: float
    b_orth_error: float
    b_map_orth_error: float
    correlations: list[float]
    heldout_correlations: list[float] = field(default_factory=list)


@dataclass
class AlignmentReport:
    """Per-layer figures of one alignment (MSEs on held-out rows), JSON-able."""

    pivot: str
    other: str
    rows_fit: int
    rows_heldout: int
    settings: dict[str, Any]
    layers: list[LayerAlignment] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AlignmentReport:
        layers = [LayerAlignment(**d) for d in data.get("layers", [])]
        return cls(**{**{k: v for k, v in data.items() if k != "layers"}, "layers": layers})

    @property
    def mse_before(self) -> float:
        """Mean held-out MSE of the r-dim features over layers, before alignment."""
        return sum(la.mse_before for la in self.layers) / max(len(self.layers), 1)

    @property
    def mse_after(self) -> float:
        """Mean held-out MSE of the r-dim features over layers, after alignment."""
        return sum(la.mse_after for la in self.layers) / max(len(self.layers), 1)


def _split(m: int, holdout: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    if not 0.0 < holdout < 1.0:
        raise ValueError(f"holdout must be in (0, 1), got {holdout}")
    perm = torch.randperm(m, generator=torch.Generator().manual_seed(int(seed)))
    n_test = max(1, int(round(m * holdout)))
    if m - n_test < 2:
        raise ValueError(f"{m} rows leave fewer than 2 to fit after a {holdout} holdout; "
                         "give more public samples")
    return perm[n_test:], perm[:n_test]


def _heldout_corr(res: CCAResult, H_x: torch.Tensor, H_y: torch.Tensor, k: int) -> list[float]:
    """Correlation of the first ``k`` canonical pairs on rows the CCA was not fitted on."""
    u = (H_x.double() - res.mean_x) @ res.proj_x[:, :k]
    v = (H_y.double() - res.mean_y) @ res.proj_y[:, :k]
    u, v = u - u.mean(0), v - v.mean(0)
    den = (u.norm(dim=0) * v.norm(dim=0)).clamp_min(1e-300)
    return [float(c) for c in (u * v).sum(0) / den]


def _mse(X_p, A_p, X_o, A_o) -> float:
    return float(((X_o.float() @ A_o.float().T - X_p.float() @ A_p.float().T) ** 2).mean())


def align_features(
    pivot_feats: Mapping[str, LayerFeatures],
    pivot_frozen: Mapping[str, torch.Tensor],
    other_feats: Mapping[str, LayerFeatures],
    other_frozen: Mapping[str, torch.Tensor],
    *,
    lam: float = 0.5,
    steps: int = 500,
    lr: float = 1e-2,
    batch_size: int | None = None,
    holdout: float = 0.25,
    seed: int = 0,
    b_features: Literal["adapter", "layer"] = "adapter",
    reg: float = 1e-4,
    names: tuple[str, str] = ("pivot", "other"),
) -> tuple[dict[str, torch.Tensor], AlignmentReport]:
    """Align every paired layer from collected features (the pure core of Alg. 3-4).

    Parameters
    ----------
    pivot_feats, other_feats : mapping
        ``key -> LayerFeatures`` with paired rows (see :func:`collect_features`).
    pivot_frozen, other_frozen : mapping
        ``key.A`` / ``key.B`` tensors (:func:`~baselines.fedmosaic.pqlora.pq_frozen_state`).
    holdout : float
        Fraction of rows (seeded split) kept out of the fit; the report's MSEs are on them.
    b_features : {"adapter", "layer"}
        CCA on ``B A h`` (default: the paper and the public code) or on the base layer's
        outputs.

    Returns
    -------
    other_aligned : dict
        The other model's new frozen state (same keys as ``other_frozen``).
    report : AlignmentReport
    """
    if b_features not in ("layer", "adapter"):
        raise ValueError(f"b_features must be 'layer' or 'adapter', got {b_features!r}")
    keys = sorted(pivot_feats)
    if sorted(other_feats) != keys:
        raise KeyError("the two models' PQ-LoRA layers differ "
                       f"({sorted(set(keys) ^ set(other_feats))[:3]}); use the same N_B and modules")
    out = dict(other_frozen)
    settings = {"lam": lam, "steps": steps, "lr": lr, "batch_size": batch_size,
                "holdout": holdout, "seed": seed, "b_features": b_features, "reg": reg}
    report = AlignmentReport(names[0], names[1], 0, 0, settings)
    for key in keys:
        fp, fo = pivot_feats[key], other_feats[key]
        m = fp.inputs.shape[0]
        if fo.inputs.shape[0] != m:
            raise ValueError(f"{key}: {m} pivot rows but {fo.inputs.shape[0]} other rows; "
                             "features must be paired")
        fit, test = _split(m, holdout, seed)
        A_p, B_p = pivot_frozen[f"{key}.A"], pivot_frozen[f"{key}.B"]
        A_o = other_frozen[f"{key}.A"]
        before = _mse(fp.inputs[test], A_p, fo.inputs[test], A_o)
        A_new = align_A(fp.inputs[fit], A_p, fo.inputs[fit], A_o, lam=lam, steps=steps, lr=lr,
                        batch_size=batch_size, seed=seed)
        after = _mse(fp.inputs[test], A_p, fo.inputs[test], A_new)
        if b_features == "layer":
            if fp.outputs is None or fo.outputs is None:
                raise ValueError(f"{key}: b_features='layer' needs the base outputs; collect "
                                 "them with collect_features(..., outputs=True)")
            H_p, H_o = fp.outputs, fo.outputs
        else:
            old_B = other_frozen[f"{key}.B"].float()
            H_p = fp.inputs @ A_p.float().T @ B_p.float().T
            H_o = fo.inputs @ A_new.T @ old_B.T
        B_new, res, map_err = align_B(H_p[fit], B_p, H_o[fit], reg=reg)
        r = A_new.shape[0]
        out[f"{key}.A"] = A_new.to(A_o.dtype)
        out[f"{key}.B"] = B_new.to(other_frozen[f"{key}.B"].dtype)
        eye = torch.eye(A_new.shape[0], dtype=torch.float64)
        report.layers.append(LayerAlignment(
            key=key,
            mse_before=before,
            mse_after=after,
            a_orth_error=float((A_new.double() @ A_new.double().T - eye).abs().max()),
            b_orth_error=float((B_new.double().T @ B_new.double() - eye).abs().max()),
            b_map_orth_error=map_err,
            correlations=[round(float(c), 6) for c in res.correlations[:r]],
            heldout_correlations=[round(c, 6) for c in _heldout_corr(res, H_p[test], H_o[test], r)],
        ))
        report.rows_fit, report.rows_heldout = len(fit), len(test)
    return out, report


def align_pair(pivot: Any, other: Any, samples: Sequence[Mapping[str, Any]], *,
               collect_batch_size: int = 8, pool: Literal["tokens", "mean"] = "tokens",
               **kwargs: Any) -> AlignmentReport:
    """Align ``other``'s PQ-LoRA ``A``/``B`` to ``pivot``'s on public ``samples``, in place.

    Both bundles must carry PQ-LoRA on the same blocks and modules with the same rank
    (:func:`~baselines.fedmosaic.pqlora.inject_pqlora`). The paper's pivot is the smaller model.
    ``kwargs`` go to :func:`align_features`.

    Raises
    ------
    ValueError
        With ``pool="tokens"``, when the two models tokenise the samples differently (use
        ``pool="mean"``).
    """
    layer = kwargs.get("b_features", "adapter") == "layer"  # only then are outputs read
    fp, tp = collect_features(pivot, samples, batch_size=collect_batch_size, pool=pool,
                              outputs=layer)
    fo, to = collect_features(other, samples, batch_size=collect_batch_size, pool=pool,
                              outputs=layer)
    if tp.shape != to.shape or not torch.equal(tp, to):
        raise ValueError(
            f"{getattr(pivot, 'name', 'pivot')} and {getattr(other, 'name', 'other')} tokenise the "
            "public samples differently, so their features cannot pair token by token; "
            "use pool='mean'"
        )
    names = (str(getattr(pivot, "name", "pivot")), str(getattr(other, "name", "other")))
    aligned, report = align_features(fp, pq_frozen_state(pivot.model), fo,
                                     pq_frozen_state(other.model), names=names, **kwargs)
    load_pq_frozen_state(other.model, aligned)
    report.settings["pool"] = pool
    return report


# --------------------------------------------------------------------------- cache

def _model_config(model: Any) -> Any:
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        base = getattr(model, "get_base_model", None)
        config = base().config if base is not None else None
    return config.to_dict() if config is not None and hasattr(config, "to_dict") else None


def alignment_key(pivot: Any, other: Any, samples: Sequence[Mapping[str, Any]], *,
                  settings: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> str:
    """Hex sha256 naming one alignment: both models (name, config, PQ layout and seed-defined
    ``A``/``B``), the public sample ids, every setting and ``extra`` (e.g. a weights hash)."""

    def side(bundle: Any) -> dict[str, Any]:
        frozen = pq_frozen_state(bundle.model)
        digest = hashlib.sha256()
        for k in sorted(frozen):
            digest.update(k.encode())
            digest.update(frozen[k].float().numpy().tobytes())
        return {"name": str(getattr(bundle, "name", type(bundle.model).__name__)),
                "config": _model_config(bundle.model), "frozen": digest.hexdigest()}

    material = {
        "version": _CACHE_VERSION,
        "pivot": side(pivot),
        "other": side(other),
        "samples": hashlib.sha256(
            "\n".join(str(s.get("id", i)) for i, s in enumerate(samples)).encode()).hexdigest(),
        "settings": dict(settings),
        "extra": dict(extra or {}),
    }
    blob = json.dumps(material, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def aligned_pair(pivot: Any, other: Any, samples: Sequence[Mapping[str, Any]], *,
                 cache_dir: str | os.PathLike, extra: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> tuple[AlignmentReport, bool]:
    """:func:`align_pair` with a cache: reuse the aligned ``A``/``B`` of an identical earlier run.

    The cache holds ``<key>.safetensors`` (the other model's aligned ``A``/``B``) and
    ``<key>.json`` (the report), with ``key`` from :func:`alignment_key` over the models (their
    initial ``A``/``B`` included, so ``r`` and the seed enter), the samples and ``kwargs``.

    Returns
    -------
    report : AlignmentReport
    hit : bool
        True when the weights came from the cache.
    """
    root = Path(cache_dir)
    settings = {k: kwargs[k] for k in sorted(kwargs)}
    key = alignment_key(pivot, other, samples, settings=settings, extra=extra)
    weights, meta = root / f"{key}.safetensors", root / f"{key}.json"
    if weights.is_file() and meta.is_file():
        load_pq_frozen_state(other.model, load_file(str(weights)))
        report = AlignmentReport.from_dict(json.loads(meta.read_text())["report"])
        log.info("reused PQ-LoRA alignment %s from %s", key[:12], root)
        return report, True
    report = align_pair(pivot, other, samples, **kwargs)
    root.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in pq_frozen_state(other.model).items()}
    tmp_w, tmp_m = weights.with_suffix(".safetensors.tmp"), meta.with_suffix(".json.tmp")
    save_file(state, str(tmp_w), metadata={"key": key})
    tmp_m.write_text(json.dumps({"key": key, "report": report.to_dict()}, indent=1, sort_keys=True))
    os.replace(tmp_w, weights)
    os.replace(tmp_m, meta)
    return report, False
