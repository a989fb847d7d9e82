"""schema.json and the pydantic models must accept exactly the same documents.

A corpus of valid and invalid entry and leaderboard documents is judged by both; each verdict
must equal the expected one, so a wrong rule in either (or in both) fails. A structural test
holds the field names, required sets and patterns of the two side by side.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from leaderboard import fields as F
from leaderboard.model import (
    BenchmarkRef,
    Citation,
    Curve,
    Entry,
    EntryCost,
    EntrySoftware,
    Leaderboard,
    MethodRef,
    MetricStats,
    ScenarioRef,
    Scoring,
    json_schema,
    schema_validator,
)

SHA = "ab" * 32


def reproduced() -> dict[str, Any]:
    return {
        "benchmark": {"name": "drake-synth", "version": "1.0", "manifest_sha256": SHA},
        "scenario": {
            "name": "dynamic-hetero",
            "order": "dynamic",
            "models": "hetero",
            "partition": {"n_clients": 10, "rule": "by_task"},
        },
        "protocol": "self_others",
        "method": {
            "name": "fedavg",
            "hyperparameters": {"lr": 0.0002, "lora.r": 8},
            "config_sha256": "cd" * 32,
        },
        "models_per_client": ["tiny-llava-llama", "tiny-llava-qwen"],
        "seeds": [0, 1, 2],
        "n_seeds": 3,
        "metrics": {
            name: {"mean": 50.0, "std": 1.0, "ci95": [47.5, 52.5], "per_seed": [49.0, 50.0, 51.0]}
            for name in ("self_a_last", "self_a_auc", "others_a_last", "others_a_auc")
        },
        "curve": {"rounds": [4, 8], "self": [40.0, 50.0], "others": [30.0, 35.0]},
        "cost": {
            "comm_bytes_up_total": 16000.0,
            "comm_bytes_down_total": 32000.0,
            "rounds": 16,
            "wall_time_s": 11.0,
            "peak_rss_mb": 502.0,
            "flops_extra_pct": None,
        },
        "scoring": {"mc_scoring": "loglik", "bertscore_model": None},
        "software": {"package_version": "0.1.0", "git_hash": "0123456"},
        "submitter": "Jane Doe",
        "date": "2025-06-01",
        "link": "https://github.com/example/drake-runs",
        "provenance": "reproduced",
        "citation": None,
    }


def reported() -> dict[str, Any]:
    doc = reproduced()
    doc.update(
        benchmark={"name": "drake", "version": "1.0", "manifest_sha256": None},
        method={"name": "fedmosaic", "hyperparameters": {}, "config_sha256": None},
        seeds=None,
        curve=None,
        cost=None,
        scoring=None,
        software=None,
        link=None,
        provenance="reported",
        citation={"paper": "FedMosaic (Seo et al.)", "table": "Tab. 2", "note": None},
    )
    doc["metrics"] = {
        k: {"mean": 60.0, "std": 0.5, "ci95": None, "per_seed": None} for k in doc["metrics"]
    }
    return doc


def edit(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy ``base`` and set (or, with value ``DELETE``, remove) the dotted ``path``."""
    doc = copy.deepcopy(base)
    keys = path.split(".")
    holder = doc
    for key in keys[:-1]:
        holder = holder[key]
    if value is DELETE:
        del holder[keys[-1]]
    else:
        holder[keys[-1]] = value
    return doc


DELETE = object()
R, P = reproduced(), reported()
STAT = {"mean": 250.0, "std": 1.0, "ci95": None, "per_seed": [250.0]}
GEN = edit(edit(R, "protocol", "generation"), "metrics", {"cider": STAT})
CLS = edit(
    edit(R, "protocol", "classification"),
    "metrics",
    {"accuracy": {"mean": 50.0, "std": 0.0, "ci95": None, "per_seed": [50.0]}},
)

