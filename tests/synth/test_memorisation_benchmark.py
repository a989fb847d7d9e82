"""benchmarks/memorisation.py: its 'trained' questions are stage 2's, and its table's counts."""

from __future__ import annotations

import importlib

import pytest

pretrain = importlib.import_module("drake.models.pretrain")


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("memorisation")


def test_trained_questions_are_the_start_of_the_training_pool(bench) -> None:
    easy, full = pretrain._train_set(0, 200)
    pool = {s["id"] for s in full}
    for task in pretrain.TASK_SHARES:
        size = bench.pool_size(task, 200)
        assert size == sum(s["task"] == task for s in full)
        trained = bench.trained_samples(task, size, 200, 0)
        assert {s["id"] for s in trained} <= pool  # every one was trained on
        assert not {s["id"] for s in trained} & {s["id"] for s in easy}
    held = pretrain.public_samples("synth-public-open", "test", 20, 0)
    assert not {s["id"] for s in held} & pool


def test_a_count_beyond_the_pool_names_the_task_and_the_fix(bench) -> None:
    with pytest.raises(ValueError, match=r"synth-public-multi.*--train-size 200.*--per-task"):
        bench.trained_samples("synth-public-multi", 1000, 200, 0)


def test_measure_counts_every_question_once_per_group(bench) -> None:
    trained = pretrain._train_set(0, 200)[1]
    held = pretrain._eval_set(0, 120)
    seen = {s["id"] for s in trained}

    def recalls_only_what_it_saw(samples):
        return [s["id"] in seen for s in samples]

    table = bench.measure(recalls_only_what_it_saw, trained, held)
    assert sum(r["n_trained"] for r in table.values()) == len(trained)
    assert sum(r["n_held_out"] for r in table.values()) == len(held)
    assert set(table) == {pretrain._group(s) for s in trained + held}
    for row in table.values():
        if row["n_trained"] and row["n_held_out"]:
            assert (row["trained"], row["held_out"], row["gap"]) == (100.0, 0.0, 100.0)
    # a hand-counted group: 3 of 4 right on one side, 1 of 2 on the other
    pick = [s for s in pretrain.public_samples("synth-public-open", "public", 200, 0)
            if pretrain._group(s) == "colour"][:4]
    other = [s for s in pretrain.public_samples("synth-public-open", "test", 200, 0)
             if pretrain._group(s) == "colour"][:2]
    right = {pick[0]["id"], pick[1]["id"], pick[2]["id"], other[0]["id"]}
    row = bench.measure(lambda ss: [s["id"] in right for s in ss], pick, other)["colour"]
    assert (row["trained"], row["held_out"], row["gap"]) == (75.0, 50.0, 25.0)
