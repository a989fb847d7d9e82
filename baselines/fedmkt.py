"""FedMKT (Fan et al. 2024): mutual knowledge transfer through logits on public data.

Clients never send parameters. Each round, a client

1. distils the logits its group's server model sent last round (see below) into its adapter, on
   the fixed public batches;
2. trains on its own data with CE;
3. sends its top-``k`` logits (``k`` = 128) at every answer position of the public batches,
   with each public sample's cross-entropy.

The server holds one model per architecture group (FedMosaic's reading: each group's global
LoRA plays FedMKT's large model). Per group it distils every uploaded client's logits into its
model on the public batches, then sends its own new top-``k`` logits to the group's clients.

**Selective transfer**, on both sides: per public sample, the candidates are the learner's own
distribution (computed before it distils) and the others' (the server: every uploading client,
moved onto its tokens when a family tokenizes differently, :mod:`baselines.token_align`; a
client: its server model's); the target is the candidate of least per-sample cross-entropy
against the answer (each candidate's as its own model computed it, on its own tokens), ties to
the learner's own. A candidate's distribution is ``softmax`` over its kept top-``k`` logits
(T = 1), zero elsewhere. The loss is ``0.9 · CE(labels) + 0.1 · softCE(z, target)``
(:func:`~baselines.distill.soft_ce`), over the answer tokens.

Where the learner's own distribution wins, it distils from itself (FATE-LLM's FedMKT, the
authors' code); the FedMosaic port instead drops such samples and keeps only the soft term:
``self_wins="drop"`` and ``ce_weight=0`` reproduce it, as recorded options.

Compute: FedMosaic's code gives FedMKT 60 of SFT's 100 iterations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from baselines.base import Method, Payload, State, register
from baselines.distill import (
    TeacherTargets,
    label_rows,
    logits_of,
    public_batches,
    sample_ce,
    soft_ce,
)

#: the pseudo-adapter that carries logits in uploads and messages
LOGITS = "public-logits"


def top_k(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest logits per row and their token ids."""
    return logits.topk(min(k, logits.shape[-1]), dim=-1)


def dense(values: torch.Tensor, indices: torch.Tensor, vocab: int) -> torch.Tensor:
    """``softmax`` over each row's kept logits, scattered into a zero ``[rows, vocab]``."""
    out = torch.zeros(values.shape[0], vocab, dtype=torch.float32)
    return out.scatter_(1, indices.long(), F.softmax(values.float(), dim=-1))


def select(own_ce: torch.Tensor, others_ce: Sequence[torch.Tensor]) -> torch.Tensor:
    """Per sample, the candidate of least cross-entropy: ``0`` the learner's own, ``i + 1``
    the ``i``-th other; ties go to the earlier (own first)."""
    return torch.stack([own_ce, *others_ce]).argmin(0)


def mkt_loss(z: torch.Tensor, labels: torch.Tensor, rows: torch.Tensor,
             choice: torch.Tensor, candidates: Sequence[torch.Tensor], *, ce_weight: float,
             drop_own: bool) -> torch.Tensor:
    """``ce_weight · CE + (1 − ce_weight) · softCE(z, target)`` over the answer tokens, each
    token's target the candidate its sample chose (``choice[rows]``); with ``drop_own``, tokens
    of samples whose own candidate won are left out of the soft term."""
    pick = choice[rows]
    target = torch.stack(candidates)[pick, torch.arange(len(rows))]
    keep = pick != 0 if drop_own else torch.ones_like(pick, dtype=torch.bool)
    loss = ce_weight * F.cross_entropy(z, labels) if ce_weight else z.sum() * 0.0
    if bool(keep.any()):
        loss = loss + (1.0 - ce_weight) * soft_ce(z[keep], target[keep])
    return loss


