"""The results.json contract (RunResult)."""

from __future__ import annotations

import copy
import json

import pytest
from pydantic import ValidationError

from leaderboard.errors import SubmissionError
from leaderboard.run_result import RunResult
from leaderboard.validate import parse_run_result


def test_fixture_is_schema_true(make_result) -> None:
    run = RunResult.model_validate(json.loads(json.dumps(make_result(0))))
    assert run.seed == 0
    assert run.metrics["self_a_last"] == run.curves.self[-1]
    assert len(run.curves.scores[0]) == len(run.models_per_client) == 10


def test_json_schema_can_be_exported_for_the_runtime() -> None:
    schema = RunResult.model_json_schema()
    assert schema["additionalProperties"] is False
    assert {"benchmark", "curves", "cost", "software", "created_at"} <= set(schema["required"])


def _broken(make_result, path: str, value) -> dict:
    doc = copy.deepcopy(make_result(0))
    holder = doc
    keys = path.split(".")
    for key in keys[:-1]:
        holder = holder[int(key)] if isinstance(holder, list) else holder[key]
    if value is KeyError:
        del holder[keys[-1]]
    else:
        holder[keys[-1]] = value
    return doc


CASES = [
    ("unknown-top-field", "stdout", "hello", "stdout"),
    ("unknown-cost-field", "cost.gpu", "A100", "cost.gpu"),
    ("missing-software", "software", KeyError, "software"),
    ("seed-negative", "seed", -1, "seed"),
    ("seed-string", "seed", "0", "seed"),
    ("metric-range", "metrics.self_a_auc", 100.01, "metrics.self_a_auc"),
    ("metric-unknown", "metrics.bleu", 10.0, "metrics.bleu: not a metric of protocol"),
    ("a-last-off-curve", "metrics.self_a_last", 1.0, "A_last is the score at the last"),
    ("others-missing", "curves.others", None, "curves.others: required"),
    ("rounds-not-increasing", "curves.rounds", [4, 4, 12, 16], "strictly increasing"),
    ("self-length", "curves.self", [1.0, 2.0], "curves.self: 2 points for 4 rounds"),
    ("scores-clients", "curves.scores", [[{}]] * 4, "1 clients, but models_per_client"),
    ("scores-negative", "curves.scores", [[{"t": -1.0}] * 10] * 4, "curves.scores"),
    ("task-id-path", "curves.scores", [[{"../t": 1.0}] * 10] * 4, "curves.scores"),
    ("comm-lengths", "cost.comm_bytes_down_per_round", [1], "one value per round"),
    ("comm-negative", "cost.comm_bytes_up_per_round", [-5], "comm_bytes_up_per_round"),
    ("mc-scoring", "scoring.mc_scoring", "guess", "scoring.mc_scoring"),
    ("created-at", "created_at", "yesterday", "not an ISO 8601 date-time"),
    ("manifest-upper", "benchmark.manifest_sha256", "AB" * 32, "benchmark.manifest_sha256"),
    ("schema-version", "schema_version", "2.0", "schema_version"),
]


@pytest.mark.parametrize("name,path,value,match", CASES, ids=[c[0] for c in CASES])
def test_run_result_refusals(make_result, name, path, value, match) -> None:
    doc = json.loads(json.dumps(_broken(make_result, path, value)))
    with pytest.raises(ValidationError):
        RunResult.model_validate(doc)
    with pytest.raises(SubmissionError, match=match.replace(".", r"\.").replace("(", r"\(")):
        parse_run_result(doc, "results.json")


def test_classification_run_may_carry_domain_accuracy(make_result) -> None:
    doc = make_result(0)
    doc.update(protocol="classification", metrics={"accuracy": 50.0, "acc_sketch": 40.0})
    doc["curves"]["others"] = None
    RunResult.model_validate(doc)
