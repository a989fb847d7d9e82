"""``drake models list`` and ``drake models pretrain``.

``drake``'s argparse CLI wires them in with :func:`add_cli`; each handler returns the exit code
and library errors reach the top-level CLI, which prints them as one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from drake.models.zoo import CLIP_ZOO, TAP_ZOO, TINY_MODELS, ZOO, ModelInfo, cache_dir

#: Why rebuilt weights can differ from the shipped ones (the report's ``machine`` and
#: ``versions`` say where and with what they were made).
_DIFFERS = ("other arguments or seed, other library versions, or another CPU type: float "
            "kernels differ between CPU types")

__all__ = ["add_cli", "cmd_models_list", "cmd_models_pretrain"]


def cmd_models_list(args: argparse.Namespace) -> int:
    """Print the zoo as a table, with the pretrained state of the tiny models."""
    from rich.console import Console
    from rich.table import Table


    root = Path(args.cache_dir) if args.cache_dir else cache_dir()
    table = Table("name", "Hugging Face id", "family", "params", "size rank", "LoRA r/alpha",
                  "offline", title=f"DRAKE model zoo (tiny-model cache: {root})")
    for info in ZOO.values():
        table.add_row(info.name, info.hf_id or "-", info.family, info.params,
                      str(info.size_rank), _lora_column(info),
                      _offline(info, root, args.cache_dir, "pretrained in the cache"))
    for info in CLIP_ZOO.values():  # the classification protocols' kind
        table.add_row(info.name, info.hf_id or "-", "clip (classifier)", info.params,
                      str(info.size_rank), _lora_column(info),
                      _offline(info, root, args.cache_dir, "pretrained in the cache"))
    for info in TAP_ZOO.values():  # TAP's multi-task, multi-modal model (its LoRA is TAP's)
        table.add_row(info.name, info.hf_id or "-", f"{info.family} (TAP's model)", info.params,
                      str(info.size_rank), "TAP's",
                      _offline(info, root, args.cache_dir, "pretrained in the cache"))
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table to 80 columns
        console = Console(width=200)
    console.print(table)
    return 0


def _offline(info: ModelInfo, root: Path, explicit: str | None, cached: str) -> str:
    """The "offline" column: a Hub model, or where a tiny model's pretrained weights come from
    (the cache ``root``, the package unless a cache was named, or the command that makes them)."""
    from drake.models.loading import WEIGHTS_FILE, tiny_folder
    from drake.models.shipped import shipped_folder

    if not info.offline:
        return "no (Hub)"
    if (tiny_folder(info.name, root) / WEIGHTS_FILE).is_file():
        return f"yes ({cached})"
    if shipped_folder(info.name) is not None and not explicit:
        return "yes (pretrained, shipped)"
    model = f" --model {info.name}" if info.kind in ("clip", "tap") else ""
    return f"yes (run `drake models pretrain{model}`)"


def _lora_column(info: ModelInfo) -> str:
    """``r/alpha``, alpha to three significant digits (CLIP's is sqrt(2))."""
    return f"{info.lora_defaults['r']}/{info.lora_defaults['alpha']:.3g}"


def _advance(bar: Any, name: str, step: int, loss: float) -> None:
    """Move a pretraining progress ``bar`` to ``step``. Where tqdm turned it off (stderr is not
    a terminal, as in a log file), write a plain line each time a twentieth of the run is done
    instead, so a long run's log still shows where it is."""
    if not bar.disable:
        bar.update(step - bar.n)
        bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        return
    total = bar.total or step
    if step * 20 // total > bar.n * 20 // total or step == total:
        sys.stderr.write(f"{name}: step {step}/{total}, loss {loss:.3f}\n")
        sys.stderr.flush()
    bar.n = step


def cmd_models_pretrain(args: argparse.Namespace) -> int:
    """Pretrain the shared vision tower, then one tiny model or both (in parallel), and print
    each one's held-out public accuracy."""
    from tqdm.auto import tqdm

    from drake.errors import UnknownNameError
    from drake.models.clip_pretrain import CLIP_FOLDER
    from drake.models.label_pretrain import LABEL_STAGE
    from drake.models.lookup_pretrain import LOOKUP_STAGE
    from drake.models.picture_pretrain import PICTURE_STAGE
    from drake.models.pretrain import (
        DEFAULT_LABEL_STEPS,
        REPORT_FILE,
        VISION_FOLDER,
        label_steps_after,
        pretrain_many,
    )
    from drake.models.relation_pretrain import RELATION_STAGE
    from drake.models.shipped import SHIPPED_SHA256
    from drake.models.tap_pretrain import TAP_PRETRAIN_MODELS

    everything = (*TINY_MODELS, CLIP_FOLDER, *TAP_PRETRAIN_MODELS)
    names = list(everything) if args.model == "all" else [args.model]
    for name in names:
        if name not in everything:
            raise UnknownNameError(
                f"--model {name!r} is not a tiny model; choose one of "
                f"{', '.join(everything)} or all (real backbones come pretrained)"
            )
    onlys = [flag for flag, given in (("--lookup-only", args.lookup_only),
                                      ("--label-only", args.label_only),
                                      ("--relation-only", args.relation_only),
                                      ("--picture-only", args.picture_only)) if given]
    if len(onlys) > 1:
        raise ValueError(f"{' and '.join(onlys)} each skip the stages before theirs: give one "
                         "(--lookup-only runs stages 3 and 4 and the later stages given steps)")
    only = onlys[0] if onlys else None
    if only:  # stages 3 to 6 are the tiny LLaVA families' alone
        others = [n for n in names if n not in TINY_MODELS]
        if args.model != "all" and others:
            raise ValueError(f"{only} trains {' or '.join(TINY_MODELS)}, not {others[0]}")
        names = [n for n in names if n in TINY_MODELS]
    root = Path(args.cache_dir) if args.cache_dir else None
    for name in [n for n in names if n in TAP_PRETRAIN_MODELS]:
        _pretrain_tap(args, root, name)
    clip = CLIP_FOLDER in names
    names = [n for n in names if n in TINY_MODELS]
    if not names:  # tiny-clip or the TAP backbones alone
        return _pretrain_clip(args, root) if clip else 0
    if args.lookup_only and not args.lookup_steps:
        raise ValueError("--lookup-only runs the look-up stage alone: give it --lookup-steps > 0")
    if args.label_only and args.label_steps == 0:
        raise ValueError("--label-only runs the label stage alone: give it --label-steps > 0")
    if args.relation_only and not args.relation_steps:
        raise ValueError("--relation-only runs the relation stage alone: give it "
                         "--relation-steps > 0")
    if args.picture_only and not args.picture_steps:
        raise ValueError("--picture-only runs the picture stage alone: give it "
                         "--picture-steps > 0")
    alone = {"--label-only": "label", "--relation-only": "relation", "--picture-only": "picture"}
    runs = {stage: only in (None, "--lookup-only") or alone[only] == stage
            for stage in ("label", "relation", "picture")}
    lookup_steps = args.lookup_steps if only in (None, "--lookup-only") else 0
    label_steps = 0
    if args.label_only:  # stage 4 alone, at its default steps unless named
        label_steps = DEFAULT_LABEL_STEPS if args.label_steps is None else args.label_steps
    elif runs["label"]:  # unnamed, stage 4 follows stage 3
        label_steps = label_steps_after(args.label_steps, lookup_steps)
    relation_steps = args.relation_steps if runs["relation"] else 0
    picture_steps = args.picture_steps if runs["picture"] else 0
    totals = {name: (0 if only else args.steps) + lookup_steps + label_steps + relation_steps
              + picture_steps for name in names}
    if not (args.reuse_vision or only):
        totals = {VISION_FOLDER: args.vision_steps, **totals}
    bars = {name: tqdm(total=total, desc=f"pretraining {name}", unit="step", file=sys.stderr,
                       position=i, disable=None)
            for i, (name, total) in enumerate(totals.items())}

    def update(name: str, step: int, total: int, loss: float) -> None:
        _advance(bars[name], name, step, loss)

    try:
        folders = pretrain_many(names, workers=args.workers, progress=update, out_dir=root,
                                vision=not (args.reuse_vision or only), language=not only,
                                lookup_steps=lookup_steps, lookup_share=args.lookup_share,
                                label_steps=label_steps, label_share=args.label_share,
                                label_lr=args.label_lr,
                                label_value_weight=args.label_value_weight,
                                relation_steps=relation_steps,
                                relation_share=args.relation_share,
                                picture_steps=picture_steps, picture_share=args.picture_share,
                                steps=args.steps, seed=args.seed,
                                batch_size=args.batch_size, lr=args.lr,
                                train_size=args.train_size, eval_size=args.eval_size,
                                fresh=args.fresh_samples, sample_workers=args.sample_workers,
                                checkpoint_every=args.checkpoint_every,
                                focus_share=args.focus_share, focus=args.focus,
                                mark_options=args.mark_options,
                                vision_steps=args.vision_steps,
                                vision_pictures=args.vision_pictures, device=args.device)
    finally:
        for bar in bars.values():
            bar.close()
    for name, folder in folders.items():
        report = json.loads((folder / REPORT_FILE).read_text())
        line = (f"{name}: {report['steps']} steps in {report['wall_seconds']:.0f}s, "
                f"final loss {report['final_loss']:.3f}")
        resumed = [str(part["step"]) for part in report.get("resumed_at", [])]
        if resumed:
            line += f" (resumed at step {', '.join(resumed)})"
        if name == VISION_FOLDER:
            seen = report["held_out_accuracy"]
            line += "; held-out accuracy " + ", ".join(f"{k} {v:.2f}" for k, v in seen.items())
        else:
            line += _held_out(report)
            for key, title in ((LOOKUP_STAGE, "look-up"), (LABEL_STAGE, "label"),
                               (RELATION_STAGE, "relation"), (PICTURE_STAGE, "picture")):
                stage = report.get(key)
                if stage is None:
                    continue
                line += (f"; then the {title} stage: {stage['steps']} steps in "
                         f"{stage['wall_seconds']:.0f}s, final loss {stage['final_loss']:.3f}")
                resumed = [str(part["step"]) for part in stage["resumed_at"]]
                if resumed:
                    line += f" (resumed at step {', '.join(resumed)})"
                line += _held_out(stage)
            pinned = SHIPPED_SHA256.get(name)
            if pinned is not None:
                same = report["weights_sha256"] == pinned
                line += ("; identical to the shipped weights" if same else
                         f"; differs from the shipped weights ({_DIFFERS})")
        sys.stdout.write(line + f"\n  saved to {folder}\n")
    return _pretrain_clip(args, root) if clip else 0


def _held_out(report: dict[str, Any]) -> str:
    """A stage's held-out public accuracy before -> after, when it scored any."""
    if not report["accuracy_after"]:
        return ""
    return (f"; held-out public accuracy (exact match, mean over families) "
            f"{report['accuracy_before']['mean']:.2f} -> {report['accuracy_after']['mean']:.2f}")


def _pretrain_tap(args: argparse.Namespace, root: Path | None, name: str) -> None:
    """One tiny TAP backbone (:mod:`drake.models.tap_pretrain`), with its report line."""
    from tqdm.auto import tqdm

    from drake.models.pretrain import REPORT_FILE
    from drake.models.shipped import SHIPPED_SHA256
    from drake.models.tap_pretrain import pretrain_tap

    bar = tqdm(total=args.tap_steps, desc=f"pretraining {name}", unit="step", file=sys.stderr,
               disable=None)

    def update(step: int, total: int, loss: float) -> None:
        _advance(bar, name, step, loss)

    try:
        folder = pretrain_tap(name, out_dir=root, seed=args.seed, steps=args.tap_steps,
                              progress=update)
    finally:
        bar.close()
    report = json.loads((folder / REPORT_FILE).read_text())
    before, after = report["held_out_before"], report["held_out_after"]
    same = report["weights_sha256"] == SHIPPED_SHA256.get(name)
    sys.stdout.write(
        f"{name}: {report['steps']} steps ({report['objective']}) in "
        f"{report['wall_seconds']:.0f}s, final loss {report['final_loss']:.3f}; held-out "
        f"masked answer words {before.get('answer_accuracy', 0):.2f} -> "
        f"{after.get('answer_accuracy', 0):.2f}; "
        + ("identical to the shipped weights" if same else
           f"differs from the shipped weights ({_DIFFERS})") + f"\n  saved to {folder}\n")


def _pretrain_clip(args: argparse.Namespace, root: Path | None) -> int:
    """tiny-clip (:mod:`drake.models.clip_pretrain`), with its report line."""
    from tqdm.auto import tqdm

    from drake.models.clip_pretrain import CLIP_FOLDER, pretrain_clip
    from drake.models.pretrain import REPORT_FILE
    from drake.models.shipped import SHIPPED_SHA256

    bar = tqdm(total=args.clip_tower_steps + args.clip_steps, desc=f"pretraining {CLIP_FOLDER}",
               unit="step", file=sys.stderr, disable=None)

    def update(step: int, total: int, loss: float) -> None:
        _advance(bar, CLIP_FOLDER, step, loss)

    try:
        folder = pretrain_clip(out_dir=root, seed=args.seed, steps=args.clip_steps,
                               tower_steps=args.clip_tower_steps,
                               pictures=args.clip_pictures, objective=args.clip_objective,
                               progress=update)
    finally:
        bar.close()
    report = json.loads((folder / REPORT_FILE).read_text())
    same = report["weights_sha256"] == SHIPPED_SHA256[CLIP_FOLDER]
    sys.stdout.write(
        f"{CLIP_FOLDER}: {report['tower_steps']} tower + {report['steps']} text steps in "
        f"{report['wall_seconds']:.0f}s, final loss {report['final_loss']:.3f}; held-out "
        f"zero-shot accuracy over {report['classes']} classes "
        f"{report['held_out_accuracy_before']:.2f} -> {report['held_out_accuracy']:.2f}"
        + (f" (a fully aligned text side: {report['tower_held_out_accuracy']:.2f})"
           if report["tower_held_out_accuracy"] is not None else "")
        + f" ({report['objective']} objective); "
        + ("identical to the shipped weights" if same else
           f"differs from the shipped weights ({_DIFFERS})") + f"\n  saved to {folder}\n")
    return 0


def add_cli(subparsers: Any) -> None:
    """Add ``models list`` and ``models pretrain`` to an argparse subparsers object.

    Handlers are stored as ``func`` (``args.func(args) -> int``).
    """
    from drake.models.clip_pretrain import (
        CLIP_OBJECTIVES,
        DEFAULT_CLIP_PICTURES,
        DEFAULT_CLIP_STEPS,
        DEFAULT_CLIP_TOWER_STEPS,
    )
    from drake.models.label_pretrain import (
        DEFAULT_LABEL_LR,
        DEFAULT_LABEL_SHARE,
        DEFAULT_VALUE_WEIGHT,
    )
    from drake.models.lookup_pretrain import DEFAULT_LOOKUP_SHARE, DEFAULT_LOOKUP_STEPS
    from drake.models.picture_pretrain import DEFAULT_PICTURE_SHARE, DEFAULT_PICTURE_STEPS
    from drake.models.pretrain import (
        DEFAULT_BATCH_SIZE,
        DEFAULT_CHECKPOINT_EVERY,
        DEFAULT_EVAL_SIZE,
        DEFAULT_LABEL_STEPS,
        DEFAULT_LR,
        DEFAULT_STEPS,
        DEFAULT_TRAIN_SIZE,
        DEFAULT_VISION_PICTURES,
        DEFAULT_VISION_STEPS,
        FOCUS,
    )
    from drake.models.relation_pretrain import DEFAULT_RELATION_SHARE, DEFAULT_RELATION_STEPS
    from drake.models.tap_pretrain import DEFAULT_TAP_STEPS

    parser = subparsers.add_parser("models", help="list the model zoo; pretrain the tiny models")
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="the named backbones, their Hub ids and LoRA defaults")
    p.add_argument("--cache-dir", default=None,
                   help="tiny-model cache to inspect (default $DRAKE_CACHE/models or "
                   "~/.cache/drake/models)")
    p.set_defaults(func=cmd_models_list)

    p = sub.add_parser("pretrain", help="train the tiny models on drake-synth's public split "
                       "and tiny-clip on synth-cls-style pictures, and cache them (offline; about "
                       "two and three quarter hours on two CPU cores, tiny-clip alone about six "
                       "and a half minutes; the suite ships their result)")
    p.add_argument("--model", default="all",
                   help=f"{', '.join(TINY_MODELS)}, tiny-clip, tiny-tap or tiny-tap-vilt, or "
                   "all (default)")
    p.add_argument("--tap-steps", type=int, default=DEFAULT_TAP_STEPS,
                   help="tiny-tap / tiny-tap-vilt: steps of their backbone's own pretraining "
                   f"objectives (default {DEFAULT_TAP_STEPS}; about 4 and 3 minutes)")
    p.add_argument("--clip-tower-steps", type=int, default=DEFAULT_CLIP_TOWER_STEPS,
                   help="tiny-clip stage 1: steps of the image tower's last stage with the text "
                   f"side (default {DEFAULT_CLIP_TOWER_STEPS}; 0 keeps the shipped tower whole)")
    p.add_argument("--clip-steps", type=int, default=DEFAULT_CLIP_STEPS,
                   help="tiny-clip stage 2: steps of the fresh text side on the trained tower "
                   f"(default {DEFAULT_CLIP_STEPS}; it sets the zero-shot accuracy)")
    p.add_argument("--clip-pictures", type=int, default=DEFAULT_CLIP_PICTURES,
                   help=f"tiny-clip training pictures (default {DEFAULT_CLIP_PICTURES})")
    p.add_argument("--clip-objective", choices=CLIP_OBJECTIVES, default="captions",
                   help="tiny-clip's text side trained CLIP-style on varied captions, in-batch "
                   "(captions: the default and the shipped weights) or on the 192 class "
                   "prompts (classes: leaves prompt learning nothing to learn)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                   help=f"language-stage steps per model (default {DEFAULT_STEPS})")
    p.add_argument("--vision-steps", type=int, default=DEFAULT_VISION_STEPS,
                   help=f"vision-tower steps (stage 1, default {DEFAULT_VISION_STEPS})")
    p.add_argument("--vision-pictures", type=int, default=DEFAULT_VISION_PICTURES,
                   help=f"public pictures stage 1 trains on (default {DEFAULT_VISION_PICTURES})")
    p.add_argument("--reuse-vision", action="store_true",
                   help="skip stage 1 and reuse the vision tower of an earlier run in the cache")
    p.add_argument("--seed", type=int, default=0, help="seed of data, init and order (default 0)")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                   help=f"samples per step (default {DEFAULT_BATCH_SIZE})")
    p.add_argument("--lr", type=float, default=DEFAULT_LR,
                   help=f"peak AdamW learning rate (default {DEFAULT_LR})")
    p.add_argument("--train-size", type=int, default=DEFAULT_TRAIN_SIZE,
                   help=f"public training samples in all (default {DEFAULT_TRAIN_SIZE})")
    p.add_argument("--fresh-samples", action="store_true",
                   help="language stage: a new public sample at every draw (steps x batch in "
                   "all, none seen twice) instead of --train-size samples drawn again and again, "
                   "which the tiny models learn by heart; about 50%% slower on the CPU")
    p.add_argument("--sample-workers", type=int, default=0,
                   help="with --fresh-samples: processes per model that make the samples a few "
                   "steps ahead (default 0: in the training process; on a GPU, making them costs "
                   "more than the step); the weights do not depend on it")
    p.add_argument("--focus-share", type=float, default=0.0,
                   help="with --fresh-samples: share of the draws that are --focus questions "
                   "(default 0)")
    p.add_argument("--focus", choices=tuple(FOCUS), default="label",
                   help="what --focus-share draws: label, lettered or numbered public questions "
                   "answered with the option's letter or number (default); lookup, questions "
                   "that name an object and ask one of its attributes (issue #13)")
    p.add_argument("--mark-options", action="store_true",
                   help="language stage: also train the end of every option line of a lettered "
                   "or numbered question to say Yes when it holds the answer and No otherwise")
    p.add_argument("--lookup-steps", type=int, default=DEFAULT_LOOKUP_STEPS,
                   help="stage 3, after the language stage: steps that teach the tiny LLaVA "
                   "families to look a named object up, attention supervised (default "
                   f"{DEFAULT_LOOKUP_STEPS}; 0 skips it)")
    p.add_argument("--lookup-share", type=float, default=DEFAULT_LOOKUP_SHARE,
                   help="stage 3: share of its samples that are look-up questions (default "
                   f"{DEFAULT_LOOKUP_SHARE})")
    p.add_argument("--lookup-only", action="store_true",
                   help="skip stages 1 and 2: run stage 3 on the stage-2 weights in the cache "
                   "(or the shipped ones when no --cache-dir is named and the cache has none), "
                   "then stage 4 (unless --label-steps 0) and the later stages asked for "
                   "(--relation-steps, --picture-steps)")
    p.add_argument("--label-steps", type=int, default=None,
                   help="stage 4, after stage 3: steps that teach the tiny LLaVA families to "
                   "answer a lettered or numbered question with its option's label, attention "
                   f"and head outputs supervised (default {DEFAULT_LABEL_STEPS}, as the shipped "
                   "weights, when stage 3 runs or with --label-only, else 0; 0 skips it)")
    p.add_argument("--label-share", type=float, default=DEFAULT_LABEL_SHARE,
                   help="stage 4: share of its samples that are lettered, numbered or verdict "
                   f"look-up questions (default {DEFAULT_LABEL_SHARE})")
    p.add_argument("--label-lr", type=float, default=DEFAULT_LABEL_LR,
                   help=f"stage 4: its learning rate (default {DEFAULT_LABEL_LR})")
    p.add_argument("--label-value-weight", type=float, default=DEFAULT_VALUE_WEIGHT,
                   help="stage 4: weight of the value read-out, the first look-up head naming "
                   "the gold option's first word at the answer position (default "
                   f"{DEFAULT_VALUE_WEIGHT}; 0 leaves it out, and the colour and shape label "
                   "answers stay at chance: the dataset card)")
    p.add_argument("--label-only", action="store_true",
                   help="run stage 4 alone, on the stage-3 weights in the cache (the shipped "
                   "weights have been through it)")
    p.add_argument("--relation-steps", type=int, default=0,
                   help="stage 5, after stage 3 (and 4): steps on fresh public questions that "
                   "compare pictures or relate objects, with stage 3's losses (default 0: "
                   f"skipped; {DEFAULT_RELATION_STEPS} is the measured budget; the shipped "
                   "weights have not been through it)")
    p.add_argument("--relation-share", type=float, default=DEFAULT_RELATION_SHARE,
                   help="stage 5: share of its samples that are those questions (default "
                   f"{DEFAULT_RELATION_SHARE})")
    p.add_argument("--relation-only", action="store_true",
                   help="run stage 5 alone, on the stage-3 weights in the cache (or the shipped "
                   "ones when no --cache-dir is named and the cache has none)")
    p.add_argument("--picture-steps", type=int, default=0,
                   help="stage 6, after stage 3 (and 4, 5): steps on questions about one of "
                   "several pictures, its background or look, with the pointer on that picture, "
                   "and relation questions (default 0: skipped; "
                   f"{DEFAULT_PICTURE_STEPS} is the measured budget; the shipped weights have "
                   "not been through it)")
    p.add_argument("--picture-share", type=float, default=DEFAULT_PICTURE_SHARE,
                   help="stage 6: share of its samples that are those questions (default "
                   f"{DEFAULT_PICTURE_SHARE})")
    p.add_argument("--picture-only", action="store_true",
                   help="run stage 6 alone, on the stage-3 weights in the cache (or the shipped "
                   "ones when no --cache-dir is named and the cache has none)")
    p.add_argument("--checkpoint-every", type=int, default=DEFAULT_CHECKPOINT_EVERY,
                   help="every stage: steps between checkpoints (default "
                   f"{DEFAULT_CHECKPOINT_EVERY}; 0: none); a stopped run resumes from its last "
                   "one when rerun with the same arguments, to the same bytes")
    p.add_argument("--eval-size", type=int, default=DEFAULT_EVAL_SIZE,
                   help="held-out public questions scored before/after "
                   f"(default {DEFAULT_EVAL_SIZE}; 0 skips)")
    p.add_argument("--workers", type=int, default=None,
                   help="models trained in parallel processes, one core each (default: all "
                   "at once, up to the CPU count)")
    p.add_argument("--device", default="cpu",
                   help="where the tiny LLaVA families train: cpu (default) or cuda; the same "
                   "data and initial weights everywhere, the report records the device "
                   "(tiny-clip trains on the CPU)")
    p.add_argument("--cache-dir", default=None,
                   help="model cache root (default $DRAKE_CACHE/models or ~/.cache/drake/models)")
    p.set_defaults(func=cmd_models_pretrain)
