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
``generation``     every metric each task lists (BLEU, ROUGE-Lsum, METEOR, BERTScore, MSE, ...)
                   of each client's personalised model on its own test rows of the task
                   (FediLoRA's local 20%), or on the global test rows (those the partition
                   gives to no client) where it has none, weighted by rows over the clients;
                   and, after the round's aggregation, of the server's global model
                   (:meth:`~baselines.base.Method.global_model`) on the global test rows. Each
                   (task, personalised or global) is a results file of its own
                   (:class:`View`): ``results.json`` and ``results-global.json`` for one task,
                   and per task for TAP's multi-task runs. The primary number is the first
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from drake.errors import DrakeError

if TYPE_CHECKING:  # pragma: no cover
    from drake.runtime.local import LocalRuntime

Scores = dict[int, dict[str, float]]


@dataclass(frozen=True)
class View:
    """One results file of a run: the metrics of one model kind on one task.

    ``kind`` is ``""`` for the one view most protocols have (``results.json``), else
    ``personalized`` or ``global`` (generation); ``task`` is the task a multi-task run's view
    scores (``None``: the run's only task, or every task). ``scores[point][client]`` holds the
    view's per-client numbers.
    """

    kind: str
    task: str | None
    metrics: dict[str, float]
    rounds: list[int]
    curve: list[float]
    scores: list[list[dict[str, float]]]
    others: list[float] | None = None


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

    def after_aggregate(self, point: dict[str, Any], round_: int) -> None:
        """Add what needs the round's aggregation done to its evaluation point (the global
        model's scores); nothing by default."""

    def views(self, history: Sequence[Mapping[str, Any]]) -> list[View]:
        """The results files of the run (:class:`View`): one, ``results.json``, by default."""
        n = self.data.num_clients
        return [View("", None, self.metrics(history), [h["round"] for h in history],
                     [h["self"] for h in history],
                     [[h["scores"][str(c)] for c in range(n)] for h in history],
                     [h["others"] for h in history] if self.protocol == "self_others" else None)]

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
            from evaluators import per_domain_accuracy

            # each domain: mean ± std over its clients (pFedMMA's per-domain numbers)
            stats = per_domain_accuracy({c: scores[c][self.task] for c in sorted(scores)
                                         if scores[c]}, self.client_domain)
            for domain in sorted(stats):
                metrics[f"acc_{domain}"] = stats[domain].mean
            extra["domain_std"] = {d: stats[d].std for d in sorted(stats)}
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
    """Every task of the run scored by its own metric list, on the personalised models and on
    the server's global model (see the module docstring).

    A run of one task (FediLoRA, synth-caption) keys its scores by metric; a run of several
    (TAP: each client holds one task) by ``<task>/<metric>``, and each task is a view of its own
    in the results (:meth:`views`).
    """

    protocol = "generation"

    def __init__(self, runtime):
        super().__init__(runtime)
        data = self.data
        # the tasks some client holds (TAP's ViLT layout leaves two of its build's tasks out)
        self.tasks = [t for t in data.test_ids if t in data.held_tasks]
        if not self.tasks:
            raise DrakeError(f"scenario {data.scenario!r} has no test rows to score generation "
                             f"on; rebuild with more rows (a larger --size)")
        self.names = {t: [_canonical(n) for n in runtime.task_metrics[t]] for t in self.tasks}
        task_of = data.rows.task_of
        #: per task: each client's own test rows (its local split), and the global test rows
        self.local = {t: {c: [sid for sid in data.local_test[c] if task_of[sid] == t]
                          for c in range(data.num_clients)} for t in self.tasks}
        self.shared = {t: [sid for sid in data.unassigned_test if task_of[sid] == t]
                       for t in self.tasks}

    def _key(self, task: str, metric: str) -> str:
        return metric if len(self.tasks) == 1 else f"{task}/{metric}"

    def _client_rows(self, c: int, task: str) -> list[str]:
        """Client ``c``'s rows of ``task``: its local test rows, else the global test rows
        (FediLoRA scores personalised models on their own 20%; without one, on the global
        set), else every test row of the task."""
        return self.local[task][c] or self.shared[task] or self.data.test_ids[task]

    def _metrics(self, task: str, preds: Sequence[Any], samples) -> dict[str, float]:
        """The task's metrics, after the normalisation its spec names (FediLoRA: EvalAI's)."""
        from evaluators import score_task

        if self.runtime.task_normalise.get(task) == "evalai":
            from evaluators.text import normalise

            preds = [normalise(p) if isinstance(p, str) else p for p in preds]
            samples = [{**s, "answer": normalise(str(s["answer"]))} for s in samples]
        return {self._key(task, n): score_task(n, preds, samples) for n in self.names[task]}

    def evaluate(self, records, round_):
        scores: Scores = {}
        for c in range(self.data.num_clients):
            scores[c] = {}
            for task in self.data.client_tasks[c]:
                if task not in self.names:
                    continue
                samples = self.data.samples(self._client_rows(c, task))
                preds = self._predict(c, records, round_, samples, loglik=False)
                scores[c].update(self._metrics(task, preds, samples))
                scores[c][self._key(task, "rows")] = float(len(samples))
            self.runtime.client_scored(round_, c)
        return scores

    def point(self, label, round_, scores, *, every_task=False):
        """Each metric a weighted mean over the clients holding the task, by the rows each was
        scored on (FediLoRA: "the weighted average of each client's local performance")."""
        metrics: dict[str, float] = {}
        for task in self.tasks:
            held = [c for c in scores if self._key(task, "rows") in scores[c]]
            if not held:
                continue
            weights = [scores[c][self._key(task, "rows")] for c in held]
            for name in self.names[task]:
                key = self._key(task, name)
                metrics[key] = float(np.average([scores[c][key] for c in held],
                                                weights=weights))
        first = self._key(self.tasks[0], self.names[self.tasks[0]][0])
        return {"round": label, "self": metrics.get(first, 0.0), "metrics": metrics,
                "scores": {str(c): dict(v) for c, v in scores.items()}}

    def after_aggregate(self, point: dict[str, Any], round_: int) -> None:
        """Add the global model's scores to ``point`` (the evaluation point of ``round_``, its
        aggregation done): each architecture group's global model (:meth:`Method.global_model`)
        on each task's global test rows (every test row of the task where the scenario keeps
        none apart), groups weighted by their client counts. Nothing is added for a method
        without a global model."""
        runtime = self.runtime
        groups = Counter(runtime.models)
        found = {arch: runtime.method.global_model(arch) for arch in sorted(groups)}
        found = {arch: model for arch, model in found.items() if model is not None}
        if not found:
            return
        by_arch: dict[str, dict[str, float]] = {}
        for arch, model in found.items():
            by_arch[arch] = {}
            for task in self.tasks:
                samples = self.data.samples(self.shared[task] or self.data.test_ids[task])
                preds = runtime.predict_global(arch, model, round_, samples)
                by_arch[arch].update(self._metrics(task, preds, samples))
        keys = list(next(iter(by_arch.values())))
        point["global"] = {k: float(np.average([by_arch[a][k] for a in by_arch],
                                               weights=[groups[a] for a in by_arch]))
                           for k in keys}
        point["global_by_arch"] = by_arch

    def views(self, history: Sequence[Mapping[str, Any]]) -> list[View]:
        """One view per task and model: ``personalized`` from every point, ``global`` from the
        points that have the global model's scores (each client's score there is its
        architecture's global model's)."""
        models = self.runtime.models
        out = []
        for task in self.tasks:
            keys = {n: self._key(task, n) for n in self.names[task]}
            first = keys[self.names[task][0]]

            def pick(values: Mapping[str, float], keys=keys) -> dict[str, float]:
                return {n: values[k] for n, k in keys.items() if k in values}

            points = list(history)
            scores = [[pick(h["scores"][str(c)]) for c in range(len(models))] for h in points]
            out.append(View("personalized", task, pick(points[-1]["metrics"]),
                             [h["round"] for h in points],
                             [h["metrics"].get(first, 0.0) for h in points], scores))
            points = [h for h in history if "global" in h]
            if points and "global" in history[-1]:
                scores = [[pick(h["global_by_arch"][models[c]]) if models[c] in
                           h["global_by_arch"] else {} for c in range(len(models))]
                          for h in points]
                out.append(View("global", task, pick(points[-1]["global"]),
                                [h["round"] for h in points],
                                [h["global"].get(first, 0.0) for h in points], scores))
        return out


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
