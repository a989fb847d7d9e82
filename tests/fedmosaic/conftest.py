"""Fixtures of the FedMosaic tests: fresh tiny Llama/Qwen bundles and drake-synth public samples."""

from __future__ import annotations

import pytest

from drake.models import load_model
from drake.synth.catalog import generate_sample


@pytest.fixture()
def make_bundle():
    """``make_bundle(name, seed=0)``: a fresh, randomly initialised tiny LLaVA (drake-synth vocab)."""

    def make(name: str, seed: int = 0):
        return load_model(name, pretrained=False, seed=seed)

    return make


@pytest.fixture(scope="session")
def public_samples() -> list[dict]:
    """Eight samples of drake-synth's public single-picture split (seed 0)."""
    return [generate_sample("synth-public-open", "public", i, seed=0) for i in range(8)]
