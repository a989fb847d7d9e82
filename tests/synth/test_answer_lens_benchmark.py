"""benchmarks/answer_lens.py: the words its lens ranks, the lens against the model's own output,
tie handling, the probe on planted data and the counts of a measurement."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
import torch

from drake.models.bundle import IGNORE_INDEX

pretrain = importlib.import_module("drake.models.pretrain")


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("answer_lens")


@pytest.fixture(scope="module")
def samples():
    return pretrain.public_samples("synth-public-formats", "test", 60, seed=0)


def _format(sample: dict) -> str:
    return json.loads(sample["meta"])["format"]


def test_word_ids_are_the_tokens_the_model_answers_with(bench, bundle, samples) -> None:
    for s in samples:
        fmt = _format(s)
        if fmt not in bench.FORMATS:
            continue
        ids = bench.word_ids(bundle, s)
        gold = bench.gold_index(s)
        if fmt == "choice":  # the first token of the answer as it is trained and scored
            labels = bundle._encode(s, answer=s["answer"], eos=False).labels
            assert ids[gold] == next(t for t in labels if t != IGNORE_INDEX)
        else:  # the token on the gold option's line, after "<label> ."
            prompt = bundle._encode(s, answer=None, eos=False).ids
            tokens = bundle.tokenizer.convert_ids_to_tokens(prompt)
            label = s["answer"].strip()
            line = max(i for i in range(len(tokens) - 2)
                       if tokens[i] == label and tokens[i + 1] == ".")
            assert ids[gold] == prompt[line + 2]


def test_the_last_layer_lens_is_the_models_output(bench, bundle, samples) -> None:
    checked = 0
    for s in samples:
        if _format(s) not in bench.FORMATS:
            continue
        ids = bench.word_ids(bundle, s)
        states = bench.answer_states(bundle, s)
        assert states.shape == (bundle.num_layers + 1, bundle.hidden_size)
        enc = bundle._encode(s, answer=None, eos=False)
        with torch.no_grad():
            logits = bundle.model(**bundle._pad([enc], left=False, with_labels=False)).logits
        lens = bench.lens_scores(bundle, states, ids)
        torch.testing.assert_close(lens[-1], logits[0, -1, ids], rtol=1e-4, atol=1e-4)
        checked += 1
    assert checked >= 20


def test_gold_first_splits_ties(bench) -> None:
    scores = torch.tensor([[1.0, 2.0, 2.0], [3.0, 1.0, 0.0], [0.0, 5.0, 1.0]])
    np.testing.assert_allclose(bench.gold_first(scores, 1), [0.5, 0.0, 1.0])


def test_the_probe_finds_a_planted_option_and_not_noise(bench) -> None:
    rng = np.random.default_rng(0)
    n, dim = 600, 12
    counts = rng.integers(2, 5, n)
    gold = np.array([rng.integers(k) for k in counts])
    planted = rng.normal(size=(n, dim)).astype(np.float32)
    planted[np.arange(n), gold] += 3.0
    assert bench.probe_accuracy(planted, gold, counts) > 90
    noise = rng.normal(size=(n, dim)).astype(np.float32)
    chance = 100 * float(np.mean(1 / counts[int(round(bench.PROBE_TRAIN * n)):]))
    assert abs(bench.probe_accuracy(noise, gold, counts) - chance) < 12


def test_measure_scores_each_question_once_per_layer(bench, bundle, samples) -> None:
    result = bench.measure(bundle, samples)
    formats = [_format(s) for s in samples]
    assert set(result) == {f for f in formats if f in bench.FORMATS}
    for fmt, row in result.items():
        group = [s for s in samples if _format(s) == fmt]
        assert row["n"] == len(group)
        assert row["chance"] == round(100 * float(np.mean(
            [1 / len(bench.options(s)) for s in group])), 1)
        assert len(row["lens"]) == bundle.num_layers + 1
        assert all(0 <= a <= 100 for a in row["lens"])
        assert ("probe" in row) == (fmt != "choice")
