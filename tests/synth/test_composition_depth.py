"""benchmarks/composition_depth.py: its questions have the gold they claim, and its models are
the depths and the shape asked for."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def depth(benchmark_module):
    return benchmark_module("composition_depth")


def _facts(words: list[str]) -> dict[str, str]:
    if words[0] == "picture":  # one token per shape and its colour
        return dict(w.split("/") for w in words[2:words.index(".")])
    return {words[i + 1]: words[i + 3] for i in range(0, len(words) - 4, 5)
            if words[i] == "the" and words[i + 2] == "is" and words[i + 4] == "."}


def _options(words: list[str], letters) -> dict[str, str]:
    return {words[i]: words[i + 2] for i in range(len(words) - 2)
            if words[i] in letters and words[i + 1] == "."}


@pytest.mark.parametrize("facts", ["words", "bound"])
def test_every_kind_has_the_gold_it_claims(depth, facts) -> None:
    rng = np.random.default_rng(0)
    seen = {kind: set() for kind in depth.KINDS}
    for _ in range(300):
        for kind in depth.KINDS:
            words, answer = depth.sample(kind, rng, facts)
            assert all(w in depth.VOCAB for w in words) and answer in depth.VOCAB
            assert words[-2:] == ["answer", ":"]
            options = _options(words, depth.LETTERS)
            if kind == "lookup":
                asked = words[words.index("?") - 1]
                assert _facts(words)[asked] == answer and not options
                assert 2 <= len(_facts(words)) <= 4
                seen[kind].add(answer)
                continue
            # the answer is the label's own answer-token twin, as the zoo's "▁B" for "\nB"
            assert answer.startswith("_") and answer[1:] in options
            said = options[answer[1:]]
            if kind == "copy":
                assert words[words.index("which") + 3] == said and not _facts(words)
            else:
                asked = words[words.index("?") - 1]
                assert _facts(words)[asked] == said
            assert len(set(options.values())) == len(options) and 2 <= len(options) <= 4
            seen[kind].add(answer)
    assert seen["lookup"] == set(depth.COLOURS)
    assert seen["copy"] == seen["two-hop"] == {f"_{letter}" for letter in depth.LETTERS}
    with pytest.raises(ValueError, match="unknown facts 'prose'"):
        depth.sample(kind, rng, "prose")


def test_batches_are_left_padded_and_reproducible(depth) -> None:
    ids, answers = depth.batch(["lookup", "two-hop"], np.random.default_rng(3))
    again, same = depth.batch(["lookup", "two-hop"], np.random.default_rng(3))
    assert ids.equal(again) and answers.equal(same)
    assert ids[0, 0] == 0 and ids[1, 0] != 0  # the shorter look-up is padded on the left
    assert depth.WORDS[int(ids[0, -1])] == ":" and depth.WORDS[int(ids[1, -1])] == ":"


def test_models_have_the_asked_depth_and_answer_at_the_last_position(depth) -> None:
    model = depth.build_model(3, hidden=32, heads=2, seed=0)
    assert model.config.num_hidden_layers == 3 and model.config.hidden_size == 32
    assert model.config.num_key_value_heads == 1
    assert depth.build_model(1, hidden=40, heads=5, seed=0, kv_heads=5).config.num_key_value_heads == 5
    ids, _ = depth.batch(["two-hop"] * 2, np.random.default_rng(0))
    logits = depth.last_logits(model, ids)
    assert logits.shape == (2, len(depth.WORDS))