@register
class FedMKT(Method):
    """FedMKT: clients and each group's server model distil each other's public-data logits
    by selective transfer; no parameter is averaged."""

    name = "fedmkt"
    compute_ratio = 0.6

    def __init__(self, lr: float = 1e-3, kd_lr: float | None = None, kd_samples: int = 80,
                 kd_steps: int | None = None, top_k: int = 128, ce_weight: float = 0.9,
                 self_wins: str = "self", cross_target: str = "renormalise", **hp: Any) -> None:
        if self_wins not in ("self", "drop"):
            raise ValueError(f"self_wins must be 'self' (FedMKT's code) or 'drop' (the "
                             f"FedMosaic port), got {self_wins!r}")
        if not 0.0 <= ce_weight <= 1.0:
            raise ValueError(f"ce_weight must be in [0, 1], got {ce_weight}")
        super().__init__(lr=lr, kd_lr=kd_lr, kd_samples=kd_samples, kd_steps=kd_steps,
                         top_k=top_k, ce_weight=ce_weight, self_wins=self_wins,
                         cross_target=cross_target, **hp)
        self.kd_lr = float(kd_lr) if kd_lr is not None else None
        self.kd_samples, self.k = int(kd_samples), int(top_k)
        self.kd_steps = None if kd_steps is None else int(kd_steps)
        self.ce_weight, self.drop_own = float(ce_weight), self_wins == "drop"
        self.cross_target = cross_target

    # --- the shared step ------------------------------------------------------------------
    def transfer(self, handle: Any, batches: Sequence[Mapping[str, Any]],
                 others: Sequence[Sequence[torch.Tensor]],
                 others_ce: Sequence[Sequence[torch.Tensor]], *, count: bool = False) -> float:
        """Distil ``others`` (per candidate, per batch: target distributions at the batch's
        answer tokens) into ``handle``'s ``local`` adapter by selective transfer; one pass over
        the batches unless ``kd_steps`` says otherwise. Returns the mean loss. With ``count``
        (the server), the chosen targets are tallied in the diagnostics
        (``fedmkt_server_target_own`` / ``_client``)."""
        own = []
        for batch, (z, y) in zip(batches, logits_of(handle, "local", batches)):
            n = len(batch["labels"])
            rows = label_rows(batch, n)
            own.append((F.softmax(z, -1) if self.k >= z.shape[-1] else
                        dense(*top_k(z, self.k), z.shape[-1]), sample_ce(z, y, rows, n), rows))
        steps = len(batches) if self.kd_steps is None else self.kd_steps
        total = 0.0
        for step in range(steps):
            i = step % len(batches)
            probs, ce, rows = own[i]
            choice = select(ce, [c[i] for c in others_ce])
            if count:
                own_n = int((choice == 0).sum())
                self.count("fedmkt_server_target_own", own_n)
                self.count("fedmkt_server_target_client", len(choice) - own_n)
            z, y = handle.logits(batches[i], ["local"])
            loss = mkt_loss(z, y, rows, choice, [probs, *(o[i] for o in others)],
                            ce_weight=self.ce_weight, drop_own=self.drop_own)
            handle.step("local", loss)
            total += float(loss.detach())
        return total / steps if steps else 0.0

    def public_logits(self, handle: Any, batches: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What a model sends: per batch, its top-``k`` logits at the answer tokens and each
        sample's cross-entropy, flattened into one state (``values``, ``indices``, ``ce``,
        and each batch's token and sample counts)."""
        vals, idx, ces, tokens, samples = [], [], [], [], []
        for batch, (z, y) in zip(batches, logits_of(handle, "local", batches)):
            n = len(batch["labels"])
            v, i = top_k(z, self.k)
            vals.append(v)
            idx.append(i)
            ces.append(sample_ce(z, y, label_rows(batch, n), n))
            tokens.append(len(y))
            samples.append(n)
        return {"values": torch.cat(vals), "indices": torch.cat(idx).to(torch.int32),
                "ce": torch.cat(ces), "tokens": torch.tensor(tokens),
                "samples": torch.tensor(samples), "vocab": torch.tensor(z.shape[-1])}

    @staticmethod
    def unpack(state: Mapping[str, torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per batch, the dense top-``k`` distributions and the per-sample cross-entropies of a
        :meth:`public_logits` state."""
        vocab = int(state["vocab"])
        probs = dense(state["values"], state["indices"], vocab)
        return (list(probs.split(state["tokens"].tolist())),
                list(state["ce"].split(state["samples"].tolist())))

    def _batches(self, handle: Any) -> list[Mapping[str, Any]]:
        return [handle.batch(b) for b in public_batches(handle.public, self.kd_samples,
                                                        handle.batch_size, method=self.name)]

    # --- client side ----------------------------------------------------------------------
    def receive(self, client, message: Payload) -> None:
        """Keep the server model's logits for the next local turn (client state)."""
        for key, value in message.tensors.get(LOGITS, {}).items():
            client.state[f"{LOGITS}/{key}"] = value

    def local_train(self, client) -> Payload:
        batches = self._batches(client)
        sent = {k.split("/", 1)[1]: v for k, v in client.state.items()
                if k.startswith(f"{LOGITS}/")}
        kd = 0.0
        if sent:
            probs, ce = self.unpack(sent)
            kd = self.transfer(client, batches, [probs], [ce])
            for key in list(client.state):
                if key.startswith(f"{LOGITS}/"):
                    del client.state[key]
        loss = self.train_adapter(client, "local", client.steps)
        return Payload({LOGITS: self.public_logits(client, batches)},
                       {"loss": loss, "kd_loss": kd})

    # --- server side ----------------------------------------------------------------------
    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        if self.server is None:
            raise RuntimeError("fedmkt needs the runtime's server models (Method.server)")
        archs = sorted({info.arch for info in clients.values()})
        samples = public_batches(self.server.public, self.kd_samples,
                                 self.server.model(archs[0], {}, round=round).batch_size,
                                 method=self.name)
        moved = TeacherTargets(self.server, "local", samples, round,
                               resoftmax=self.cross_target == "resoftmax")
        sent: dict[str, dict[str, torch.Tensor]] = {}
        for arch in archs:
            state = self._server_model(arch, round)
            kwargs = {} if self.kd_lr is None else {"lr": self.kd_lr}
            handle = self.server.model(arch, {"local": state}, round=round, **kwargs)
            batches = [handle.batch(b) for b in samples]
            others, others_ce = [], []
            for cid in sorted(uploads):
                probs, ce = self.unpack(uploads[cid].tensors[LOGITS])
                others.append(moved.move(probs, clients[cid].arch, arch))
                others_ce.append(ce)
            if others:
                self.transfer(handle, batches, others, others_ce, count=True)
                self._group_means[("local", arch)] = handle.get("local")
            sent[arch] = self.public_logits(handle, batches)
        return {cid: Payload({LOGITS: sent[info.arch]}) for cid, info in clients.items()}

    def _server_model(self, arch: str, round: int) -> State:
        """Group ``arch``'s server model: its last state, or the fresh adapter."""
        if ("local", arch) not in self._group_means:
            self._group_means[("local", arch)] = self.server.model(arch, {}, round=round) \
                .get("local")
        return self._group_means[("local", arch)]
