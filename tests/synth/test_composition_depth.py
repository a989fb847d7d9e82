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


def _asked(words: list[str]) -> tuple[str, bool]:
    """The shape or colour a question asks about, and whether it asks by colour."""
    question = words[words.index("question") + 2:words.index("?")]
    if question[:2] == ["which", "is"]:
        return question[2], True
    return question[-1], False


@pytest.mark.parametrize("facts", ["words", "bound"])
def test_every_kind_has_the_gold_it_claims(depth, facts) -> None:
    rng = np.random.default_rng(0)
    seen = {kind: set() for kind in depth.ALL_KINDS}
    for _ in range(300):
        for kind in depth.ALL_KINDS:
            words, answer = depth.sample(kind, rng, facts)
            assert all(w in depth.VOCAB for w in words) and answer in depth.VOCAB
            assert words[-2:] == ["answer", ":"]
            options = _options(words, depth.LETTERS)
            stated = _facts(words)
            if kind in ("lookup", "reverse-lookup"):
                asked, by_colour = _asked(words)
                assert by_colour == (kind == "reverse-lookup") and not options
                gold = ({c: s for s, c in stated.items()}[asked] if by_colour
                        else stated[asked])
                assert gold == answer and 2 <= len(stated) <= 4
                seen[kind].add(answer)
                continue
            # the answer is the label's own answer-token twin, as the zoo's "▁B" for "\nB"
            assert answer.startswith("_") and answer[1:] in options
            said = options[answer[1:]]
            if kind in ("copy", "shape-copy"):
                assert words[words.index("which") + 3] == said and not stated
                assert said in (depth.SHAPES if kind == "shape-copy" else depth.COLOURS)
            else:
                asked, by_colour = _asked(words)
                assert by_colour == (kind == "reverse")
                assert said == ({c: s for s, c in stated.items()}[asked] if by_colour
                                else stated[asked])
            pool = depth.SHAPES if kind in depth.REVERSE_KINDS else depth.COLOURS
            assert set(options.values()) <= set(pool)
            assert len(set(options.values())) == len(options) and 2 <= len(options) <= 4
            seen[kind].add(answer)
    assert seen["lookup"] == set(depth.COLOURS) and seen["reverse-lookup"] == set(depth.SHAPES)
    letters = {f"_{letter}" for letter in depth.LETTERS}
    assert all(seen[kind] == letters for kind in ("copy", "two-hop", "shape-copy", "reverse"))
    with pytest.raises(ValueError, match="unknown facts 'prose'"):
        depth.sample(kind, rng, "prose")
    with pytest.raises(ValueError, match="unknown kind 'riddle'"):
        depth.sample("riddle", rng, facts)


def test_the_first_three_kinds_draw_as_the_card_measured_them(depth) -> None:
    """The reverse kinds came later; the first three still draw the same questions (the card's
    commands give its numbers)."""
    words, answer = depth.sample("two-hop", np.random.default_rng(0), "bound")
    assert " ".join(words) == ("picture : diamond/red square/black triangle/purple star/white "
                               ". question : what colour is the triangle ? A . black B . "
                               "yellow C . purple answer :")
    assert answer == "_C"


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


def test_the_task_lora_stage_follows_pretraining_and_scores_every_kind(depth) -> None:
    import argparse

    import torch

    args = argparse.Namespace(hidden=16, heads=2, kv_heads=None, seed=0, mix=["lookup", "copy"],
                              steps=3, batch=4, lr=1e-3, facts="bound", every=3, test=8,
                              lora_kind="reverse", lora_steps=2, lora_batch=4, lora_lr=2e-3)
    threads = torch.get_num_threads()
    try:
        rows = depth.run(1, args)
    finally:
        torch.set_num_threads(threads)
    assert [(r["stage"], r["step"]) for r in rows] == [("pretrain", 3), ("lora reverse", 2)]
    assert set(depth.ALL_KINDS) <= set(rows[-1])  # the reverse kinds are scored too
    assert all(0.0 <= rows[-1][kind] <= 100.0 for kind in depth.ALL_KINDS)
