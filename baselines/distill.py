"""Pieces the distillation baselines share: losses, fixed public batches, ensemble targets.

PerAda, TAKFL and FedMKT distil on the benchmark's public samples at the server
(:class:`~baselines.base.ServerHandle`); FedMKT's clients distil on them too. Every method here
draws its batches the same way: the first ``size`` public samples in their stable order, cut
into fixed batches, so that a teacher's logits and a student's are computed on the same rows
and a rerun distils on the same data.

Targets are probabilities. Where a teacher and a student do not share a vocabulary (a
cross-family pair with different tokenizers) the teacher's probabilities are moved onto the
student's tokens by :mod:`baselines.token_align` and renormalised there; they are never
re-softmaxed as if they were logits (the released FedMosaic code does that, which flattens the
target towards uniform: :data:`RESOFTMAX` keeps it as a recorded option).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from drake.errors import DrakeError

#: the released FedMosaic code's cross-family target: aligned probabilities softmaxed again
RENORMALISE, RESOFTMAX = "renormalise", "resoftmax"


def kd_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float, *,
            t_squared: bool = True) -> torch.Tensor:
    """``T² · KL(softmax(teacher/T) ‖ softmax(student/T))``, the mean over rows (PyTorch's
    ``kl_div(log_softmax(student/T), softmax(teacher/T), "batchmean") · T²``; without the
    ``T²`` where ``t_squared`` is false, as FedDF and PerAda write it); gradients reach both
    arguments unless one is detached."""
    t = float(temperature)
    kl = F.kl_div(F.log_softmax(student / t, dim=-1), F.softmax(teacher / t, dim=-1),
                  reduction="batchmean")
    return kl * t * t if t_squared else kl


def kd_probs(student: torch.Tensor, target: torch.Tensor, temperature: float) -> torch.Tensor:
    """``T² · KL(target ‖ softmax(student/T))`` for a target given as probabilities (an ensemble
    mean or an aligned teacher), the mean over rows."""
    t = float(temperature)
    return F.kl_div(F.log_softmax(student / t, dim=-1), target, reduction="batchmean") * t * t


def soft_ce(student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``−Σ_v target_v · log softmax(student)_v``, the mean over rows: FedMKT's soft
    cross-entropy against a target distribution."""
    return -(target * F.log_softmax(student, dim=-1)).sum(-1).mean()


def label_rows(batch: Mapping[str, Any], n: int) -> torch.Tensor:
    """Which of the batch's ``n`` samples each labelled position belongs to, in the order
    :meth:`~baselines.base.ClientHandle.logits` returns the positions: a LLaVA batch's
    answer tokens (``labels`` ``[B, L]``), or a CLIP batch's one row per image."""
    labels = batch["labels"]
    if labels.dim() == 1:
        return torch.arange(n)
    return torch.nonzero(labels[:, 1:] != -100, as_tuple=True)[0]


def sample_ce(logits: torch.Tensor, labels: torch.Tensor, rows: torch.Tensor,
              n: int, *, probs: bool = False) -> torch.Tensor:
    """Each sample's mean cross-entropy over its labelled positions ``[n]`` (``logits`` may be
    probabilities with ``probs=True``): FedMKT's per-sample selection score."""
    if probs:
        tok = -torch.log(logits.gather(1, labels[:, None]).squeeze(1).clamp_min(1e-12))
    else:
        tok = F.cross_entropy(logits, labels, reduction="none")
    total = torch.zeros(n, dtype=tok.dtype).index_add_(0, rows, tok)
    count = torch.zeros(n, dtype=tok.dtype).index_add_(0, rows, torch.ones_like(tok))
    return total / count.clamp_min(1)


