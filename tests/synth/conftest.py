"""Shared fixtures of the drake-synth tests."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def benchmark_module() -> Iterator[Callable[[str], ModuleType]]:
    """``benchmark_module(name)`` imports ``benchmarks/<name>.py`` as when it runs (its sibling
    modules import by name); the path is restored after the test module."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def bundle():
    """The shipped ``tiny-llava-qwen``, with eager attention (attention weights returned), for
    the benchmark tests that look inside it."""
    from drake.models import load_model

    loaded = load_model("tiny-llava-qwen")
    loaded.model.set_attn_implementation("eager")
    return loaded
