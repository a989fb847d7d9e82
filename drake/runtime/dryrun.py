"""``drake eval --dry-run``: what a run on a real benchmark would do, checked without training.

A run of FedMosaic on DRAKE or HFLB needs hours on GPUs; its set-up can fail in minutes. The dry
run resolves the run's protocol (preset, budget, evaluation, clients and model mix) as
``drake eval`` would, loads the benchmark's public set through its real source adapter from the
Hub cache (the same rows, columns and seeded subset a build keeps), and runs the method's set-up
(FedMosaic's A/B alignment) on tiny models standing in for the real ones: the mix's
architectures, smallest first, become the offline zoo's LLaVA families, smallest first. Nothing
is written and no model is downloaded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from drake.errors import DrakeError

__all__ = ["dry_run", "public_set", "stand_ins"]


def public_set(spec: Any, *, cache_dir: Path | None, seed: int,
               say: Callable[[str], None]) -> list[dict[str, Any]]:
    """The training samples of ``spec``'s public tasks (none when it declares none), read by
    their source adapters from the Hub cache, in the order a build stores them."""
    from drake.adapters import adapter_class
    from drake.adapters.base import AdapterOptions

    if not spec.public_tasks:
        say(f"public set: none declared by {spec.name}")
    samples: list[dict[str, Any]] = []
    options = AdapterOptions(cache_dir=cache_dir, seed=seed)
    for tid in spec.public_tasks:
        task = spec.task(tid)
        if task.source == "synth":
            raise DrakeError(f"{spec.name}'s public task {tid} is generated, not read from a "
                             f"source: a dry run checks real benchmarks; run {spec.name} for "
                             f"real (drake build, then drake eval)")
        adapter = adapter_class(task.source)(options)
        conv = adapter.convert(task, "train")
        rows = [adapter.sample(task, "train", rec, i) for i, rec in enumerate(conv.kept)]
        described = adapter.describe(task)
        counts = conv.counts()
        say(f"public set: {tid} from {described.get('repo', task.source)}@"
            f"{str(described.get('revision', '?'))[:12]}: {counts['kept']} rows kept of "
            f"{counts['source_rows']} (dropped {counts['dropped'] or 'none'}, rejected "
            f"{counts['rejected'] or 'none'})")
        samples += rows
    return samples


def stand_ins(archs: Sequence[str]) -> dict[str, str]:
    """Each real architecture's offline stand-in: the mix's architectures by size, smallest
    first, onto the tiny LLaVA families by size (so the pivot stays the smallest model)."""
    from drake.models.zoo import ZOO, get_info

    tiny = sorted((i for i in ZOO.values() if i.offline and i.kind == "llava"),
                  key=lambda i: (i.size_rank, i.name))
    other = [a for a in archs if get_info(a, any_hub_id=True).kind != "llava"]
    if other:
        raise DrakeError(f"a dry run stands tiny LLaVA models in for the mix's, and "
                         f"{', '.join(other)} is no LLaVA model: run the CLIP benchmarks for "
                         f"real on tiny-clip (minutes on a CPU)")
    real = sorted(archs, key=lambda a: (get_info(a, any_hub_id=True).size_rank, a))
    if len(real) > len(tiny):
        raise DrakeError(f"the mix has {len(real)} architectures ({', '.join(real)}) and the "
                         f"offline zoo {len(tiny)} tiny LLaVA families to stand in for them; "
                         f"dry-run a mix of at most {len(tiny)} (--model-mix)")
    return {a: t.name for a, t in zip(real, tiny)}


def dry_run(method: Any, spec: Any, *, scen: Any, models: Sequence[str], mix: str,
            settings: Mapping[str, Any], seed: int, hub_cache: Path | None,
            model_cache: Path | None, say: Callable[[str], None]) -> dict[str, Any]:
    """Resolve and print a run's protocol (``scen``: a ScenarioSpec of ``spec``), load the
    public set and run ``method``'s set-up on stand-in models. Returns the method's recorded
    hyper-parameters and diagnostics after set-up (FedMosaic's ``align.<arch>.mse_before`` /
    ``mse_after``)."""
    from drake.runtime.local import install_models

    budget = settings["compute_budget"]
    steps = max(1, round(budget * method.compute_ratio))
    per_task = settings["eval_per_task"]
    counts = Counter(models)
    rounds = settings.get("rounds") or scen.rounds
    say(f"dry run: {method.name} on {spec.name} {spec.version}, scenario {scen.name} "
        f"({scen.order}, {rounds} rounds"
        + (f" over {scen.rounds} stream rounds" if rounds != scen.rounds else "")
        + (f", {scen.rounds_per_task} per task" if scen.rounds_per_task else "") + ")")
    say(f"  clients {len(models)}, model mix {mix}: "
        + ", ".join(f"{a} x{n}" for a, n in counts.items()))
    pq = getattr(method, "pq_lr_scale", None)  # FedMosaic's P/Q parameter group
    epochs = settings.get("local_epochs")
    say((f"  {epochs:g} local epochs per round (steps from each client's rows)" if epochs
         else f"  local steps {steps} per round ({method.compute_ratio:g} of {budget} SFT "
              f"steps)")
        + f", batch {settings['batch_size']}, lr {settings['lr']:g}"
        + (f" (P/Q {settings['lr'] * pq:g})" if pq else "")
        + f", clients per round {settings['frac']:g}"
        + (" (all in round 0)" if settings.get("first_round_all") else ""))
    say(f"  evaluation every {settings['eval_every']} rounds on "
        f"{'every test sample' if per_task is None else f'{per_task} test samples per task'}, "
        f"answers up to {settings['max_new_tokens'] or 'the protocol default'} new tokens"
        + (f"; the {len(spec.unseen_tasks)} unseen tasks scored after the last round"
           if settings.get("eval_unseen") else ""))
    say(f"  method hyper-parameters: {dict(sorted(method.hparams.items()))}")
    public = public_set(spec, cache_dir=hub_cache, seed=seed, say=say)
    subs = stand_ins(sorted(counts))
    say("stand-ins: " + ", ".join(f"{real} -> {tiny}" for real, tiny in subs.items()))
    bundles, _, _ = install_models(method, sorted(set(subs.values())), seed=seed,
                                   pretrained=True, cache=model_cache, protocol=spec.protocol)
    method.setup(bundles, public, seed=seed, cache_dir=None)
    report = {**method.hparams, **method.diagnostics}
    aligned = sorted({k.split(".")[1] for k in report if k.startswith("align.")})
    for arch in aligned:
        real = next(r for r, t in subs.items() if t == arch)
        say(f"alignment of {arch} (for {real}): held-out MSE "
            f"{report[f'align.{arch}.mse_before']:.6g} before, "
            f"{report[f'align.{arch}.mse_after']:.6g} after")
    if not aligned:
        say(f"{method.name}'s set-up ran; it aligns nothing")
    return report
