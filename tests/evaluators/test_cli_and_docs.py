"""The setup-metrics subcommand, and the examples in the evaluators docstrings."""

from __future__ import annotations

import argparse
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import evaluators
from evaluators import MetricSetupError
from evaluators.cli import add_cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drake")
    add_cli(parser.add_subparsers(dest="command"))
    return parser


def test_setup_metrics_arguments_and_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path))
    args = _parser().parse_args(["setup-metrics"])
    assert args.nltk_dir is None
    assert args.source_dir == Path("/usr/share/wordnet")
    assert callable(args.func)
    args = _parser().parse_args(["setup-metrics", "--nltk-dir", "x", "--source-dir", "y"])
    assert (args.nltk_dir, args.source_dir) == (Path("x"), Path("y"))


def test_setup_metrics_builds_a_loadable_wordnet(wordnet_root, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "cache"))
    # reuse the session folder so the WordNet reader is opened only once
    args = _parser().parse_args(["setup-metrics", "--nltk-dir", str(wordnet_root)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "WordNet 3.0 ready" in out
    assert f"export NLTK_DATA={wordnet_root}" in out


def test_setup_metrics_missing_source_is_one_clear_error(tmp_path):
    args = _parser().parse_args(
        ["setup-metrics", "--nltk-dir", str(tmp_path / "n"), "--source-dir", str(tmp_path)]
    )
    with pytest.raises(MetricSetupError) as info:
        args.func(args)
    assert "\n" not in str(info.value)
    assert "wordnet-sense-index" in str(info.value)


def test_ci_script_installs_the_debian_packages():
    script = Path(__file__).resolve().parents[2] / ".ci" / "setup"
    text = script.read_text()
    assert "wordnet-base" in text and "wordnet-sense-index" in text
    assert "/usr/share/wordnet" in text and "drake setup-metrics" in text


MODULES = sorted(
    m.name
    for m in pkgutil.iter_modules(evaluators.__path__, "evaluators.")
    if not m.name.rsplit(".", 1)[1].startswith("_")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_public_api_is_exported():
    for name in evaluators.__all__:
        assert hasattr(evaluators, name), name