ENTRY_CORPUS: list[tuple[str, dict[str, Any], bool]] = [
    ("reproduced", R, True),
    ("reported", P, True),
    ("reproduced-manifest-null", edit(R, "benchmark.manifest_sha256", None), False),
    ("reproduced-config-null", edit(R, "method.config_sha256", None), False),
    ("reproduced-with-citation", edit(R, "citation", P["citation"]), False),
    ("reproduced-link-null", edit(R, "link", None), False),
    ("reproduced-std-null", edit(R, "metrics.self_a_last.std", None), False),
    ("reproduced-per-seed-null", edit(R, "metrics.self_a_last.per_seed", None), False),
    ("reported-no-citation", edit(P, "citation", None), False),
    ("reported-per-seed", edit(P, "metrics.self_a_last.per_seed", [60.0]), False),
    ("reported-seeds", edit(P, "seeds", [0]), False),
    ("reported-curve", edit(P, "curve", R["curve"]), False),
    ("reported-cost-allowed", edit(P, "cost", R["cost"]), True),
    ("missing-date", edit(R, "date", DELETE), False),
    ("extra-field", edit(R, "extra", 1), False),
    ("mean-above-100", edit(R, "metrics.self_a_last.mean", 100.5), False),
    ("mean-below-0", edit(R, "metrics.self_a_last.mean", -0.1), False),
    ("per-seed-above-100", edit(R, "metrics.self_a_last.per_seed", [101.0, 50.0, 50.0]), False),
    ("cider-250", GEN, True),
    ("cider-over-1000", edit(GEN, "metrics.cider.mean", 1000.5), False),
    (
        "mse-5",
        edit(GEN, "metrics", {"mse": {"mean": 5.0, "std": 0.1, "ci95": None, "per_seed": [5.0]}}),
        True,
    ),
    (
        "mse-huge",
        edit(
            GEN, "metrics", {"mse": {"mean": 1e308, "std": 0.0, "ci95": None, "per_seed": [1e308]}}
        ),
        True,
    ),
    (
        "mse-negative",
        edit(GEN, "metrics", {"mse": {"mean": -1.0, "std": 0.1, "ci95": None, "per_seed": [-1.0]}}),
        False,
    ),
    (
        "forgetting-negative",
        edit(
            R,
            "metrics.forgetting",
            {"mean": -5.0, "std": 0.0, "ci95": None, "per_seed": [-5.0, -5.0, -5.0]},
        ),
        True,
    ),
    ("self-others-accuracy", edit(R, "metrics.accuracy", R["metrics"]["self_a_last"]), False),
    ("classification-domain", edit(CLS, "metrics.acc_clipart", CLS["metrics"]["accuracy"]), True),
    (
        "classification-domain-newline",
        edit(CLS, "metrics.acc_clipart\n", CLS["metrics"]["accuracy"]),
        False,
    ),
    ("generation-domain", edit(GEN, "metrics.acc_clipart", CLS["metrics"]["accuracy"]), False),
    (
        "base-novel-hm",
        edit(
            edit(P, "protocol", "base_novel"),
            "metrics",
            {k: P["metrics"]["self_a_last"] for k in ("local", "base", "novel", "hm")},
        ),
        True,
    ),
    ("unknown-metric", edit(R, "metrics.bogus", R["metrics"]["self_a_last"]), False),
    ("no-metrics", edit(R, "metrics", {}), False),
    ("method-path", edit(R, "method.name", "../etc"), False),
    ("method-slash", edit(R, "method.name", "a/b"), False),
    ("method-uppercase", edit(R, "method.name", "FedAvg"), False),
    ("method-dotdot", edit(R, "method.name", "a..b"), False),
    ("benchmark-family", edit(R, "benchmark.name", "clip-base2novel/dtd"), True),
    ("benchmark-two-slashes", edit(R, "benchmark.name", "a/b/c"), False),
    ("benchmark-dotdot", edit(R, "benchmark.name", "a/../b"), False),
    ("benchmark-backslash", edit(R, "benchmark.name", "a\\b"), False),
    ("version-newline", edit(R, "benchmark.version", "1.0\n"), False),
    ("scenario-newline", edit(R, "scenario.name", "dynamic-hetero\n"), False),
    ("submitter-newline", edit(R, "submitter", "Jane\nDoe"), False),
    ("submitter-bidi", edit(R, "submitter", "Jane \u202eeoD"), False),
    ("submitter-surrogate", edit(R, "submitter", "Jane \ud800"), False),
    ("submitter-empty", edit(R, "submitter", ""), False),
    ("submitter-unicode", edit(R, "submitter", "José Müller 李"), True),
    ("note-c1-control", edit(P, "citation.note", "bad \x85 note"), False),
    ("date-invalid-day", edit(R, "date", "2025-02-30"), False),
    ("date-short", edit(R, "date", "2025-2-3"), False),
    ("link-http", edit(R, "link", "http://example.org"), False),
    ("link-javascript", edit(R, "link", "javascript:alert(1)"), False),
    ("link-quote", edit(R, "link", 'https://x.org/"onmouseover=1'), False),
    ("link-query", edit(R, "link", "https://example.org/paper?id=1#sec"), True),
    ("seeds-duplicate", edit(R, "seeds", [1, 1, 2]), False),
    ("seeds-integral-float", edit(R, "seeds", [0, 1, 2.0]), True),
    ("seeds-fraction", edit(R, "seeds", [0, 1, 1.5]), False),
    ("seeds-bool", edit(R, "seeds", [True, 2, 3]), False),
    ("seeds-empty", edit(R, "seeds", []), False),
    ("n-seeds-zero", edit(R, "n_seeds", 0), False),
    ("ci-one-value", edit(R, "metrics.self_a_last.ci95", [1.0]), False),
    ("ci-three-values", edit(R, "metrics.self_a_last.ci95", [1.0, 2.0, 3.0]), False),
    ("std-negative", edit(R, "metrics.self_a_last.std", -1.0), False),
    ("std-string", edit(R, "metrics.self_a_last.std", "1.0"), False),
    ("mean-bool", edit(R, "metrics.self_a_last.mean", True), False),
    ("hyper-list", edit(R, "method.hyperparameters.mix", [1, "a", None, 2.5, False]), True),
    ("hyper-nested", edit(R, "method.hyperparameters.opt", {"lr": 1}), False),
    ("hyper-bad-key", edit(R, "method.hyperparameters", {"bad key": 1}), False),
    ("hyper-key-newline", edit(R, "method.hyperparameters", {"lr\n": 1}), False),
    ("partition-tab", edit(R, "scenario.partition.rule", "by\ttask"), False),
    ("provenance-unknown", edit(R, "provenance", "copied"), False),
    ("order-unknown", edit(R, "scenario.order", "random"), False),
    ("models-hub-id", edit(R, "models_per_client", ["org/model-1.5", "tiny-llava"]), True),
    ("models-path", edit(R, "models_per_client", ["../x"]), False),
    ("curve-negative-round", edit(R, "curve.rounds", [-1, 8]), False),
    ("curve-self-101", edit(R, "curve.self", [40.0, 101.0]), False),
    ("cost-zero-rounds", edit(R, "cost.rounds", 0), False),
    ("git-hash-upper", edit(R, "software.git_hash", "ABCDEF0"), False),
    ("protocol-unknown", edit(R, "protocol", "self/others"), False),
    ("not-an-object", [R], False),
]

