"""``drake models pretrain``: give the tiny families real weights on drake-synth's public split.

The tiny models start from random weights; a federated method that starts from them learns
vision and language from scratch, which is not what the papers' pretrained backbones do. So the
tiny families are first trained on drake-synth's **public** tasks (``synth-public-open``,
``synth-public-multi`` and ``synth-public-formats``: generic questions about one to four
pictures, the last in the client tasks' answer formats; see :mod:`drake.synth.public`), which
never ask a client task's question, the way LLaVA's instruction data is disjoint from DRAKE.
Pretraining has two stages, like LLaVA's.

Stage 1: the vision tower (shared by both families)
---------------------------------------------------
The Swin tower of :data:`drake.models.tiny.VISION_CONFIG` learns to see on the pictures of
``synth-public-open`` and ``synth-public-multi``, supervised by what the generator drew (:func:`drake.models.vision.scene_targets`: per
grid cell the two largest objects' colour, shape, fill, size, state and tag, the object count and
occlusion; per picture the background, the degradation and the bar chart). ``vision_steps``
AdamW steps (weight decay 0.05) of ``vision_batch_size`` pictures, learning rate ``vision_lr``
warmed up over 200 steps, then a cosine to 5%. The tower is written to ``<cache>/tiny-vision/``
and both families load it.

Stage 2: projector and language model (per family)
--------------------------------------------------
The tower is frozen and its features are computed once. The projector and the language model
train on answer-token cross-entropy plus a *grounding* loss: each image token, read through the
tied output embeddings, must name its cell's largest object (colour, shape, fill and size words;
:func:`drake.models.vision.grounding_words`), weighted :data:`GROUNDING_WEIGHT`. Without it the
language model learns to answer "the colour of the star" by guessing among the colours present
(0.45 on held-out questions after 4000 steps). With it the image tokens do name their objects
(colour 98%, shape 88% per cell), but on held-out questions the shipped weights still answer at
the line of that guess: the look-up itself is not learnt (``benchmarks/lookup_gap.py``, #13).

The three public tasks contribute :data:`TASK_SHARES` of the samples: a fixed pool of
``train_size`` samples drawn from again and again (the default, and the shipped weights), or,
with ``fresh=True`` (``--fresh-samples``), a new sample at every draw (:class:`_FreshStream`),
so nothing can be learnt by heart; with fresh samples, ``focus_share`` of the draws can be one
kind of question (:data:`FOCUS`), and ``mark_options`` adds a target on every option line
(:func:`_mark_options`). Batches mix an *easy* pool (public samples drawn with at most :data:`EASY_OBJECTS` objects per
picture) and the full pool: the easy share starts at 1 and falls linearly to 10% at
:data:`EASY_UNTIL` of the steps. The learning rate warms up over 200 steps, then follows a cosine
to 10% of ``lr``; AdamW (0.9, 0.98), no weight decay, gradient-norm clip 1.

Both stages score held-out public questions (``test`` split, greedy exact match per family)
and write a report beside the weights. The same seed gives the same weights, byte for byte, on
the same machine and library versions: every draw comes from seeded generators, the run is
single-threaded and deterministic algorithms are on. The weights shipped with the suite
(:mod:`drake.models.shipped`) are this module's output with the default arguments.
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import SwinModel

from drake.models.bundle import IGNORE_INDEX, ModelBundle, _Encoded
from drake.models.images import normalise, resized_uint8
from drake.models.loading import WEIGHTS_FILE, _tiny_bundle, quiet_transformers, tiny_folder
from drake.models.tiny import TINY_IMAGE_SIZE, build_tiny_model, synth_vocabulary, vision_config
from drake.models.tokenizer import build_tokenizer
from drake.models.vision import (
    VisionHeads,
    grounding_words,
    scene_targets,
    stack_targets,
    tower_features,
)
from drake.models.zoo import TINY_MODELS, get_info

__all__ = [
    "pretrain",
    "pretrain_vision",
    "pretrain_many",
    "train_family",
    "public_tasks",
    "public_samples",
    "evaluate_open",
    "exact_hits",
    "VISION_FOLDER",
    "VISION_FILE",
    "REPORT_FILE",
    "DEFAULT_STEPS",
    "DEFAULT_VISION_STEPS",
    "DEFAULT_VISION_PICTURES",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_LR",
    "DEFAULT_TRAIN_SIZE",
    "DEFAULT_EVAL_SIZE",
    "DEFAULT_CHECKPOINT_EVERY",
    "DEFAULT_LOOKUP_STEPS",
    "DEFAULT_LABEL_STEPS",
    "label_steps_after",
]

log = logging.getLogger(__name__)

DEFAULT_STEPS = 12000
DEFAULT_BATCH_SIZE = 32
DEFAULT_LR = 1e-3
DEFAULT_TRAIN_SIZE = 40000
DEFAULT_EVAL_SIZE = 400
DEFAULT_CHECKPOINT_EVERY = 250
#: Steps of stage 3, the look-up stage (:mod:`drake.models.lookup_pretrain`); the shipped
#: weights went through it.
DEFAULT_LOOKUP_STEPS = 1500
#: Steps of stage 4, the label stage (:mod:`drake.models.label_pretrain`), after stage 3; the
#: shipped weights went through it.
DEFAULT_LABEL_STEPS = 2000
DEFAULT_VISION_STEPS = 8000
DEFAULT_VISION_BATCH_SIZE = 32
DEFAULT_VISION_LR = 2e-3
DEFAULT_VISION_PICTURES = 16000
REPORT_FILE = "pretrain_report.json"
VISION_FOLDER = "tiny-vision"
VISION_FILE = "vision.safetensors"

#: Weight of the grounding loss against the answer loss.
GROUNDING_WEIGHT = 1.0
#: Object cap of the easy pool, its share of the training samples, and the fraction of the
#: steps after which the easy share stays at its floor of 10%.
EASY_OBJECTS = 2
EASY_SHARE = 0.25
EASY_UNTIL = 0.3
#: Share of each public task among the training (and held-out) samples.
TASK_SHARES = MappingProxyType({
    "synth-public-open": 0.45, "synth-public-multi": 0.2, "synth-public-formats": 0.35})
_EVAL_BATCH = 64

Progress = Callable[[int, int, float], None]


def public_tasks() -> list[str]:
    """Ids of drake-synth's public-split tasks (group ``"public"``), sorted."""
    from drake.synth import SYNTH_TASKS

    tasks = sorted(t for t, spec in SYNTH_TASKS.items() if spec.group == "public")
    if not tasks:
        raise RuntimeError("drake.synth declares no public task; the pretraining data is missing")
    return tasks


