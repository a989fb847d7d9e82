"""Packaging hygiene a fresh clone runs into: setuptools metadata warnings, files left unignored."""

import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_metadata_applies_without_setuptools_warnings(monkeypatch):
    """`license = { text = ... }` made setuptools >= 77 warn three times per install."""
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    monkeypatch.chdir(ROOT)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert [str(w.message).splitlines()[0] for w in caught
            if "setuptools" in type(w.message).__module__] == []
    assert dist.metadata.license_expression == "Apache-2.0"


def test_the_default_run_folder_of_drake_eval_is_ignored_by_git():
    """`drake eval` writes ./runs/<build>-<scenario>-<method>-s<seed> by default."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    probe = "runs/drake-synth-dynamic-fedavg-s0/results.json"
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", probe], cwd=ROOT)
    assert ignored.returncode == 0, f"{probe} is not ignored by .gitignore"