BOARD_CORPUS: list[tuple[str, Any, bool]] = [
    ("board-valid", {"schema_version": "1.0", "entries": [R, P]}, True),
    ("board-empty", {"schema_version": "1.0", "entries": []}, True),
    ("board-version", {"schema_version": "2.0", "entries": []}, False),
    ("board-extra", {"schema_version": "1.0", "entries": [], "x": 1}, False),
    ("board-entries-object", {"schema_version": "1.0", "entries": {}}, False),
    (
        "board-bad-entry",
        {"schema_version": "1.0", "entries": [R, edit(P, "citation", None)]},
        False,
    ),
]


def _pydantic_ok(model: type, doc: Any) -> bool:
    try:
        model.model_validate(doc)
    except ValidationError:
        return False
    return True


def test_corpus_is_large_and_mixed() -> None:
    verdicts = [ok for _, _, ok in ENTRY_CORPUS + BOARD_CORPUS]
    assert len(verdicts) >= 20
    assert sum(verdicts) >= 8 and len(verdicts) - sum(verdicts) >= 40


@pytest.mark.parametrize("name,doc,expected", ENTRY_CORPUS, ids=[c[0] for c in ENTRY_CORPUS])
def test_entry_schema_and_model_agree(name: str, doc: Any, expected: bool) -> None:
    doc = json.loads(json.dumps(doc))  # exactly what a JSON file would give
    schema_ok = schema_validator("entry").is_valid(doc)
    model_ok = _pydantic_ok(Entry, doc)
    assert (schema_ok, model_ok) == (expected, expected)


@pytest.mark.parametrize("name,doc,expected", BOARD_CORPUS, ids=[c[0] for c in BOARD_CORPUS])
def test_leaderboard_schema_and_model_agree(name: str, doc: Any, expected: bool) -> None:
    doc = json.loads(json.dumps(doc))
    assert (schema_validator().is_valid(doc), _pydantic_ok(Leaderboard, doc)) == (
        expected,
        expected,
    )


def test_schema_is_valid_draft_2020_12() -> None:
    from jsonschema import Draft202012Validator

    schema = json_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


PAIRS = [
    (Entry, "entry"),
    (BenchmarkRef, "benchmark_ref"),
    (ScenarioRef, "scenario_ref"),
    (MethodRef, "method_ref"),
    (MetricStats, "stats_shape"),
    (Curve, "curve"),
    (EntryCost, "entry_cost"),
    (Scoring, "scoring"),
    (EntrySoftware, "software"),
    (Citation, "citation"),
]


@pytest.mark.parametrize("model,name", PAIRS, ids=[p[1] for p in PAIRS])
def test_schema_objects_have_the_model_fields(model: type, name: str) -> None:
    definition = json_schema()["$defs"][name]
    assert definition["additionalProperties"] is False
    assert set(definition["properties"]) == set(model.model_fields)
    required = {k for k, f in model.model_fields.items() if f.is_required()}
    assert set(definition["required"]) == required


def test_root_has_leaderboard_fields() -> None:
    schema = json_schema()
    assert set(schema["properties"]) == set(Leaderboard.model_fields) == set(schema["required"])


def test_schema_patterns_are_the_models_patterns() -> None:
    defs = json_schema()["$defs"]
    expected = {
        "benchmark_name": F.BENCHMARK_NAME,
        "scenario_name": F.SCENARIO_NAME,
        "method_name": F.METHOD_NAME,
        "model_name": F.MODEL_NAME,
        "param_key": F.PARAM_KEY,
        "version": F.VERSION,
        "package_version": F.PACKAGE_VERSION,
        "sha256": F.SHA256,
        "git_hash": F.GIT_HASH,
        "date": F.DATE,
        "https_url": F.HTTPS_URL,
    }
    assert {k: defs[k]["pattern"] for k in expected} == expected
    assert defs["safe_string"]["not"]["pattern"] == F.FORBIDDEN_CHARS
