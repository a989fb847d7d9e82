"""The measured knowledge-sharing table (drake/synth/transfer.json) and its card rendering."""

import json

from drake.card import TRANSFER_FILE, transfer_table
from drake.registry import get_benchmark
from drake.synth.catalog import SYNTH_TASKS


def test_every_client_is_measured_on_its_multiple_choice_tasks():
    synth = get_benchmark("drake-synth")
    record = json.loads(TRANSFER_FILE.read_text())
    rows = {row["client"]: row for row in record["clients"]}
    assert set(rows) == {client.id for client in synth.clients}
    for client in synth.clients:
        mc = [t for t in client.tasks if SYNTH_TASKS[t].answer_type == "multiple_choice"]
        row = rows[client.id]
        assert row["tasks"] == mc, client.id
        assert row["test_samples"] == len(mc) * record["settings"]["test_per_task"]
        assert all(0 <= row[k] <= 100 for k in ("chance", "nothing", "own", "others"))


def test_card_table_counts_the_clients_the_others_help(tmp_path):
    path = tmp_path / "transfer.json"
    settings = {"model": "m", "lr": 0.002, "batch_size": 8, "steps": 400, "train_per_task": 160,
                "test_per_task": 50, "seed": 0, "clients": None}
    path.write_text(json.dumps({"settings": settings, "clients": [
        {"client": 0, "tasks": ["a", "b"], "test_samples": 100, "chance": 37.5,
         "nothing": 40.0, "own": 52.0, "others": 45.0},
        {"client": 2, "tasks": ["c"], "test_samples": 50, "chance": 25.0,
         "nothing": 30.0, "own": 30.0, "others": 34.0}]}))
    table = transfer_table(get_benchmark("drake-synth"), path)
    assert "| 0 | a, b | 100 | 37.5 | 40.0 | 52.0 | 45.0 | +5.0 |" in table
    assert "| 2 | c | 50 | 25.0 | 30.0 | 30.0 | 34.0 | +4.0 |" in table
    assert "| 1 | not measured |" in table
    # exactly 5 points counts; 4 does not
    assert "1 of 2 clients gain 5 points or more from the other clients' data alone; the mean " \
        "gain is +4.5 points from the others' data and +6.0 from the client's own." in table