def public_samples(task_id: str, split: str, count: int, seed: int, start: int = 0,
                   objects: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """``count`` samples of a public task, indices ``start .. start + count - 1``; ``objects``
    overrides the task's object-count knob (the easy pool)."""
    from dataclasses import replace

    from drake.synth import generate_sample
    from drake.synth.knobs import DEFAULT_KNOBS

    knobs = None if objects is None else replace(DEFAULT_KNOBS[task_id], objects=objects)
    return [generate_sample(task_id, split, start + i, seed, knobs=knobs) for i in range(count)]


def _meta(sample: dict[str, Any]) -> dict[str, Any]:
    meta = json.loads(sample.get("meta") or "{}")
    return meta if isinstance(meta, dict) else {}


def _group(sample: dict[str, Any]) -> str:
    """A public sample's report group: its family, or ``format:<format>`` for
    ``synth-public-formats`` (whose families are reported with the plain questions)."""
    meta = _meta(sample)
    return f"format:{meta['format']}" if "format" in meta else meta.get("family", "")


def evaluate_open(bundle: ModelBundle, samples: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Greedy exact-match accuracy of public questions, per family (per answer format for
    ``synth-public-formats``) and overall (``mean``: the mean over groups, so each weighs the
    same)."""
    if not samples:
        return {}
    hits: dict[str, list[bool]] = {}
    for family in sorted({_group(s) for s in samples}):
        hits[family] = exact_hits(bundle, [s for s in samples if _group(s) == family])
    report = {family: round(float(np.mean(h)), 4) for family, h in hits.items()}
    report["mean"] = round(float(np.mean(list(report.values()))), 4)
    return report


def exact_hits(bundle: ModelBundle, samples: Sequence[dict[str, Any]]) -> list[bool]:
    """Whether each sample's greedy answer is its gold answer (exact match, outer spaces
    ignored); answers may run to twice the longest gold answer's words, plus two tokens."""
    longest = max(len(s["answer"].split()) for s in samples)
    outputs = bundle.generate(samples, max_new_tokens=2 * longest + 2, batch_size=_EVAL_BATCH)
    return [out.strip() == s["answer"].strip() for out, s in zip(outputs, samples, strict=True)]


def _eval_set(seed: int, size: int) -> list[dict[str, Any]]:
    if size <= 0:
        return []
    return [sample for task, count in _shares(size).items()
            for sample in public_samples(task, "test", count, seed)]


def _shares(size: int) -> dict[str, int]:
    """``size`` samples split over the public tasks by :data:`TASK_SHARES` (the first task
    takes the rounding remainder)."""
    counts = {task: int(round(size * share)) for task, share in TASK_SHARES.items()}
    first = next(iter(counts))
    counts[first] += size - sum(counts.values())
    return counts


def _train_set(seed: int, size: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(easy pool, full pool) of ``size`` training samples in all."""
    pools: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    for task, count in _shares(size).items():
        easy = int(round(count * EASY_SHARE))
        pools[1].extend(public_samples(task, "public", count - easy, seed))
        # the easy pool reads other indices, so it does not repeat the full pool's streams
        pools[0].extend(public_samples(task, "public", easy, seed, start=count,
                                       objects=(0, EASY_OBJECTS)))
    return pools


class _FreshStream:
    """Public training samples never drawn twice: the i-th is a public task picked by
    :data:`TASK_SHARES`, at that task's next index from ``start`` on (the easy stream starts
    at :data:`_EASY_START`, so it never meets the full one's pictures). With ``focus_share``
    that share of the draws is a question of :data:`FOCUS` ``focus`` instead
    (:func:`_focus_sample`), and the public tasks share the rest by :data:`TASK_SHARES`; with 0
    the draws are those of a stream without it."""

    def __init__(self, seed: int, start: int, objects: tuple[int, int] | None,
                 focus_share: float = 0.0, focus: str = "label") -> None:
        self.seed, self.objects = seed, objects
        self.rng = np.random.default_rng([seed, 0xF5E5, start])
        self.tasks = list(TASK_SHARES)
        shares = np.array([TASK_SHARES[t] for t in self.tasks], dtype=np.float64)
        if focus_share > 0:
            self.tasks.append(_FOCUS_PREFIX + focus)
            shares = np.append(shares / shares.sum() * (1.0 - focus_share), focus_share)
        self.shares = shares / shares.sum()
        self.next = dict.fromkeys(self.tasks, start)
        self.drawn = 0

    def plan(self, count: int) -> list[tuple[str, int]]:
        """The (task, index) of the next ``count`` samples, without generating them."""
        out = []
        for k in self.rng.choice(len(self.tasks), count, p=self.shares):
            task = self.tasks[int(k)]
            out.append((task, self.next[task]))
            self.next[task] += 1
        self.drawn += count
        return out

    def take(self, count: int) -> list[dict[str, Any]]:
        return _fresh_samples(self.seed, self.objects, self.plan(count))


def _fresh_samples(seed: int, objects: tuple[int, int] | None,
                   plan: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    return [_focus_sample(seed, objects, task[len(_FOCUS_PREFIX):], index)
            if task.startswith(_FOCUS_PREFIX) else
            public_samples(task, "public", 1, seed, start=index, objects=objects)[0]
            for task, index in plan]


#: The label step's questions: lettered or numbered ``synth-public-formats`` questions, whose
#: gold answer is an option's letter or number, not its word (issue #13).
LABEL_FORMATS = ("letter", "id")
#: The plainest look-ups: ``synth-public-open`` questions that name an object (by its shape,
#: colour or both) and ask one of its attributes.
LOOKUP_FAMILIES = ("colour", "shape", "where", "fill", "size", "state", "tags")
#: What a ``focus_share`` draws (``focus`` -> public task, the ``meta`` key it selects on, the
#: values kept, and the first public index its blocks read): ``label`` teaches the label step,
#: ``lookup`` the look-up it composes with.
FOCUS = MappingProxyType({
    "label": ("synth-public-formats", "format", LABEL_FORMATS, 2 * 10**8),
    "lookup": ("synth-public-open", "family", LOOKUP_FAMILIES, 5 * 10**8),
})
#: A planned focus question's pseudo-task is this prefix and the focus. Focus question ``k`` is
#: the first kept one among its task's indices ``start + k * _FOCUS_BLOCK`` on: blocks are
#: disjoint, so no question is drawn twice, and start far beyond the full and easy streams'.
_FOCUS_PREFIX = "focus:"
_FOCUS_BLOCK = 32


def _focus_sample(seed: int, objects: tuple[int, int] | None, focus: str,
                  index: int) -> dict[str, Any]:
    """Focus question ``index`` of ``focus``: the first sample of its block that :data:`FOCUS`
    keeps (about two in five for ``label``, seven in fifteen for ``lookup``; a block without
    one, odds of about 1e-7 or less, gives its last)."""
    task, key, kept, start = FOCUS[focus]
    return _first_kept(task, seed, start + index * _FOCUS_BLOCK, _FOCUS_BLOCK,
                       lambda sample: _meta(sample).get(key) in kept, objects)


def _first_kept(task: str, seed: int, first: int, block: int,
                keep: Callable[[dict[str, Any]], bool],
                objects: tuple[int, int] | None = None) -> dict[str, Any]:
    """The first public sample of ``task`` at indices ``first`` to ``first + block - 1`` that
    ``keep`` accepts; the block's last when none does."""
    for i in range(first, first + block):
        sample = public_samples(task, "public", 1, seed, start=i, objects=objects)[0]
        if keep(sample):
            break
    return sample


#: A step's fresh samples are planned as (easy plan, full plan).
_StepPlan = tuple[list[tuple[str, int]], list[tuple[str, int]]]
#: Samples ready for a step: their encodings (pictures dropped) and :func:`_picture_inputs`.
_Prepared = tuple[list[_Encoded], tuple[list[torch.Tensor], torch.Tensor, np.ndarray]]

_worker_bundle: ModelBundle | None = None


def _init_sample_worker(name: str) -> None:
    """A sample worker encodes with a bundle of its own: the same tokenizer and picture
    transform as the training one (its random weights are never used)."""
    global _worker_bundle
    from drake.workers import exit_with_parent

    exit_with_parent()  # a killed run takes its sample workers with it
    torch.set_num_threads(1)
    tokenizer = build_tokenizer(synth_vocabulary())
    _worker_bundle = _tiny_bundle(get_info(name), build_tiny_model(name, tokenizer, seed=0),
                                  tokenizer)


def _prepare(bundle: ModelBundle, samples: Sequence[dict[str, Any]],
             marks: bool = False) -> _Prepared:
    """``samples`` encoded with their answers (and, with ``marks``, :func:`_mark_options`'s
    targets), and their :func:`_picture_inputs`."""
    encoded = [bundle._encode(s, answer=s["answer"], eos=True) for s in samples]
    if marks:
        encoded = [_mark_options(bundle, e, s["answer"]) for e, s in zip(encoded, samples)]
    return [_Encoded(e.ids, e.labels, []) for e in encoded], _picture_inputs(bundle, samples)


def _option_lines(bundle: ModelBundle, ids: Sequence[int]) -> list[tuple[str, int]]:
    """The option lines of an encoded prompt ("\n<label>. <option>" with a letter or number
    label): each one's label and the position of the newline that ends it."""
    tokens = bundle.tokenizer.convert_ids_to_tokens(list(ids))
    lines = []
    for i in range(len(tokens) - 3):
        label = tokens[i + 1]
        if (tokens[i] == "\n" and tokens[i + 2] == "." and len(label) <= 2
                and (label.isdigit() or label.isupper())):
            end = next((j for j in range(i + 3, len(tokens)) if tokens[j] == "\n"), None)
            if end is not None:
                lines.append((label, end))
    return lines


def _mark_options(bundle: ModelBundle, encoded: _Encoded, answer: str) -> _Encoded:
    """``encoded`` with *option marks* added to its targets: the newline that ends each option
    line of a lettered or numbered question is trained to name whether that option is the
    answer (the vocabulary's "Yes" or "No", through the tied head, as the answer is read), so
    the look-up is checked on every option line before the answer's label is copied from the
    marked one. A prompt without option lines, or whose answer labels none of them, is left
    as it is."""
    lines, gold = _option_lines(bundle, encoded.ids), answer.strip()
    if gold not in {label for label, _ in lines}:
        return encoded
    yes, no = bundle.tokenizer.convert_tokens_to_ids(["\u2581Yes", "\u2581No"])
    labels = list(encoded.labels)
    for label, end in lines:
        # the target at end + 1 is what the hidden state at ``end`` predicts (a prompt always
        # goes on after its last option line: the instruction, then the chat suffix)
        if end + 1 < len(labels):
            labels[end + 1] = yes if label == gold else no
    return _Encoded(encoded.ids, labels, encoded.images)


def _prepare_steps(bundle: ModelBundle, seed: int, objects: tuple[tuple[int, int] | None, None],
                   plans: Sequence[_StepPlan], marks: bool = False
                   ) -> list[tuple[_Prepared, _Prepared]]:
    return [(_prepare(bundle, _fresh_samples(seed, objects[0], plan[0]), marks),
             _prepare(bundle, _fresh_samples(seed, objects[1], plan[1]), marks))
            for plan in plans]


def _fresh_chunk(seed: int, objects: tuple[tuple[int, int] | None, None],
                 plans: Sequence[_StepPlan], marks: bool = False
                 ) -> list[tuple[_Prepared, _Prepared]]:
    """Several steps' samples, made and prepared in a sample worker."""
    assert _worker_bundle is not None, "_init_sample_worker did not run"
    return _prepare_steps(_worker_bundle, seed, objects, plans, marks)


def _fresh_batches(bundle: ModelBundle, streams: tuple[_FreshStream, _FreshStream],
                   counts: Sequence[int], batch_size: int, workers: int, chunk: int = 50,
                   start: int = 0, marks: bool = False
                   ) -> Iterator[tuple[_Prepared, _Prepared]]:
    """Each step's (easy, full) fresh samples, ``counts[step]`` of them easy, prepared for
    ``bundle``. The order is planned here, so nothing depends on ``workers``: with 0 the
    samples are made step by step in this process, else by that many processes, a few chunks
    of ``chunk`` steps ahead (making, encoding and reading the pictures costs more than a
    GPU step). ``start`` skips the first steps (a resumed run): they are planned, not made."""
    plans = [(streams[0].plan(n) if n else [], streams[1].plan(batch_size - n) if n < batch_size
              else []) for n in counts][start:]
    seed, objects = streams[0].seed, (streams[0].objects, None)
    if workers == 0:
        for plan in plans:
            yield from _prepare_steps(bundle, seed, objects, [plan], marks)
        return
    import multiprocessing
    from collections import deque
    from concurrent.futures import ProcessPoolExecutor

    chunks = [plans[i:i + chunk] for i in range(0, len(plans), chunk)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_sample_worker, initargs=(bundle.name,)) as pool:
        ahead: deque[Any] = deque()
        for part in chunks:
            ahead.append(pool.submit(_fresh_chunk, seed, objects, part, marks))
            if len(ahead) > 2 * workers:
                yield from ahead.popleft().result()
        while ahead:
            yield from ahead.popleft().result()


#: First index of the fresh easy stream (the full stream starts at 0).
_EASY_START = 10**8


def _draw(rng: np.random.Generator, size: int, count: int) -> np.ndarray:
    """``count`` distinct rows of ``size`` (with repeats only when the pool is smaller)."""
    return rng.choice(size, count, replace=count > size)


def _easy_count(rng: np.random.Generator, step: int, steps: int, batch_size: int,
                mixed: bool = True) -> int:
    """Easy samples in step ``step``'s batch: their share falls from 1 to 0.1 over the first
    :data:`EASY_UNTIL` of the steps (0 without an easy pool, ``mixed=False``)."""
    share = max(0.1, 1.0 - step / (EASY_UNTIL * steps)) if mixed else 0.0
    return int(rng.binomial(batch_size, share))


def _lr_at(step: int, steps: int, lr: float, warm: int, floor: float) -> float:
    warm = max(1, min(warm, steps // 2))
    if step < warm:
        return lr * (step + 1) / warm
    progress = (step - warm) / max(1, steps - warm)
    return lr * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def _machine() -> dict[str, str]:
    """The CPU the weights were made on: float kernels differ between CPU types (AVX2, AVX-512,
    AMX), so only the same CPU type with the same library versions gives the same bytes."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


@contextmanager
def _run(threads: int | None, seed: int) -> Iterator[None]:
    """Deterministic algorithms, ``threads`` intra-op threads and a forked, seeded torch RNG for
    the body; all restored afterwards."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    previous_threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True, warn_only=True)
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.set_num_threads(previous_threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


def _check_budget(**values: Any) -> None:
    for label, value in values.items():
        low = 0 if label in ("eval_size", "seed", "sample_workers", "checkpoint_every") else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")


def _check_focus(share: float, focus: str, fresh: bool) -> None:
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
        raise ValueError(f"focus_share must be a number in [0, 1), got {share!r}")
    if focus not in FOCUS:
        raise ValueError(f"unknown focus {focus!r}; choose one of {', '.join(FOCUS)}")
    if share and not fresh:
        raise ValueError(f"focus_share={share} needs fresh samples (--fresh-samples): a fixed "
                         "pool's questions are learnt by heart (benchmarks/memorisation.py)")


def _check_device(device: str) -> None:
    """``device`` must name the CPU or a CUDA device this machine has."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device {device!r} is not a torch device; use 'cpu' or 'cuda'") from err
    if parsed.type == "cpu":
        return
    if parsed.type != "cuda":
        raise ValueError(f"device {device!r}: pretraining runs on 'cpu' or a CUDA device")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if (parsed.index or 0) >= count:
        raise ValueError(f"device {device!r}: this machine has {count} CUDA device(s); "
                         "pretrain with device='cpu' (`--device cpu`)")


def _device_name(device: str) -> str:
    parsed = torch.device(device)
    if parsed.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(parsed)})"
    return f"cpu ({platform.machine()})"


def _check_threads(threads: int | None) -> None:
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"threads must be an integer >= 1 or None, got {threads!r}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


@contextmanager
def _staged(folder: Path) -> Iterator[Path]:
    """A temporary sibling of ``folder`` that replaces it when the body succeeds."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        yield staging
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _cache_root(out_dir: Path | None) -> Path:
    return tiny_folder(TINY_MODELS[0], None if out_dir is None else Path(out_dir)).parent


# --------------------------------------------------------------------------------- stage 1


def vision_folder(out_dir: Path | None = None) -> Path:
    """Where stage 1 writes the shared vision tower."""
    return _cache_root(out_dir) / VISION_FOLDER


def _pictures(samples: Sequence[dict[str, Any]], limit: int) -> tuple[list[Any], list[Any]]:
    images, scenes = [], []
    for sample in samples:
        for image, scene in zip(sample["images"], _meta(sample)["scenes"]):
            images.append(image)
            scenes.append(scene)
            if len(images) == limit:
                return images, scenes
    return images, scenes


def pretrain_vision(
    *,
    out_dir: Path | None = None,
    steps: int = DEFAULT_VISION_STEPS,
    seed: int = 0,
    batch_size: int = DEFAULT_VISION_BATCH_SIZE,
    lr: float = DEFAULT_VISION_LR,
    pictures: int = DEFAULT_VISION_PICTURES,
    eval_pictures: int = 1500,
    progress: Progress | None = None,
    threads: int | None = 1,
    device: str = "cpu",
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
) -> Path:
    """Stage 1: train the shared Swin tower on the public split's scene targets.

    Returns the folder holding ``vision.safetensors`` (the tower's state dict, as
    ``LlavaForConditionalGeneration.model.vision_tower`` names it) and ``pretrain_report.json``
    (held-out accuracy per target). ``device`` is where it trains and ``checkpoint_every`` how
    often it saves a checkpoint to resume from (``.tiny-vision.resume/``; see :func:`pretrain`).
    """
    _check_budget(steps=steps, seed=seed, batch_size=batch_size, pictures=pictures,
                  eval_pictures=eval_pictures, checkpoint_every=checkpoint_every)
    _check_threads(threads)
    _check_device(device)
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    started = time.perf_counter()
    per_task = pictures // 2 + 1
    train = _pictures(public_samples("synth-public-open", "public", per_task, seed)
                      + public_samples("synth-public-multi", "public", per_task // 2, seed),
                      pictures)
    held = _pictures(public_samples("synth-public-open", "test", eval_pictures // 2 + 1, seed)
                     + public_samples("synth-public-multi", "test", eval_pictures // 4 + 1,
                                      seed), eval_pictures)
    x_train = torch.from_numpy(resized_uint8(train[0], TINY_IMAGE_SIZE))
    y_train = {k: v.to(device) for k, v in
               stack_targets([scene_targets(s) for s in train[1]]).items()}
    x_held = torch.from_numpy(resized_uint8(held[0], TINY_IMAGE_SIZE))
    y_held = {k: v.to(device) for k, v in
              stack_targets([scene_targets(s) for s in held[1]]).items()}
    rng = np.random.default_rng([seed, 0x5157])
    losses: list[float] = []
    folder = vision_folder(out_dir)
    with _run(threads, seed):
        tower = SwinModel(vision_config(), add_pooling_layer=False)
        heads = VisionHeads(tower.config.hidden_size)
        tower.to(device)
        heads.to(device)
        trained = torch.nn.ModuleDict({"tower": tower, "heads": heads})
        params = list(trained.parameters())
        optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.05)
        checkpoint = _Checkpoint(folder, {
            "stage": "vision", "seed": seed, "steps": steps, "batch_size": batch_size, "lr": lr,
            "pictures": pictures, "eval_pictures": eval_pictures, "device": _device_name(device),
            "torch_threads": torch.get_num_threads(), "versions": _versions()})
        resumed = checkpoint.load(trained, optimizer, rng, device)
        first = 0 if resumed is None else resumed["step"]
        if resumed is not None:
            losses = resumed["losses"]

        def features(x: torch.Tensor) -> torch.Tensor:
            return tower_features(tower, normalise(x.to(device)))

        tower.train()
        for step in range(first, steps):
            rows = torch.from_numpy(_draw(rng, len(x_train), batch_size))
            for group in optimizer.param_groups:
                group["lr"] = _lr_at(step, steps, lr, warm=200, floor=0.05)
            loss, _ = heads.loss(features(x_train[rows]),
                                 {k: v[rows.to(device)] for k, v in y_train.items()})
            _optimise(loss, optimizer, params, losses)
            checkpoint.after(step + 1, checkpoint_every, trained, optimizer, rng, device,
                             losses=losses, before={}, started=started, progress=progress)
        tower.eval()
        with torch.no_grad():
            feats = torch.cat([features(x_held[i:i + 256]) for i in range(0, len(x_held), 256)])
            _, accuracy = heads.loss(feats, y_held)
    with _staged(folder) as staging:
        state = {k: v.detach().cpu().contiguous() for k, v in tower.state_dict().items()}
        save_file(state, str(staging / VISION_FILE), metadata={"format": "pt"})
        report = {
            "stage": "vision", "seed": seed, "steps": steps, "batch_size": batch_size, "lr": lr,
            "pictures": len(train[0]), "held_out_pictures": len(held[0]),
            "held_out_accuracy": {k: round(v, 4) for k, v in sorted(accuracy.items())},
            "final_loss": float(np.mean(losses[-50:])),
            "loss_curve": [round(v, 4) for v in losses[:: max(1, steps // 50)]],
            "weights_sha256": _sha256(staging / VISION_FILE),
            "resumed_at": checkpoint.resumed_at,
            "wall_seconds": round(checkpoint.elapsed + time.perf_counter() - started, 2),
            "device": _device_name(device),
            "versions": _versions(),
            "machine": checkpoint.machine,
        }
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    checkpoint.remove()
    log.info("pretrained the vision tower in %.0fs: %s", report["wall_seconds"],
             report["held_out_accuracy"])
    return folder


def load_vision(model: torch.nn.Module, out_dir: Path | None = None) -> Path:
    """Load stage 1's tower into a tiny LLaVA ``model`` (strictly: every key must match)."""
    path = vision_folder(out_dir) / VISION_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"no pretrained vision tower at {path}; run stage 1 first (`drake models pretrain` "
            "runs both stages)")
    model.model.vision_tower.load_state_dict(load_file(str(path)), strict=True)
    return path


# --------------------------------------------------------------------------------- stage 2


def _picture_inputs(bundle: ModelBundle, samples: Sequence[dict[str, Any]]
                    ) -> tuple[list[torch.Tensor], torch.Tensor, np.ndarray]:
    """The pixels of every picture of ``samples`` (in chunks of 256), their grounding targets
    and each sample's first picture (offsets)."""
    tokenizer = bundle.tokenizer
    images = [im for s in samples for im in s["images"]]
    pixels = [bundle._pixel_fn(images[i:i + 256]) for i in range(0, len(images), 256)]
    word_ids: list[list[list[int]]] = []
    for s in samples:
        for scene in _meta(s)["scenes"]:
            word_ids.append([[tokenizer.convert_tokens_to_ids("\u2581" + w) for w in cell]
                             if cell else [IGNORE_INDEX] * 4
                             for cell in grounding_words(scene)])
    words = torch.tensor(word_ids, dtype=torch.long).reshape(len(images), 9, 4)
    return pixels, words, np.cumsum([0] + [len(s["images"]) for s in samples])


class _Features:
    """Frozen-tower features of every picture of a sample list, and their grounding targets
    (from :func:`_picture_inputs`, made here or by a sample worker)."""

    def __init__(self, bundle: ModelBundle,
                 inputs: tuple[list[torch.Tensor], torch.Tensor, np.ndarray]) -> None:
        tower = bundle.model.model.vision_tower
        pixels, self.words, self.offsets = inputs
        with torch.no_grad():
            chunks = [tower_features(tower, chunk.to(bundle.device)).to(torch.bfloat16)
                      for chunk in pixels]
        self.feats = torch.cat(chunks) if chunks else torch.zeros(0)

    def rows(self, index: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        picks = [j for i in index for j in range(self.offsets[i], self.offsets[i + 1])]
        return self.feats[picks].float(), self.words[picks].to(self.feats.device)


def _encoded_pool(bundle: ModelBundle, samples: Sequence[dict[str, Any]], marks: bool = False
                  ) -> tuple[list[_Encoded], _Features]:
    """``samples`` encoded with their answers (and option marks), and their pictures' tower
    features."""
    encoded, inputs = _prepare(bundle, samples, marks)
    return encoded, _Features(bundle, inputs)


def _language_loss(bundle: ModelBundle, items: Sequence[_Encoded], feats: torch.Tensor,
                   words: torch.Tensor,
                   extra: Callable[[Sequence[torch.Tensor]], torch.Tensor | None] | None = None
                   ) -> torch.Tensor:
    """Stage 2's loss (answer cross-entropy plus the weighted grounding loss); ``extra``, given
    the language model's attention weights per layer, adds its loss unless it returns None
    (stage 3's pointer loss)."""
    model = bundle.model
    batch, embeds, grounding = multimodal_inputs(bundle, items, feats, words)
    out = model.model.language_model(inputs_embeds=embeds, attention_mask=batch["attention_mask"],
                                     use_cache=False, output_attentions=extra is not None)
    loss = answer_loss(bundle, batch, out.last_hidden_state) + GROUNDING_WEIGHT * grounding
    more = None if extra is None else extra(out.attentions)
    return loss if more is None else loss + more


def _pool_loss(bundle: ModelBundle,
              picks: Sequence[tuple[Sequence[_Encoded], _Features, Sequence[int]]]
              ) -> torch.Tensor:
    """Stage 2's loss on one batch: ``picks`` names, per pool, its encoded samples, their
    :class:`_Features` and the rows drawn from it."""
    items, feats, words = [], [], []
    for encoded, features, rows in picks:
        items += [encoded[i] for i in rows]  # :func:`_prepare` dropped their pictures
        f, w = features.rows(rows)
        feats.append(f)
        words.append(w)
    return _language_loss(bundle, items, torch.cat(feats), torch.cat(words))


def answer_loss(bundle: ModelBundle, batch: dict[str, torch.Tensor],
                hidden: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the answer tokens, read from the language model's last hidden states."""
    labels = batch["labels"][:, 1:]
    answer = labels != IGNORE_INDEX
    return F.cross_entropy(bundle.model.get_output_embeddings()(hidden[:, :-1][answer]),
                           labels[answer])


def multimodal_inputs(bundle: ModelBundle, items: Sequence[_Encoded], feats: torch.Tensor,
                      words: torch.Tensor
                      ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Stage 2's language-model inputs: the padded batch of ``items``, its input embeddings with
    the projected tower ``feats`` in place of the image tokens, and the grounding loss of those
    image tokens against ``words`` (:class:`_Features`)."""
    model = bundle.model
    batch = bundle._pad(items, left=False, with_labels=True)
    ids = batch["input_ids"]
    embeds = model.get_input_embeddings()(ids)
    head = model.get_output_embeddings()
    grounding = embeds.new_zeros(())
    if len(feats):
        projected = model.model.multi_modal_projector(feats).reshape(-1, embeds.shape[-1])
        mask = (ids == bundle.image_token_id)[..., None].expand_as(embeds)
        embeds = embeds.masked_scatter(mask, projected)
        targets = words.reshape(-1, 4)
        known = targets[:, 0] != IGNORE_INDEX
        if bool(known.any()):
            logits = head(projected[known])
            grounding = sum(F.cross_entropy(logits, targets[known][:, j]) for j in range(4)) / 4
    return batch, embeds, grounding


def _optimise(loss: torch.Tensor, optimizer: torch.optim.Optimizer,
              params: Sequence[torch.Tensor], losses: list[float]) -> None:
    """One optimisation step on ``loss`` (gradient norm clipped to 1), its value appended to
    ``losses``."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    losses.append(float(loss.detach()))


class _Checkpoint:
    """A stage's resumable state, beside the model folder (``.<name>.<suffix>/``, stage 2's
    ``.<name>.resume/``):
    ``state.json`` (the step, the run's arguments, the losses so far, stage 2's held-out
    accuracy before training, the numpy generator) and the safetensors file it names (the trainable
    weights, AdamW's state, torch's generators). A save writes a new tensor file, then
    replaces ``state.json`` atomically, then drops the old file: a crash at any point leaves
    one whole checkpoint."""

    def __init__(self, model_folder: Path, arguments: dict[str, Any],
                 suffix: str = "resume") -> None:
        self.name = model_folder.name
        self.folder = model_folder.parent / f".{self.name}.{suffix}"
        self.arguments = arguments
        #: where the run started, and each resume's step and machine (float kernels differ
        #: between CPU types, so a run resumed on another one differs from an unbroken run)
        self.machine = _machine()
        self.resumed_at: list[dict[str, Any]] = []
        self.elapsed = 0.0

    def load(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
             rng: np.random.Generator, device: str) -> dict[str, Any] | None:
        """Restore the last checkpoint into ``model``, ``optimizer``, ``rng`` and torch's
        generators; its state, or None when there is none."""
        path = self.folder / "state.json"
        if not path.is_file():
            return None
        fix = f"delete {self.folder} to start over"
        try:
            state = json.loads(path.read_text())
            saved = state["arguments"]
            tensors = load_file(str(self.folder / state["tensors"]))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: unreadable pretraining checkpoint ({err!r}); {fix}"
                             ) from err
        differ = sorted(k for k in set(saved) | set(self.arguments)
                        if saved.get(k) != self.arguments.get(k))
        if differ:
            detail = "; ".join(f"{k} {saved.get(k)!r} there, {self.arguments.get(k)!r} now"
                               for k in differ)
            raise ValueError(
                f"{self.folder} holds the checkpoint of another pretraining run ({detail}); "
                f"rerun with its arguments to resume it, or {fix}")
        try:
            with torch.no_grad():
                for name, param in model.named_parameters():
                    if param.requires_grad:
                        param.copy_(tensors[f"param/{name}"])
            moments = {int(key.split("/")[1]) for key in tensors if key.startswith("adam/")}
            optimizer.load_state_dict({
                "state": {i: {k: tensors[f"adam/{i}/{k}"] for k in ("step", "exp_avg",
                                                                     "exp_avg_sq")}
                          for i in sorted(moments)},
                "param_groups": optimizer.state_dict()["param_groups"]})
            torch.set_rng_state(tensors["rng/cpu"])
            if torch.device(device).type == "cuda":
                torch.cuda.set_rng_state(tensors["rng/cuda"], device)
            rng.bit_generator.state = state["numpy_rng"]
        except (KeyError, RuntimeError, ValueError) as err:
            raise ValueError(f"{self.folder / state['tensors']}: the checkpoint does not fit "
                             f"this model ({err!r}); {fix}") from err
        self.machine = state["machine"]
        self.resumed_at = [*state["resumed_at"], {"step": state["step"], "machine": _machine()}]
        self.elapsed = float(state["elapsed"])
        log.info("%s: resuming at step %d of %d from %s", self.name,
                 state["step"], self.arguments["steps"], self.folder)
        return state

    def due(self, done: int, every: int) -> bool:
        """Whether to save after step ``done``: every ``every`` steps (0: never), not after
        the last one (the finished run is saved instead)."""
        return bool(every) and done % every == 0 and done < self.arguments["steps"]

    def after(self, done: int, every: int, model: torch.nn.Module,
              optimizer: torch.optim.Optimizer, rng: np.random.Generator, device: str, *,
              losses: list[float], before: dict[str, float], started: float,
              progress: Progress | None) -> None:
        """After step ``done``: save when :meth:`due` (the run's time counted from
        ``started``), then report the step to ``progress``."""
        if self.due(done, every):
            self.save(done, model, optimizer, rng, device, losses=losses, before=before,
                      elapsed=time.perf_counter() - started)
        if progress is not None:
            progress(done, self.arguments["steps"], losses[-1])

    def save(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
             rng: np.random.Generator, device: str, *, losses: list[float],
             before: dict[str, float], elapsed: float) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tensors = {f"param/{name}": param.detach().cpu().contiguous()
                   for name, param in model.named_parameters() if param.requires_grad}
        for i, moments in optimizer.state_dict()["state"].items():
            for key, value in moments.items():
                tensors[f"adam/{i}/{key}"] = value.detach().cpu().contiguous()
        tensors["rng/cpu"] = torch.get_rng_state()
        if torch.device(device).type == "cuda":
            tensors["rng/cuda"] = torch.cuda.get_rng_state(device)
        name = f"state-{step}.safetensors"
        save_file(tensors, str(self.folder / name))
        state = {"step": step, "arguments": self.arguments, "tensors": name, "losses": losses,
                 "before": before, "numpy_rng": rng.bit_generator.state,
                 "machine": self.machine, "resumed_at": self.resumed_at,
                 "elapsed": self.elapsed + elapsed}
        staging = self.folder / "state.json.tmp"
        staging.write_text(json.dumps(state) + "\n")
        os.replace(staging, self.folder / "state.json")
        for old in self.folder.glob("state-*.safetensors"):
            if old.name != name:
                old.unlink()

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


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
    device: str = "cpu",
    fresh: bool = False,
    sample_workers: int = 0,
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
    focus_share: float = 0.0,
    focus: str = "label",
    mark_options: bool = False,
) -> Path:
    """Stage 2: pretrain tiny model ``name`` on the public split, on stage 1's frozen tower.

    Parameters
    ----------
    name : str
        ``tiny-llava-llama`` or ``tiny-llava-qwen``.
    out_dir : Path, optional
        Model cache root (default :func:`drake.models.cache_dir`); the files go to
        ``<out_dir>/<name>/``, where ``load_model(name, cache_dir=out_dir)`` finds them. The
        vision tower is read from ``<out_dir>/tiny-vision/`` (:func:`pretrain_vision`).
    steps, batch_size, lr
        Optimisation budget (see the module docstring for the schedule).
    seed : int
        Seeds the data draw, the initialisation and the batch order.
    train_size : int
        Public training samples in all (both tasks, easy and full pools), drawn from again and
        again over the steps.
    fresh : bool
        Draw a new public sample every time instead (``steps * batch_size`` in all, none seen
        twice; ``train_size`` is unused), generated and encoded step by step. A fixed pool is
        learnt by heart (``benchmarks/memorisation.py`` measures how much).
    sample_workers : int
        With ``fresh``, processes that generate the samples a few steps ahead (0, the default,
        makes them in this process). Generation costs more than a GPU step; the samples, their
        order and so the weights are the same for any count.
    focus_share, focus : float, str
        With ``fresh``, the share of the draws (easy and full) that are questions of one kind
        (:data:`FOCUS`): ``label`` (the default), lettered or numbered ``synth-public-formats``
        questions, answered with an option's letter or number; ``lookup``, ``synth-public-open``
        questions that name an object and ask one of its attributes (:data:`LOOKUP_FAMILIES`).
        The public tasks share the rest by :data:`TASK_SHARES`; a share of 0 (the default)
        draws as before. The shipped weights learnt neither well (issue #13).
    mark_options : bool
        Also train every option line of a lettered or numbered question to say whether it
        holds the answer (:func:`_mark_options`): the answer's label is then a copy from the
        marked line rather than a look-up and a label step at once.
    checkpoint_every : int
        Steps between checkpoints (0: none). A run that stops (a crash, a kill, a time limit)
        resumes from its last checkpoint when called again with the same arguments, to the
        same bytes as a run that never stopped; the checkpoint sits beside the model folder
        (``.<name>.resume/``) and is removed when the run completes.
    eval_size : int
        Held-out public questions scored before and after (0 skips scoring).
    progress : callable, optional
        ``progress(step, steps, loss)`` after every optimisation step.
    threads : int or None
        torch intra-op threads for the run (restored afterwards); ``None`` keeps the current
        setting. One thread (the default) is the fastest for models this small and fixes the
        order of every floating-point reduction, so the weights do not depend on the core count.
    device : str
        Where the model trains: ``"cpu"`` (default) or a CUDA device (``"cuda"``,
        ``"cuda:1"``). The data, its order and the initial weights are drawn on the CPU, so they
        are the same everywhere; the trained weights are byte-identical only on the same device
        and library versions (the report records both).

    Returns
    -------
    Path
        The model's folder: ``model.safetensors``, ``config.json``, tokenizer files and
        ``pretrain_report.json`` (budget, loss curve, accuracy before/after, weight sha256).
    """
    info = get_info(name)
    if not info.offline:
        raise ValueError(
            f"{name} is a real backbone; `drake models pretrain` trains the tiny models only "
            f"({', '.join(TINY_MODELS)})"
        )
    _check_budget(steps=steps, batch_size=batch_size, train_size=train_size,
                  eval_size=eval_size, seed=seed, sample_workers=sample_workers,
                  checkpoint_every=checkpoint_every)
    _check_threads(threads)
    _check_device(device)
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    _check_focus(focus_share, focus, fresh)
    started = time.perf_counter()
    easy, full = ([], []) if fresh else _train_set(seed, train_size)
    streams = (_FreshStream(seed, _EASY_START, (0, EASY_OBJECTS), focus_share, focus),
               _FreshStream(seed, 0, None, focus_share, focus))
    held_out = _eval_set(seed, eval_size)
    tokenizer = build_tokenizer(synth_vocabulary())
    rng = np.random.default_rng([seed, 0x9E3779B9])
    # with fresh samples nothing else draws from rng, so the counts are drawn up front (and
    # not again from a resumed run's restored generator)
    counts = [_easy_count(rng, step, steps, batch_size) for step in range(steps)] if fresh else []
    losses: list[float] = []
    folder = tiny_folder(info.name, None if out_dir is None else Path(out_dir))
    with _run(threads, seed):
        model = build_tiny_model(info.name, tokenizer, seed=seed)
        vision_path = load_vision(model, out_dir)
        model.to(device)
        model.model.vision_tower.requires_grad_(False)
        bundle = _tiny_bundle(info, model, tokenizer)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
        checkpoint = _Checkpoint(folder, {
            "model": info.name, "seed": seed, "steps": steps, "batch_size": batch_size, "lr": lr,
            "train_size": None if fresh else train_size, "eval_size": eval_size, "fresh": fresh,
            "focus_share": focus_share, "focus": focus, "mark_options": mark_options,
            "device": _device_name(device), "vision_sha256": _sha256(vision_path),
            "torch_threads": torch.get_num_threads(), "versions": _versions()})
        resumed = checkpoint.load(model, optimizer, rng, device)
        first = 0 if resumed is None else resumed["step"]
        model.eval()
        before = evaluate_open(bundle, held_out) if resumed is None else resumed["before"]
        if resumed is not None:
            losses = resumed["losses"]
        pools = [_encoded_pool(bundle, pool, mark_options) for pool in (easy, full)]
        model.train()
        if fresh:
            batches = _fresh_batches(bundle, streams, counts, batch_size, sample_workers,
                                     start=first, marks=mark_options)
        for step in range(first, steps):
            if fresh:
                n_easy, drawn = counts[step], next(batches)
            else:
                n_easy = _easy_count(rng, step, steps, batch_size, mixed=bool(easy))
            for group in optimizer.param_groups:
                group["lr"] = _lr_at(step, steps, lr, warm=200, floor=0.1)
            picks = []
            for k, count in enumerate((n_easy, batch_size - n_easy)):
                if not count:
                    continue
                if fresh:
                    encoded, features = drawn[k][0], _Features(bundle, drawn[k][1])
                    picks.append((encoded, features, np.arange(count)))
                else:
                    encoded, features = pools[k]
                    picks.append((encoded, features, _draw(rng, len(encoded), count)))
            loss = _pool_loss(bundle, picks)
            _optimise(loss, optimizer, params, losses)
            checkpoint.after(step + 1, checkpoint_every, model, optimizer, rng, device,
                             losses=losses, before=before, started=started, progress=progress)
        model.eval()
        after = evaluate_open(bundle, held_out)
    model.requires_grad_(False)
    model.to("cpu")

    with _staged(folder) as staging:
        with quiet_transformers():
            model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        report = {
            "model": info.name,
            "stage": "language",
            "seed": seed,
            "steps": steps,
            "batch_size": batch_size,
            "lr": lr,
            "schedule": "linear warm-up 200 steps, cosine to 10% of lr; AdamW(0.9, 0.98), wd 0, "
                        "clip 1; frozen vision tower",
            "grounding_weight": GROUNDING_WEIGHT,
            "easy_pool": {"objects": [0, EASY_OBJECTS],
                          "samples": streams[0].drawn if fresh else len(easy),
                          "share": f"1 -> 0.1 over the first {EASY_UNTIL:.0%} of the steps"},
            "train_tasks": public_tasks(),
            "train_samples": (streams[0].drawn + streams[1].drawn) if fresh
            else len(easy) + len(full),
            "fresh_samples": fresh,
            "focus": {"share": focus_share, "kind": focus},
            "mark_options": mark_options,
            "resumed_at": checkpoint.resumed_at,
            "eval_split": "test",
            "eval_samples": len(held_out),
            "final_loss": float(np.mean(losses[-50:])),
            "loss_curve": [round(v, 4) for v in losses[:: max(1, steps // 50)]],
            "accuracy_before": before,
            "accuracy_after": after,
            "parameters": int(sum(p.numel() for p in model.parameters())),
            "hidden_size": bundle.hidden_size,
            "num_layers": bundle.num_layers,
            "vision_sha256": _sha256(vision_path),
            "weights_sha256": _sha256(staging / WEIGHTS_FILE),
            "wall_seconds": round(checkpoint.elapsed + time.perf_counter() - started, 2),
            "torch_threads": torch.get_num_threads() if threads is None else threads,
            "device": _device_name(device),
            "versions": _versions(),
            "machine": checkpoint.machine,
        }
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    checkpoint.remove()
    log.info("pretrained %s in %.1fs: loss %.3f, held-out accuracy %s -> %s", info.name,
             report["wall_seconds"], report["final_loss"], before.get("mean"), after.get("mean"))
    return folder


# ------------------------------------------------------------------------------ several models

ManyProgress = Callable[[str, int, int, float], None]
_STAGE2_ARGS = {"out_dir", "steps", "seed", "batch_size", "lr", "train_size", "eval_size",
                "device", "fresh", "sample_workers", "checkpoint_every", "focus_share", "focus",
                "mark_options"}
#: Stages 3 to 6's own arguments (:mod:`drake.models.lookup_pretrain`,
#: :mod:`drake.models.label_pretrain`, :mod:`drake.models.relation_pretrain`,
#: :mod:`drake.models.picture_pretrain`); they share ``out_dir``, ``seed``, ``batch_size``,
#: ``eval_size``, ``device`` and ``checkpoint_every`` (and all but stage 4 ``lr``).
_LOOKUP_ARGS = {"lookup_steps", "lookup_share", "label_steps", "label_share", "label_lr",
                "label_value_weight", "relation_steps", "relation_share", "picture_steps",
                "picture_share"}
_LOOKUP_SHARED = ("out_dir", "seed", "batch_size", "lr", "eval_size", "device", "checkpoint_every")
_VISION_ARGS = {"vision_steps": "steps", "vision_batch_size": "batch_size", "vision_lr": "lr",
                "vision_pictures": "pictures", "vision_eval_pictures": "eval_pictures"}


def pretrain_many(
    names: Sequence[str],
    *,
    workers: int | None = None,
    progress: ManyProgress | None = None,
    vision: bool = True,
    language: bool = True,
    **kwargs: Any,
) -> dict[str, Path]:
    """The stages: the vision tower (unless ``vision=False`` reuses the cached one), then the
    language stage of several tiny models (unless ``language=False`` starts from their cached
    or shipped weights) and their look-up, label, relation and picture stages
    (``lookup_steps``, ``label_steps``, ``relation_steps``, ``picture_steps`` > 0), in parallel
    worker processes when cores allow.

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
        ``progress(name, step, steps, loss)``, called in this process; stage 1 reports under
        the name ``"tiny-vision"``.
    vision : bool
        Run stage 1 first (default). ``False`` needs a tower from an earlier run in the cache.
    **kwargs
        ``out_dir``, ``seed``, ``device`` (both stages); ``steps``, ``batch_size``, ``lr``,
        ``train_size``, ``eval_size``, ``fresh``, ``focus_share``, ``focus``,
        ``mark_options`` (stage 2); ``vision_steps``, ``vision_batch_size``,
        ``vision_lr``, ``vision_pictures``, ``vision_eval_pictures`` (stage 1);
        ``lookup_steps`` (default :data:`DEFAULT_LOOKUP_STEPS`; 0: none), ``lookup_share``
        (stage 3, which also takes stage 2's ``batch_size``, ``lr``, ``eval_size`` and
        ``checkpoint_every``); ``label_steps`` (default: :func:`label_steps_after`; 0: none),
        ``label_share``, ``label_lr``, ``label_value_weight`` (stage 4, which takes the same
        but ``lr``); ``relation_steps`` (default 0: none), ``relation_share`` (stage 5, which
        takes what stage 3 takes); ``picture_steps`` (default 0: none), ``picture_share``
        (stage 6, likewise). A model's ``progress`` counts stage 2's steps, then the later stages' after them.

    Returns
    -------
    dict
        Model name -> its cache folder (and ``"tiny-vision"`` -> the tower's, when trained).

    Raises
    ------
    RuntimeError
        When a worker fails; the message carries the end of its error output.
    """
    names = list(dict.fromkeys(names))
    for name in names:
        if not get_info(name).offline:
            raise ValueError(f"{name} is not a tiny model; pretrain one of {', '.join(TINY_MODELS)}")
    unknown = sorted(set(kwargs) - _STAGE2_ARGS - set(_VISION_ARGS) - _LOOKUP_ARGS)
    if unknown:
        raise TypeError(f"pretrain_many got unexpected argument(s) {unknown}")
    _check_device(kwargs.get("device") or "cpu")
    stage2 = {k: v for k, v in kwargs.items() if k in _STAGE2_ARGS and v is not None}
    stages = {"language": language, **{k: v for k, v in kwargs.items()
                                        if k in _LOOKUP_ARGS and v is not None}}
    if not (language or stages.get("lookup_steps", DEFAULT_LOOKUP_STEPS)
            or stages.get("label_steps") or stages.get("relation_steps")
            or stages.get("picture_steps")):
        raise ValueError("language=False trains nothing without lookup_steps, label_steps, "
                         "relation_steps or picture_steps > 0")
    results: dict[str, Path] = {}
    if vision:
        stage1 = {_VISION_ARGS[k]: v for k, v in kwargs.items() if k in _VISION_ARGS
                  and v is not None}
        for shared in ("out_dir", "seed", "device", "checkpoint_every"):
            if shared in stage2:
                stage1[shared] = stage2[shared]
        results[VISION_FOLDER] = pretrain_vision(
            progress=None if progress is None else
            (lambda s, t, v: progress(VISION_FOLDER, s, t, v)), **stage1)
    if workers is None:
        workers = min(len(names), os.cpu_count() or 1)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1 or len(names) == 1:
        for name in names:
            results[name] = train_family(
                name, progress=(None if progress is None else
                                (lambda s, t, v, n=name: progress(n, s, t, v))),
                **stages, **stage2)
        return results
    pending = list(names)
    while pending:
        batch, pending = pending[:workers], pending[workers:]
        results.update(_run_workers(batch, {**stages, **stage2}, progress))
    return results


def label_steps_after(label_steps: int | None, lookup_steps: int) -> int:
    """Stage 4's steps: ``label_steps`` when given, else :data:`DEFAULT_LABEL_STEPS` when stage
    3 runs in the same call and none when it does not (so ``lookup_steps=0`` still stops after
    stage 2, and stage 4 alone takes its steps by name)."""
    if label_steps is not None:
        return label_steps
    return DEFAULT_LABEL_STEPS if lookup_steps else 0


def train_family(name: str, *, progress: Progress | None = None, language: bool = True,
                 lookup_steps: int = DEFAULT_LOOKUP_STEPS, lookup_share: float | None = None,
                 label_steps: int | None = None, label_share: float | None = None,
                 label_lr: float | None = None, label_value_weight: float | None = None,
                 relation_steps: int = 0,
                 relation_share: float | None = None, picture_steps: int = 0,
                 picture_share: float | None = None, **stage2: Any) -> Path:
    """One tiny family's stage 2 (:func:`pretrain`, unless ``language=False``), then its look-up
    stage when ``lookup_steps`` > 0 (:func:`drake.models.lookup_pretrain.pretrain_lookup`), its
    label stage when ``label_steps`` > 0 (:func:`drake.models.label_pretrain.pretrain_label`,
    at its own learning rate unless ``label_lr``, with ``label_value_weight`` as its
    ``value_weight``), its relation stage when ``relation_steps`` > 0
    (:func:`drake.models.relation_pretrain.pretrain_relation`) and its picture stage when
    ``picture_steps`` > 0 (:func:`drake.models.picture_pretrain.pretrain_picture`).
    ``progress`` counts each stage's steps after the ones before, out of all the stages'
    steps. ``label_steps=None`` is :func:`label_steps_after` ``lookup_steps``: stage 4 follows
    stage 3 by default."""
    label_steps = label_steps_after(label_steps, lookup_steps)
    if not (language or lookup_steps or label_steps or relation_steps or picture_steps):
        raise ValueError(f"{name}: language=False trains nothing without lookup_steps, "
                         "label_steps, relation_steps or picture_steps > 0")
    done = stage2.get("steps", DEFAULT_STEPS) if language else 0
    total = done + lookup_steps + label_steps + relation_steps + picture_steps

    def after(skip: int) -> Progress | None:
        return None if progress is None else (lambda s, t, v: progress(skip + s, total, v))

    folder = pretrain(name, progress=after(0), **stage2) if language else None
    shared = {k: stage2[k] for k in _LOOKUP_SHARED if k in stage2}

    if lookup_steps:
        from drake.models.lookup_pretrain import pretrain_lookup

        extra = {} if lookup_share is None else {"share": lookup_share}
        folder = pretrain_lookup(name, steps=lookup_steps, **shared, **extra,
                                 progress=after(done))
        done += lookup_steps
    if label_steps:
        from drake.models.label_pretrain import pretrain_label

        extra = {k: v for k, v in (("share", label_share), ("lr", label_lr),
                                   ("value_weight", label_value_weight)) if v is not None}
        own = {k: v for k, v in shared.items() if k != "lr"}  # the label stage has its own
        folder = pretrain_label(name, steps=label_steps, **own, **extra, progress=after(done))
        done += label_steps
    if relation_steps:
        from drake.models.relation_pretrain import pretrain_relation

        extra = {} if relation_share is None else {"share": relation_share}
        folder = pretrain_relation(name, steps=relation_steps, **shared, **extra,
                                   progress=after(done))
        done += relation_steps
    if picture_steps:
        from drake.models.picture_pretrain import pretrain_picture

        extra = {} if picture_share is None else {"share": picture_share}
        folder = pretrain_picture(name, steps=picture_steps, **shared, **extra,
                                  progress=after(done))
    return folder


def _run_workers(names: Sequence[str], kwargs: dict[str, Any],
                 progress: ManyProgress | None) -> dict[str, Path]:
    args = {k: (str(v) if isinstance(v, Path) else v) for k, v in kwargs.items()}
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
