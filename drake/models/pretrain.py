"""``drake models pretrain``: give the tiny families real weights on drake-synth's public split.

The tiny models start from random weights; a federated method that starts from them learns
vision and language from scratch, which is not what the papers' pretrained backbones do. So each
tiny family is first trained on drake-synth's **public** tasks (generic multiple-choice questions,
short answers and captions about shapes, colours, counts and positions), which are disjoint from
the client tasks, the way LLaVA's instruction data is disjoint from DRAKE.

Algorithm
---------
1. Draw ``train_size`` samples of each public task from the ``public`` split (indices
   ``0 .. train_size - 1``, generator seed ``seed``), and ``eval_size`` held-out multiple-choice
   questions from the ``test`` split.
2. Build the model from its config with ``seed``; every parameter is trained (language model,
   projector and vision tower).
3. Run ``steps`` AdamW steps (betas 0.9/0.98, no weight decay, gradient-norm clip 1.0) on
   batches of ``batch_size`` samples drawn without replacement, epoch by epoch, from a
   ``numpy`` generator seeded with ``seed``. The learning rate warms up linearly for 5% of the
   steps and then follows a cosine to 10% of ``lr``. The loss is the mean token cross-entropy on
   the answer tokens (:meth:`ModelBundle.loss`).

   The batches follow a curriculum (:data:`CURRICULUM`, :data:`STAGE_MIX`): first only open
   colour questions, until the model reads colours (the mean loss of the last 50 steps falls
   below 0.75 nats, where guessing sits near 1.0) but for at least 10% and at most 45% of the
   steps; then for 20% of the steps half colour and half short-answer attribute questions
   (colour, shape, size, fill, count, background); then a quarter colour, a quarter attribute
   questions and half any public sample. A randomly initialised tiny LLaVA
   trained on the full mix from the start learns the answer priors and stops looking at the
   image: its image features turn into a constant within a few dozen steps and held-out accuracy
   stays at chance. Colour, the strongest visual signal, "ignites" the image pathway first.
   Learning rates above about 1e-3 cause the same collapse, hence the default 7e-4.
4. Score the held-out questions before and after, by greedy generation (exact match to the gold
   option, and :func:`evaluators.choice.match_choice`) and by option log-likelihood.
5. Write ``model.safetensors``, ``config.json``, ``generation_config.json``, the tokenizer files
   and ``pretrain_report.json`` into ``<cache>/<name>/`` (atomically: a temporary folder renamed
   into place).

The same seed gives the same weights, byte for byte, on the same machine and library versions:
all draws come from seeded generators and deterministic algorithms are switched on for the run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from drake.models.bundle import ModelBundle, _Encoded
from drake.models.loading import WEIGHTS_FILE, _tiny_bundle, quiet_transformers, tiny_folder
from drake.models.tiny import build_tiny_model, synth_vocabulary
from drake.models.tokenizer import build_tokenizer
from drake.models.zoo import TINY_MODELS, get_info

__all__ = [
    "pretrain",
    "pretrain_many",
    "public_tasks",
    "public_samples",
    "evaluate_mc",
    "curriculum_pools",
    "CURRICULUM",
    "IGNITION_LOSS",
    "STAGE_MIX",
    "DEFAULT_STEPS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_LR",
]

log = logging.getLogger(__name__)

DEFAULT_STEPS = 2200
DEFAULT_BATCH_SIZE = 16
DEFAULT_LR = 7e-4
DEFAULT_TRAIN_SIZE = 3000
DEFAULT_EVAL_SIZE = 200
REPORT_FILE = "pretrain_report.json"

#: Curriculum stages, in order: ``colour`` (colour questions) lasts from 10% to 45% of the steps,
#: ending early once the model reads colours (mean loss of the last 50 steps below
#: :data:`IGNITION_LOSS`); ``attributes`` (open attribute questions) takes the next 20%; ``all``
#: (every public sample) the rest.
CURRICULUM: tuple[str, ...] = ("colour", "attributes", "all")
COLOUR_STAGE = (0.10, 0.45)
ATTRIBUTE_STAGE = 0.20
IGNITION_LOSS = 0.75
_ATTRIBUTE_FAMILIES = frozenset({"colour", "shape", "size", "fill", "count", "domain"})

Progress = Callable[[int, int, float], None]


def public_tasks() -> list[str]:
    """Ids of drake-synth's public-split tasks (group ``"public"``), sorted."""
    from drake.synth import SYNTH_TASKS

    tasks = sorted(t for t, spec in SYNTH_TASKS.items() if spec.group == "public")
    if not tasks:
        raise RuntimeError("drake.synth declares no public task; the pretraining data is missing")
    return tasks