def public_batches(public: Sequence[Mapping[str, Any]], size: int, batch_size: int, *,
                   method: str) -> list[list[Mapping[str, Any]]]:
    """``size`` public samples (all of them if fewer), evenly spaced over the public split's
    stable order so that every public task is represented, in fixed batches of
    ``batch_size``. Raises when the benchmark has no public samples, naming the fix."""
    if not len(public):
        raise DrakeError(f"{method} distils on the benchmark's public samples and this build "
                         f"has none; run it on a benchmark with a public split (drake-synth, or "
                         f"DRAKE/HFLB built with their public alignment set)")
    n = len(public)
    rows = [public[i * n // size] for i in range(size)] if size < n else list(public)
    return [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]


def split_validation(batches: list[list[Mapping[str, Any]]], fraction: float
                     ) -> tuple[list[list[Mapping[str, Any]]], list[list[Mapping[str, Any]]]]:
    """The last ``fraction`` of the batches (at least one, where there are two or more) held
    out for validation; the rest to distil on."""
    if len(batches) < 2 or fraction <= 0:
        return batches, []
    k = min(len(batches) - 1, max(1, round(len(batches) * fraction)))
    return batches[:-k], batches[-k:]


def ensemble_logits(handle: Any, adapter: str, states: Sequence[Mapping[str, torch.Tensor]],
                    batches: Sequence[Mapping[str, Any]]) -> list[torch.Tensor]:
    """Per batch, the mean over ``states`` of the logits of ``handle`` with ``adapter`` set to
    each state, without gradients (FedDF's ensemble teacher: averaged logits). The handle's
    adapter is left at the last state."""
    sums: list[Any] = [None] * len(batches)
    for state in states:
        handle.set(adapter, state)
        for i, (z, _) in enumerate(logits_of(handle, adapter, batches)):
            sums[i] = z if sums[i] is None else sums[i] + z
    return [total / len(states) for total in sums]


def logits_of(handle: Any, adapter: str, batches: Sequence[Mapping[str, Any]]
              ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(logits, labels)`` of each batch with ``adapter`` as it is, without gradients."""
    with torch.no_grad():
        return [tuple(t.detach() for t in handle.logits(b, [adapter], trainable=[]))
                for b in batches]


def validation_accuracy(handle: Any, adapter: str, batches: Sequence[Mapping[str, Any]]
                        ) -> float:
    """The share of validation samples whose every labelled token is the argmax of
    ``adapter``'s logits (teacher-forced exact match; a CLIP batch: top-1 accuracy): the
    early-stopping and λ-validation score of the server's distillation, as PerAda and TAKFL
    validate by accuracy."""
    right, total = 0, 0
    for batch, (z, y) in zip(batches, logits_of(handle, adapter, batches)):
        n = len(batch["labels"])
        rows = label_rows(batch, n)
        wrong = torch.zeros(n, dtype=torch.long).index_add_(0, rows, (z.argmax(-1) != y).long())
        right += int((wrong == 0).sum())
        total += n
    return right / max(total, 1)


def state_delta(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]
                ) -> dict[str, torch.Tensor]:
    """``a − b``, key by key (a task vector)."""
    return {k: a[k] - b[k] for k in sorted(a)}


def add_scaled(base: Mapping[str, torch.Tensor],
               terms: Sequence[tuple[float, Mapping[str, torch.Tensor]]]
               ) -> dict[str, torch.Tensor]:
    """``base + Σ λ_j τ_j``, key by key (task arithmetic), in float64 and back to each key's
    dtype."""
    out = {}
    for k in sorted(base):
        acc = base[k].to(torch.float64).clone()
        for lam, tau in terms:
            acc += float(lam) * tau[k].to(torch.float64)
        out[k] = acc.to(base[k].dtype)
    return out


class TeacherTargets:
    """Ensemble targets on fixed public batches, per teacher architecture, delivered on a
    student's tokens.

    :meth:`add` computes a teacher group's ensemble (the mean of its adapters' logits) on the
    batches, collated by the teacher's own model; :meth:`on` gives ``softmax(z̄/T)`` per batch
    as the student's labelled positions see it: unchanged where the two models share a
    vocabulary, else moved position by position through :mod:`baselines.token_align`
    (renormalised, or re-softmaxed with ``resoftmax``).
    """

    def __init__(self, server: Any, adapter: str, batches: Sequence[Sequence[Mapping[str, Any]]],
                 round: int, *, resoftmax: bool = False, top_k: int = 128) -> None:
        self.server, self.adapter, self.batches, self.round = server, adapter, batches, round
        self.resoftmax, self.top_k = resoftmax, top_k
        self._probs: dict[str, list[torch.Tensor]] = {}
        self._labels: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self._maps: dict[tuple[str, str], torch.Tensor | None] = {}
        self._tokenizers: dict[str, Any] = {}

    def _tokenizer(self, arch: str) -> Any:
        if arch not in self._tokenizers:
            self._tokenizers[arch] = self.server.model(arch, {}, round=self.round).bundle.tokenizer
        return self._tokenizers[arch]

    def _tokens(self, arch: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per batch, ``arch``'s labelled tokens and their sample rows."""
        if arch not in self._labels:
            handle = self.server.model(arch, {}, round=self.round)
            out = []
            for samples in self.batches:
                batch = handle.batch(samples)
                labels = batch["labels"]
                rows = label_rows(batch, len(samples))
                out.append((labels if labels.dim() == 1 else labels[:, 1:][labels[:, 1:] != -100],
                            rows))
            self._labels[arch] = out
        return self._labels[arch]

    def add(self, arch: str, states: Sequence[Mapping[str, torch.Tensor]],
            temperature: float) -> None:
        handle = self.server.model(arch, {}, round=self.round)
        batches = [handle.batch(b) for b in self.batches]
        self._probs[arch] = [F.softmax(z / float(temperature), dim=-1) for z in
                             ensemble_logits(handle, self.adapter, states, batches)]

    def on(self, student: str, teacher: str) -> list[torch.Tensor]:
        return self.move(self._probs[teacher], teacher, student)

    def move(self, probs: Sequence[torch.Tensor], teacher: str, student: str
             ) -> list[torch.Tensor]:
        """Per batch, ``probs`` (at the teacher's labelled positions, over its vocabulary) on
        the student's labelled positions and vocabulary."""
        from baselines.token_align import transfer, vocab_map

        s_tok, t_tok = self._tokenizer(student), self._tokenizer(teacher)
        if (teacher, student) not in self._maps:  # None: one vocabulary, nothing to move
            same = student == teacher or s_tok.get_vocab() == t_tok.get_vocab()
            self._maps[(teacher, student)] = None if same else vocab_map(t_tok.get_vocab(),
                                                                         s_tok.get_vocab())
        vmap = self._maps[(teacher, student)]
        if vmap is None:
            return list(probs)
        size = len(s_tok.get_vocab())
        out = []
        for p, (s_ids, s_rows), (t_ids, t_rows) in zip(probs, self._tokens(student),
                                                       self._tokens(teacher)):
            target = torch.zeros(len(s_ids), size, dtype=p.dtype)
            for n in range(int(s_rows.max()) + 1 if len(s_rows) else 0):
                si, ti = (s_rows == n).nonzero()[:, 0], (t_rows == n).nonzero()[:, 0]
                target[si] = transfer(
                    s_tok.convert_ids_to_tokens(s_ids[si].tolist()), s_ids[si].tolist(),
                    t_tok.convert_ids_to_tokens(t_ids[ti].tolist()), t_ids[ti].tolist(),
                    p[ti], vmap, size, top_k=self.top_k, resoftmax=self.resoftmax)
            out.append(target)
        return out
