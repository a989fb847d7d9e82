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

from drake.models.zoo import TINY_MODELS, ZOO, cache_dir

__all__ = ["add_cli", "cmd_models_list", "cmd_models_pretrain"]


def cmd_models_list(args: argparse.Namespace) -> int:
    """Print the zoo as a table, with the pretrained state of the tiny models."""
    from rich.console import Console
    from rich.table import Table

    from drake.models.loading import WEIGHTS_FILE, tiny_folder

    root = Path(args.cache_dir) if args.cache_dir else cache_dir()
    table = Table("name", "Hugging Face id", "family", "params", "size rank", "LoRA r/alpha",
                  "offline", title=f"DRAKE model zoo (tiny-model cache: {root})")
    for info in ZOO.values():
        lora = f"{info.lora_defaults['r']}/{info.lora_defaults['alpha']}"
        if info.offline:
            ready = (tiny_folder(info.name, root) / WEIGHTS_FILE).is_file()
            offline = "yes (pretrained)" if ready else "yes (run `drake models pretrain`)"
        else:
            offline = "no (Hub)"
        table.add_row(info.name, info.hf_id or "-", info.family, info.params,
                      str(info.size_rank), lora, offline)
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table to 80 columns
        console = Console(width=200)
    console.print(table)
    return 0


def cmd_models_pretrain(args: argparse.Namespace) -> int:
    """Pretrain one tiny model, or both (in parallel), and print each one's held-out accuracy."""
    from tqdm.auto import tqdm

    from drake.errors import UnknownNameError
    from drake.models.pretrain import REPORT_FILE, pretrain_many

    names = list(TINY_MODELS) if args.model == "all" else [args.model]
    for name in names:
        if name not in TINY_MODELS:
            raise UnknownNameError(
                f"--model {name!r} is not a tiny model; choose one of "
                f"{', '.join(TINY_MODELS)} or all (real backbones come pretrained)"
            )
    root = Path(args.cache_dir) if args.cache_dir else None
    bars = {name: tqdm(total=args.steps, desc=f"pretraining {name}", unit="step",
                       file=sys.stderr, position=i, disable=None)
            for i, name in enumerate(names)}

    def update(name: str, step: int, total: int, loss: float) -> None:
        bar = bars[name]
        bar.update(step - bar.n)
        bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

    try:
        folders = pretrain_many(names, workers=args.workers, progress=update, out_dir=root,
                                steps=args.steps, seed=args.seed, batch_size=args.batch_size,
                                lr=args.lr, train_size=args.train_size,
                                eval_size=args.eval_size)
    finally:
        for bar in bars.values():
            bar.close()
    for name, folder in folders.items():
        report = json.loads((folder / REPORT_FILE).read_text())
        before, after = report["accuracy_before"], report["accuracy_after"]
        line = (f"{name}: {report['steps']} steps in {report['wall_seconds']:.0f}s, "
                f"final loss {report['final_loss']:.3f}")
        if after:
            line += (f"; held-out public MC accuracy (chance {after['chance']:.2f}): "
                     f"generation {before['generation_match']:.2f} -> "
                     f"{after['generation_match']:.2f}, loglik {before['loglik']:.2f} -> "
                     f"{after['loglik']:.2f}")
        sys.stdout.write(line + f"\n  saved to {folder}\n")
    return 0


def add_cli(subparsers: Any) -> None:
    """Add ``models list`` and ``models pretrain`` to an argparse subparsers object.

    Handlers are stored as ``func`` (``args.func(args) -> int``).
    """
    from drake.models.pretrain import (
        DEFAULT_BATCH_SIZE,
        DEFAULT_EVAL_SIZE,
        DEFAULT_LR,
        DEFAULT_STEPS,
        DEFAULT_TRAIN_SIZE,
    )

    parser = subparsers.add_parser("models", help="list the model zoo; pretrain the tiny models")
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="the named backbones, their Hub ids and LoRA defaults")
    p.add_argument("--cache-dir", default=None,
                   help="tiny-model cache to inspect (default $DRAKE_CACHE/models or "
                   "~/.cache/drake/models)")
    p.set_defaults(func=cmd_models_list)

    p = sub.add_parser("pretrain", help="train the tiny models on drake-synth's public split "
                       "and cache them (offline, minutes on a CPU)")
    p.add_argument("--model", default="all",
                   help=f"{' or '.join(TINY_MODELS)}, or all (default)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                   help=f"optimisation steps per model (default {DEFAULT_STEPS})")
    p.add_argument("--seed", type=int, default=0, help="seed of data, init and order (default 0)")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                   help=f"samples per step (default {DEFAULT_BATCH_SIZE})")
    p.add_argument("--lr", type=float, default=DEFAULT_LR,
                   help=f"peak AdamW learning rate (default {DEFAULT_LR})")
    p.add_argument("--train-size", type=int, default=DEFAULT_TRAIN_SIZE,
                   help=f"public samples per public task (default {DEFAULT_TRAIN_SIZE})")
    p.add_argument("--eval-size", type=int, default=DEFAULT_EVAL_SIZE,
                   help="held-out public multiple-choice questions scored before/after "
                   f"(default {DEFAULT_EVAL_SIZE}; 0 skips)")
    p.add_argument("--workers", type=int, default=None,
                   help="models trained in parallel processes, one core each (default: all "
                   "at once, up to the CPU count)")
    p.add_argument("--cache-dir", default=None,
                   help="model cache root (default $DRAKE_CACHE/models or ~/.cache/drake/models)")
    p.set_defaults(func=cmd_models_pretrain)