def public_samples(task_id: str, split: str, count: int, seed: int, start: int = 0,
                   image_size: int = 64) -> list[dict[str, Any]]:
    """``count`` samples of a public task, indices ``start .. start + count - 1``."""
    from drake.synth import generate_sample

    return [generate_sample(task_id, split, start + i, seed, image_size=image_size)
            for i in range(count)]


def evaluate_mc(bundle: ModelBundle, samples: Sequence[dict[str, Any]], *,
                batch_size: int = 64, max_new_tokens: int = 8) -> dict[str, float]:
    """Accuracy of a model on multiple-choice samples, three ways.

    Returns
    -------
    dict
        ``generation_exact``: greedy answer equals the gold answer (after stripping);
        ``generation_match``: :func:`evaluators.choice.match_choice` maps the greedy answer to
        the gold option; ``loglik``: the gold option has the highest log-likelihood;
        ``chance``: mean of ``1 / len(choices)``; ``n``: number of samples.
    """
    from evaluators.choice import match_choice

    mc = [s for s in samples if s.get("choices")]
    if not mc:
        raise ValueError("no multiple-choice sample to evaluate (all have empty 'choices')")
    outputs = bundle.generate(mc, max_new_tokens=max_new_tokens, batch_size=batch_size)
    logliks = bundle.choice_logliks(mc, batch_size=batch_size * 4)
    exact = matched = by_ll = 0
    for sample, out, scores in zip(mc, outputs, logliks):
        gold = list(sample["choices"]).index(sample["answer"])
        exact += out.strip() == sample["answer"].strip()
        matched += match_choice(out, sample["choices"]) == gold
        by_ll += int(np.argmax(scores)) == gold
    n = len(mc)
    return {
        "generation_exact": exact / n,
        "generation_match": matched / n,
        "loglik": by_ll / n,
        "chance": float(np.mean([1.0 / len(s["choices"]) for s in mc])),
        "n": n,
    }


def _lr_at(step: int, steps: int, lr: float) -> float:
    warm = max(1, int(0.05 * steps))
    if step < warm:
        return lr * (step + 1) / warm
    progress = (step - warm) / max(1, steps - warm)
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


class _DeterministicRun:
    """Switch deterministic algorithms on for the run and restore the previous setting."""

    def __enter__(self) -> None:
        self._previous = torch.are_deterministic_algorithms_enabled()
        self._warn = torch.is_deterministic_algorithms_warn_only_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)

    def __exit__(self, *exc: object) -> None:
        torch.use_deterministic_algorithms(self._previous, warn_only=self._warn)


def _family(sample: dict[str, Any]) -> str:
    try:
        meta = json.loads(sample.get("meta") or "{}")
    except (TypeError, ValueError):
        return ""
    return str(meta.get("family", "")) if isinstance(meta, dict) else ""


