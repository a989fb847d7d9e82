"""Fixtures: schema-true drake-synth results.json files written by the tests themselves.

The ``make_result`` fixture returns a function that builds one seed of a drake-synth
dynamic-hetero run following the :class:`leaderboard.run_result.RunResult` contract:
10 clients (tiny-llava-llama on clients 0, 1, 8, 9 and tiny-llava-qwen elsewhere, as in
drake-synth), 4 tasks per client streamed one per 4 rounds, evaluation after every task
(rounds 4, 8, 12, 16). Per-task scores are drawn
from a generator seeded with the run's seed; Self/Others curves are the client means, A_last
is the last point and A_AUC the mean over points.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SEEDED_LEADERBOARD = Path(__file__).resolve().parents[2] / "leaderboard" / "leaderboard.json"
MODELS = ["tiny-llava-llama"] * 2 + ["tiny-llava-qwen"] * 6 + ["tiny-llava-llama"] * 2
ROUNDS = [4, 8, 12, 16]
MANIFEST_BYTES = json.dumps(
    {"name": "drake-synth", "version": "1.0", "seed": 0, "shards": {"tasks/a.parquet": "0" * 64}},
    indent=2,
).encode()
MANIFEST_SHA = hashlib.sha256(MANIFEST_BYTES).hexdigest()
CONFIG_SHA = hashlib.sha256(b"fedavg lr=2e-4 rounds=16").hexdigest()


def _make_result(seed: int, method: str = "fedavg", level: float = 60.0, **top: Any) -> dict:
    """One schema-true results.json document (see module docstring)."""
    rng = np.random.default_rng(seed)
    scores, self_curve, others_curve = [], [], []
    for p, _ in enumerate(ROUNDS):
        point = []
        for c in range(len(MODELS)):
            point.append(
                {f"c{c}-t{t}": float(np.clip(rng.normal(level, 8.0), 0, 100)) for t in range(p + 1)}
            )
        scores.append(point)
        self_curve.append(float(np.mean([np.mean(list(d.values())) for d in point])))
        others_curve.append(float(np.clip(self_curve[-1] - 15.0 + rng.normal(0, 2.0), 0, 100)))
    doc = {
        "schema_version": "1.0",
        "benchmark": {"name": "drake-synth", "version": "1.0", "manifest_sha256": MANIFEST_SHA},
        "scenario": {
            "name": "dynamic-hetero",
            "order": "dynamic",
            "models": "hetero",
            "partition": {"n_clients": 10, "rule": "by_task", "rounds_per_task": 4},
        },
        "method": {
            "name": method,
            "hyperparameters": {"lr": 0.0002, "lora.r": 8, "local_steps": 5, "pretrained": True},
            "config_sha256": hashlib.sha256(f"{method}:{CONFIG_SHA}".encode()).hexdigest(),
        },
        "models_per_client": list(MODELS),
        "seed": seed,
        "protocol": "self_others",
        "metrics": {
            "self_a_last": self_curve[-1],
            "self_a_auc": float(np.mean(self_curve)),
            "others_a_last": others_curve[-1],
            "others_a_auc": float(np.mean(others_curve)),
        },
        "curves": {"rounds": ROUNDS, "self": self_curve, "others": others_curve, "scores": scores},
        "cost": {
            "comm_bytes_up_per_round": [1000 + seed] * 16,
            "comm_bytes_down_per_round": [2000] * 16,
            "wall_time_s": 10.0 + seed,
            "peak_rss_mb": 500.0 + seed,
            "flops_extra_pct": None,
        },
        "scoring": {"mc_scoring": "loglik", "bertscore_model": None},
        "software": {
            "package_version": "0.1.0",
            "git_hash": "0123456789abcdef0123456789abcdef01234567",
            "python": "3.11.7",
            "torch": "2.4.0",
            "transformers": "4.46.0",
        },
        "created_at": "2025-06-01T12:00:00+00:00",
    }
    doc.update(top)
    return doc


def _write_run(folder: Path, doc: dict) -> Path:
    """Write ``doc`` as ``folder/results.json`` and return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture(scope="session")
def make_result():
    """``make_result(seed, method="fedavg", level=60.0, **top_level_overrides) -> dict``."""
    return _make_result


@pytest.fixture(scope="session")
def write_run():
    """``write_run(folder, doc) -> folder`` writes ``folder/results.json``."""
    return _write_run


@pytest.fixture(scope="session")
def manifest_sha() -> str:
    return MANIFEST_SHA


@pytest.fixture(scope="session")
def manifest_bytes() -> bytes:
    """The bytes of the drake-synth manifest.json the fixture runs point at."""
    return MANIFEST_BYTES


@pytest.fixture(scope="session")
def seeded_source() -> Path:
    """The committed leaderboard file (read-only: copy it before writing)."""
    return SEEDED_LEADERBOARD


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A built-benchmark folder holding the manifest the runs point at."""
    folder = tmp_path / "data" / "drake-synth"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_bytes(MANIFEST_BYTES)
    return tmp_path / "data"


@pytest.fixture
def empty_board(tmp_path: Path) -> Path:
    path = tmp_path / "board.json"
    path.write_text('{"schema_version": "1.0", "entries": []}\n')
    return path


@pytest.fixture
def seeded_board(tmp_path: Path) -> Path:
    """A copy of the committed (paper-seeded) leaderboard."""
    path = tmp_path / "seeded.json"
    shutil.copyfile(SEEDED_LEADERBOARD, path)
    return path


@pytest.fixture
def three_runs(tmp_path: Path) -> list[Path]:
    return [_write_run(tmp_path / "runs" / f"seed{s}", _make_result(s)) for s in (0, 1, 2)]
