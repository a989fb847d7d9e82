"""Evaluation plans: what "score the clients" means under each protocol a benchmark declares.

A plan scores every client at an evaluation point (:meth:`EvalPlan.evaluate`), turns the scores
into a ``metrics.jsonl`` line (:meth:`EvalPlan.point`), and the last points into the metrics of
``results.json`` (:meth:`EvalPlan.metrics`). Every line has ``round``, ``scores`` (per client),
``self`` (the plan's primary number, which ``results.json``'s curve follows) and ``metrics``.

=================  ============================================================================
protocol           what a point holds
=================  ============================================================================
``self_others``    Self and Others over each client's started tasks (FedMosaic; see
                   :func:`evaluators.self_others`), A_last / A_AUC in ``results.json``.
``classification`` each client's accuracy on its own test rows (the partition's), logits over
                   every class of the task; the mean over clients is ``accuracy``. Scenarios
                   split by domain add ``acc_<domain>``: each client scored on the test rows of
                   its domain (the domain most of its training rows come from), averaged over
                   the domain's clients; ``accuracy`` is then the mean over domains and the
                   point also holds their standard deviation.
``base_novel``     pFedMMA's Local / Base / Novel / HM: Local on the client's own test rows and
                   Base on every base-class test row, both with logits over all base classes;
                   Novel on the unassigned test rows (the novel classes) with logits over the
                   novel classes only; each an unweighted mean over clients, and
                   ``HM = 3 / (1/Local + 1/Base + 1/Novel)``.
``generation``     every metric the task lists (BLEU, ROUGE-Lsum, METEOR, BERTScore, ...) of
                   each client's (personalised) model on its own test rows (FediLoRA's local
                   20%), or on the global test rows (those the partition gives to no client)
                   where it has none; the mean over clients. The primary number is the first
                   listed metric.
=================  ============================================================================

Classification plans score by class logits (a CLIP model's image-text similarities; a LLaVA
model's option likelihoods), through the method's own ``predict`` so that a method chooses the
adapters that answer (Ditto's personal one, FedDPA's mixture).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from drake.errors import DrakeError

if TYPE_CHECKING:  # pragma: no cover
    from drake.runtime.local import LocalRuntime

Scores = dict[int, dict[str, float]]


class EvalPlan(ABC):
    """How one protocol scores the clients (see the module docstring)."""

    protocol = ""

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        self.data = runtime.data

    @abstractmethod
    def evaluate(self, records, round_: int) -> Scores:
        """Every client's scores at the evaluation point after round ``round_``."""

    @abstractmethod
    def point(self, label: int, round_: int, scores: Scores, *, every_task: bool = False
              ) -> dict[str, Any]:
        """The ``metrics.jsonl`` line of ``scores``."""

    def metrics(self, history: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """``results.json``'s metrics: those of the last point."""
        return dict(history[-1]["metrics"])

    # --- shared ------------------------------------------------------------------------------
    def _only_task(self) -> str:
        """The one task a classification or generation run scores."""
        tasks = list(self.data.test_ids)
        if len(tasks) != 1:
            raise DrakeError(f"the {self.protocol} protocol scores one task per run; this run "
                             f"reads {tasks}")
        return tasks[0]

    def _predict(self, c: int, records, round_: int, samples: Sequence[Mapping[str, Any]],
                 *, loglik: bool) -> list[Any]:
        """Client ``c``'s answers to ``samples`` through the method's ``predict``."""
        return self.runtime.predict(c, records[c], round_, samples, loglik=loglik)

    @staticmethod
    def _accuracy(samples: Sequence[Mapping[str, Any]], predictions: Sequence[Any]) -> float:
        from evaluators import score_task

        return score_task("accuracy", predictions, samples) if samples else 0.0


class SelfOthersPlan(EvalPlan):
    """FedMosaic's Self / Others over every client task (the runtime's original evaluation)."""

    protocol = "self_others"

    def evaluate(self, records, round_):
        return self.runtime.evaluate_tasks(records, round_)

    def point(self, label, round_, scores, *, every_task=False):
        from evaluators import self_others

        data, cfg = self.data, self.runtime.cfg
        tasks = {c: data.client_tasks[c] for c in scores}
        started = None
        point: dict[str, Any] = {"round": label}
        if cfg.eval_tasks == "started" and not every_task:
            started = {c: data.started_tasks(c, round_) for c in scores}
            point["started"] = {str(c): v for c, v in started.items()}
        res = self_others({c: dict(s) for c, s in scores.items()}, tasks, started)
        return {**point, "self": res.self_score, "others": res.others_score,
                "scores": {str(c): dict(v) for c, v in scores.items()}}

    def metrics(self, history):
        from evaluators import a_auc, a_last

        rounds = [h["round"] for h in history]
        mine = [h["self"] for h in history]
        others = [h["others"] for h in history]
        return {"self_a_last": a_last(mine), "self_a_auc": a_auc(mine, rounds),
                "others_a_last": a_last(others), "others_a_auc": a_auc(others, rounds)}


def _with_choices(samples: Sequence[Mapping[str, Any]], classes: Sequence[str]
                  ) -> list[dict[str, Any]]:
    return [{**s, "choices": list(classes)} for s in samples]


class _ClassPlan(EvalPlan):
    """Shared by the classification plans: one task, its class list, scoring by logits."""

    def __init__(self, runtime):
        super().__init__(runtime)
        self.task = self._only_task()
        self.names = self.data.class_names(self.task)  # label -> class name
        self.classes = list(self.names.values())
        #: the candidate classes of training batches
        self.train_classes = self.classes
        if not self.classes:
            raise DrakeError(f"task {self.task} has no labelled rows; a classification task "
                             f"needs label >= 0 on its samples")

    def _scored(self, c, records, round_, ids: Sequence[str], classes: Sequence[str]
                ) -> tuple[list[dict[str, Any]], list[Any]]:
        samples = _with_choices(self.data.samples(ids), classes)
        if not samples:
            return [], []
        return samples, self._predict(c, records, round_, samples, loglik=True)


class ClassificationPlan(_ClassPlan):
    protocol = "classification"

    def __init__(self, runtime):
        super().__init__(runtime)
        rule = self.data.scenario_entry["scenario"]["partition"]
        self.by_domain = rule == "by_domain"
        if self.by_domain:
            test = self.data.samples(self.data.all_test_ids[self.task])
            self.domain_test: dict[str, list[str]] = {}
            for s in test:
                self.domain_test.setdefault(str(s["domain"]), []).append(s["id"])
            keep = self.data.eval_per_task
            if keep is not None:  # eval_per_task test rows of each domain
                self.domain_test = {d: ids[:keep] for d, ids in self.domain_test.items()}
            self.client_domain = {c: self._main_domain(c) for c in range(self.data.num_clients)}

    def _main_domain(self, c: int) -> str:
        counts = Counter(str(s["domain"]) for s in self.data.samples(self.data.streams[c].ids))
        if not counts:
            raise DrakeError(f"client {c} has no training rows; it has no domain")
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

    def evaluate(self, records, round_):
        scores: Scores = {}
        for c in range(self.data.num_clients):
            ids = (self.domain_test.get(self.client_domain[c], []) if self.by_domain
                   else self.data.local_test[c] or self.data.test_ids[self.task])
            # a client whose domain has no test rows is not scored (an empty score line)
            samples, preds = self._scored(c, records, round_, ids, self.classes)
            scores[c] = {self.task: self._accuracy(samples, preds)} if samples else {}
            self.runtime.client_scored(round_, c)
        return scores

    def point(self, label, round_, scores, *, every_task=False):
        per_client = [scores[c][self.task] for c in sorted(scores) if scores[c]]
        if not per_client:
            raise DrakeError(f"no client of scenario {self.data.scenario!r} has test rows to be "
                             f"scored on; rebuild with more test rows (a larger --size)")
        metrics: dict[str, float] = {}
        extra: dict[str, Any] = {}
        if self.by_domain:
            for domain in sorted(self.domain_test):
                mine = [scores[c][self.task] for c in scores
                        if scores[c] and self.client_domain[c] == domain]
                if mine:
                    metrics[f"acc_{domain}"] = float(np.mean(mine))
            by_domain = [v for k, v in metrics.items() if k.startswith("acc_")]
            metrics["accuracy"] = float(np.mean(by_domain))
            extra["accuracy_std"] = float(np.std(by_domain))
        else:
            metrics["accuracy"] = float(np.mean(per_client))
        return {"round": label, "self": metrics["accuracy"], "metrics": metrics, **extra,
                "scores": {str(c): dict(v) for c, v in scores.items()}}


class BaseNovelPlan(_ClassPlan):
    protocol = "base_novel"

    def __init__(self, runtime):
        super().__init__(runtime)
        data = self.data
        train = [sid for c in range(data.num_clients) for sid in data.streams[c].ids]
        base = {s["label"] for s in data.samples(train)}
        self.base_test = [sid for c in range(data.num_clients) for sid in data.local_test[c]]
        self.novel_test = list(data.unassigned_test)
        novel = {s["label"] for s in data.samples(self.novel_test)} - base
        if not self.base_test or not self.novel_test or not novel:
            raise DrakeError(f"scenario {data.scenario!r} has no base/novel split (base test "
                             f"rows {len(self.base_test)}, novel test rows "
                             f"{len(self.novel_test)}); build a base-to-novel scenario "
                             f"(pathological with base_only)")
        self.base_classes = [self.names[k] for k in sorted(base)]
        self.novel_classes = [self.names[k] for k in sorted(novel)]
        self.train_classes = self.base_classes

    def evaluate(self, records, round_):
        scores: Scores = {}
        for c in range(self.data.num_clients):
            samples, preds = self._scored(c, records, round_, self.base_test, self.base_classes)
            own = set(self.data.local_test[c])
            mine = [(s, p) for s, p in zip(samples, preds) if s["id"] in own]
            local = self._accuracy([s for s, _ in mine], [p for _, p in mine])
            novel_s, novel_p = self._scored(c, records, round_, self.novel_test,
                                            self.novel_classes)
            scores[c] = {"local": local, "base": self._accuracy(samples, preds),
                         "novel": self._accuracy(novel_s, novel_p)}
            self.runtime.client_scored(round_, c)
        return scores

    def point(self, label, round_, scores, *, every_task=False):
        from evaluators import base_novel_hm

        metrics = {k: float(np.mean([scores[c][k] for c in scores]))
                   for k in ("local", "base", "novel")}
        metrics["hm"] = base_novel_hm(metrics["local"], metrics["base"], metrics["novel"])
        return {"round": label, "self": metrics["hm"], "metrics": metrics,
                "scores": {str(c): dict(v) for c, v in scores.items()}}


class GenerationPlan(EvalPlan):
    protocol = "generation"

    def __init__(self, runtime):
        super().__init__(runtime)
        self.task = self._only_task()
        self.names = [_canonical(n) for n in runtime.task_metrics[self.task]]

    def evaluate(self, records, round_):
        from evaluators import score_task

        scores: Scores = {}
        for c in range(self.data.num_clients):
            ids = self.data.local_test[c] or self.data.unassigned_test
            samples = self.data.samples(ids)
            preds = self._predict(c, records, round_, samples, loglik=False)
            scores[c] = {name: score_task(name, preds, samples) for name in self.names}
            self.runtime.client_scored(round_, c)
        return scores

    def point(self, label, round_, scores, *, every_task=False):
        metrics = {n: float(np.mean([scores[c][n] for c in scores])) for n in self.names}
        return {"round": label, "self": metrics[self.names[0]], "metrics": metrics,
                "scores": {str(c): dict(v) for c, v in scores.items()}}


def _canonical(name: str) -> str:
    from evaluators import resolve

    return resolve(name).name


PLANS = {p.protocol: p for p in (SelfOthersPlan, ClassificationPlan, BaseNovelPlan,
                                 GenerationPlan)}


def protocol_of(spec: Mapping[str, Any], scenario: Mapping[str, Any]) -> str:
    """The protocol a run follows: its scenario's, where it declares one, else its benchmark's."""
    return str(scenario.get("protocol") or spec.get("protocol") or "self_others")


def make_plan(runtime: LocalRuntime, protocol: str) -> EvalPlan:
    if protocol not in PLANS:
        raise DrakeError(f"no evaluation plan for protocol {protocol!r}; known: "
                         f"{', '.join(PLANS)}")
    return PLANS[protocol](runtime)