def curriculum_pools(samples: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Index pools of the :data:`CURRICULUM` stages.

    ``colour``: open colour questions (naming one of eight colours, so a loss under
    :data:`IGNITION_LOSS` cannot come from copying an option of the prompt); ``attributes``: open
    questions of the attribute families; ``all``: every sample. A stage whose pool is empty (a public split without these
    families) draws from the whole set instead.
    """
    everything = np.arange(len(samples))
    families = [_family(s) for s in samples]
    wanted = {
        "colour": [i for i, (s, f) in enumerate(zip(samples, families))
                   if f == "colour" and not s.get("choices")],
        "attributes": [i for i, (s, f) in enumerate(zip(samples, families))
                       if f in _ATTRIBUTE_FAMILIES and not s.get("choices")],
    }
    return {stage: (np.asarray(wanted[stage]) if wanted.get(stage) else everything)
            for stage in CURRICULUM}


#: Share of each batch drawn from each pool, per stage. Earlier pools stay in later stages so
#: that the image reading learnt first is not lost when new answer words arrive.
STAGE_MIX: dict[str, dict[str, float]] = {
    "colour": {"colour": 1.0},
    "attributes": {"colour": 0.5, "attributes": 0.5},
    "all": {"colour": 0.25, "attributes": 0.25, "all": 0.5},
}


def _split(batch_size: int, shares: dict[str, float]) -> dict[str, int]:
    """Largest-remainder split of ``batch_size`` rows by ``shares`` (ties in key order)."""
    raw = {k: v * batch_size for k, v in shares.items()}
    counts = {k: int(v) for k, v in raw.items()}
    left = batch_size - sum(counts.values())
    for key in sorted(raw, key=lambda k: (-(raw[k] - counts[k]), list(raw).index(k)))[:left]:
        counts[key] += 1
    return counts


class _Curriculum:
    """Stage bookkeeping and batch drawing: each pool is read in shuffled epochs."""

    def __init__(self, pools: dict[str, np.ndarray], steps: int, batch_size: int,
                 rng: np.random.Generator) -> None:
        self.pools, self.steps, self.batch_size, self.rng = pools, steps, batch_size, rng
        self.stage = 0
        self.starts = [0]
        self.attribute_end = steps
        self._order = {k: rng.permutation(v) for k, v in pools.items()}
        self._pos = dict.fromkeys(pools, 0)

    def _enter(self, stage: int, step: int) -> None:
        self.stage = stage
        self.starts.append(step)

    def advance(self, step: int, recent_losses: Sequence[float]) -> None:
        """Move to the next stage when the current one is over (called before each step)."""
        if self.stage == 0:
            low, high = (int(f * self.steps) for f in COLOUR_STAGE)
            ignited = (len(recent_losses) >= 50
                       and float(np.mean(recent_losses[-50:])) < IGNITION_LOSS)
            if step >= high or (step >= low and ignited):
                self._enter(1, step)
                self.attribute_end = step + int(ATTRIBUTE_STAGE * self.steps)
        if self.stage == 1 and step >= self.attribute_end:
            self._enter(2, step)

    def _take(self, pool: str, count: int) -> list[int]:
        rows: list[int] = []
        while len(rows) < count:
            order, pos = self._order[pool], self._pos[pool]
            if pos >= len(order):
                self._order[pool], self._pos[pool] = self.rng.permutation(self.pools[pool]), 0
                continue
            take = min(count - len(rows), len(order) - pos)
            rows.extend(int(i) for i in order[pos:pos + take])
            self._pos[pool] = pos + take
        return rows

    def batch(self) -> np.ndarray:
        counts = _split(self.batch_size, STAGE_MIX[CURRICULUM[self.stage]])
        return np.asarray([i for pool, n in counts.items() for i in self._take(pool, n)])

    def summary(self) -> list[dict[str, Any]]:
        bounds = [*self.starts, self.steps]
        return [{"stage": CURRICULUM[i], "from_step": bounds[i], "to_step": bounds[i + 1],
                 "mix": STAGE_MIX[CURRICULUM[i]]}
                for i in range(len(self.starts))]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pretrain(
    name: str,
    *,
    out_dir: Path | None = None,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    batch_size: int = DEFAULT_BATCH_SIZE,
    lr: float = DEFAULT_LR,
    train_size: int = DEFAULT_TRAIN_SIZE,
    eval_size: int = DEFAULT_EVAL_SIZE,
    progress: Progress | None = None,
    threads: int | None = 1,
) -> Path:
    """Pretrain tiny model ``name`` on drake-synth's public split and cache it.

    Parameters
    ----------
    name : str
        ``tiny-llava-llama`` or ``tiny-llava-qwen``.
    out_dir : Path, optional
        Model cache root (default :func:`drake.models.cache_dir`); the files go to
        ``<out_dir>/<name>/``, where ``load_model(name, cache_dir=out_dir)`` finds them.
    steps, batch_size, lr
        Optimisation budget (see the module docstring for the schedule).
    seed : int
        Seeds the data draw, the initialisation and the batch order.
    train_size : int
        Training samples per public task.
    eval_size : int
        Held-out multiple-choice questions scored before and after (0 skips scoring).
    progress : callable, optional
        ``progress(step, steps, loss)`` after every optimisation step.
    threads : int or None
        torch intra-op threads for the run (restored afterwards); ``None`` keeps the current
        setting. One thread (the default) is the fastest for models this small, does not stall
        on a busy machine, and fixes the order of every floating-point reduction, so the weights
        do not depend on the machine's core count.

    Returns
    -------
    Path
        The model's folder, holding ``model.safetensors``, ``config.json``, tokenizer files and
        ``pretrain_report.json`` (budget, loss curve, accuracies before/after, weight sha256).
    """
    info = get_info(name)
    if not info.offline:
        raise ValueError(
            f"{name} is a real backbone; `drake models pretrain` trains the tiny models only "
            f"({', '.join(TINY_MODELS)})"
        )
    for label, value, low in (("steps", steps, 1), ("batch_size", batch_size, 1),
                              ("train_size", train_size, 1), ("eval_size", eval_size, 0),
                              ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"threads must be an integer >= 1 or None, got {threads!r}")
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _pretrain(info.name, out_dir, steps, seed, batch_size, lr, train_size, eval_size,
                         progress)
    finally:
        torch.set_num_threads(previous_threads)


def _pretrain(name: str, out_dir: Path | None, steps: int, seed: int, batch_size: int, lr: float,
              train_size: int, eval_size: int, progress: Progress | None) -> Path:
    info = get_info(name)
    started = time.perf_counter()
    tasks = public_tasks()
    train = [s for t in tasks for s in public_samples(t, "public", train_size, seed)]
    mc_task = [t for t in tasks if _is_mc(t)]
    held_out = (public_samples(mc_task[0], "test", eval_size, seed) if mc_task and eval_size
                else [])

    tokenizer = build_tokenizer(synth_vocabulary())
    model = build_tiny_model(info.name, tokenizer, seed=seed)
    bundle = _tiny_bundle(info, model, tokenizer)
    before = evaluate_mc(bundle, held_out) if held_out else {}

    encoded = [bundle._encode(s, answer=s["answer"], eos=True) for s in train]
    pixels = [bundle._pixel_fn(e.images) if e.images else None for e in encoded]
    pools = curriculum_pools(train)
    rng = np.random.default_rng([seed, 0x9E3779B9])
    losses: list[float] = []
    with _DeterministicRun(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        model.requires_grad_(True)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98),
                                      weight_decay=0.0)
        curriculum = _Curriculum(pools, steps, batch_size, rng)
        for step in range(steps):
            curriculum.advance(step, losses)
            rows = curriculum.batch()
            for group in optimizer.param_groups:
                group["lr"] = _lr_at(step, steps, lr)
            batch = _batch(bundle, [encoded[i] for i in rows], [pixels[i] for i in rows])
            loss = bundle.loss(batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
            if progress is not None:
                progress(step + 1, steps, losses[-1])
        model.eval()
        after = evaluate_mc(bundle, held_out) if held_out else {}
    model.requires_grad_(False)

    root = Path(out_dir) if out_dir is not None else None
    folder = tiny_folder(info.name, root)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{info.name}.tmp-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    try:
        with quiet_transformers():
            model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        tail = losses[-min(len(losses), 50):]
        report = {
            "model": info.name,
            "seed": seed,
            "steps": steps,
            "batch_size": batch_size,
            "lr": lr,
            "schedule": "linear warm-up 5%, cosine to 10% of lr; AdamW(0.9, 0.98), wd 0, clip 1",
            "curriculum": curriculum.summary(),
            "train_tasks": tasks,
            "train_samples": len(train),
            "eval_task": mc_task[0] if mc_task else None,
            "eval_split": "test",
            "final_loss": float(np.mean(tail)),
            "loss_curve": [round(v, 4) for v in losses[:: max(1, steps // 50)]],
            "accuracy_before": before,
            "accuracy_after": after,
            "parameters": int(sum(p.numel() for p in model.parameters())),
            "hidden_size": bundle.hidden_size,
            "num_layers": bundle.num_layers,
            "weights_sha256": _sha256(staging / WEIGHTS_FILE),
            "wall_seconds": round(time.perf_counter() - started, 2),
            "torch_threads": torch.get_num_threads(),
            "versions": _versions(),
        }
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("pretrained %s in %.1fs: loss %.3f, held-out accuracy %s -> %s", info.name,
             report["wall_seconds"], report["final_loss"], before, after)
    return folder


def _is_mc(task_id: str) -> bool:
    from drake.synth import SYNTH_TASKS

    return SYNTH_TASKS[task_id].answer_type == "multiple_choice"


def _batch(bundle: ModelBundle, items: Sequence[_Encoded],
           pixels: Sequence[torch.Tensor | None]) -> dict[str, torch.Tensor]:
    """Pad pre-encoded items like ``collate(train=True)``, reusing pre-computed pixels."""
    stripped = [_Encoded(it.ids, it.labels, []) for it in items]
    batch = bundle._pad(stripped, left=False, with_labels=True)
    present = [p for p in pixels if p is not None]
    if present:
        batch["pixel_values"] = torch.cat(present, dim=0)
    return batch


def _versions() -> dict[str, str]:
    import tokenizers
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": np.__version__,
    }


# ------------------------------------------------------------------------------ several models

ManyProgress = Callable[[str, int, int, float], None]


def pretrain_many(
    names: Sequence[str],
    *,
    workers: int | None = None,
    progress: ManyProgress | None = None,
    **kwargs: Any,
) -> dict[str, Path]:
    """Pretrain several tiny models, in parallel worker processes when cores allow.

    Each model trains single-threaded (see :func:`pretrain`), so ``workers`` processes use
    ``workers`` cores and every model gets exactly the weights a lone :func:`pretrain` call
    gives. Workers are fresh Python processes that exchange JSON lines with this one.

    Parameters
    ----------
    names : sequence of str
        Tiny model names.
    workers : int, optional
        Parallel processes (default: as many as models, at most the machine's CPU count);
        1 trains one after the other in this process.
    progress : callable, optional
        ``progress(name, step, steps, loss)``, called in this process.
    **kwargs
        Passed to :func:`pretrain` (``out_dir``, ``steps``, ``seed``, ``batch_size``, ``lr``,
        ``train_size``, ``eval_size``).

    Returns
    -------
    dict
        Model name -> its cache folder.

    Raises
    ------
    RuntimeError
        When a worker fails; the message carries the end of its error output.
    """
    names = list(dict.fromkeys(names))
    for name in names:
        if not get_info(name).offline:
            raise ValueError(f"{name} is not a tiny model; pretrain one of {', '.join(TINY_MODELS)}")
    allowed = {"out_dir", "steps", "seed", "batch_size", "lr", "train_size", "eval_size"}
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise TypeError(f"pretrain_many got unexpected argument(s) {unknown}")
    if workers is None:
        workers = min(len(names), os.cpu_count() or 1)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1 or len(names) == 1:
        return {
            name: pretrain(name, progress=(None if progress is None else
                                           (lambda s, t, v, n=name: progress(n, s, t, v))),
                           **kwargs)
            for name in names
        }
    results: dict[str, Path] = {}
    pending = list(names)
    while pending:
        batch, pending = pending[:workers], pending[workers:]
        results.update(_run_workers(batch, kwargs, progress))
    return {name: results[name] for name in names}


def _run_workers(names: Sequence[str], kwargs: dict[str, Any],
                 progress: ManyProgress | None) -> dict[str, Path]:
    args = {k: (str(v) if isinstance(v, Path) else v) for k, v in kwargs.items()
            if v is not None}
    lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
    procs = {}
    for name in names:
        payload = json.dumps({"name": name, **args})
        proc = subprocess.Popen(
            [sys.executable, "-m", "drake.models._pretrain_worker", payload],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        procs[name] = proc

        def pump(n: str = name, stream: Any = proc.stdout) -> None:
            for line in stream:
                lines.put((n, line))
            lines.put((n, None))

        threading.Thread(target=pump, daemon=True).start()
    folders: dict[str, Path] = {}
    open_streams = len(procs)
    while open_streams:
        name, line = lines.get()
        if line is None:
            open_streams -= 1
            continue
        try:
            message = json.loads(line)
        except ValueError:
            log.info("%s: %s", name, line.rstrip())
            continue
        if "folder" in message:
            folders[name] = Path(message["folder"])
        elif progress is not None and "step" in message:
            progress(name, int(message["step"]), int(message["steps"]), float(message["loss"]))
    failures = []
    for name, proc in procs.items():
        err = proc.stderr.read() if proc.stderr is not None else ""
        if proc.wait() != 0 or name not in folders:
            tail = err.strip().splitlines()[-1:] or ["no error output"]
            failures.append(f"{name} (exit {proc.returncode}): {tail[0]}")
    if failures:
        raise RuntimeError("pretraining failed for " + "; ".join(failures))
    return folders
