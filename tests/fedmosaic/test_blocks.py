"""Block-wise placement (Eq. 7): golden layer indices, pairing, and the conventional-LoRA regex."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.fedmosaic import block_map, lora_target_regex


def test_eq7_golden_depths_16_and_28():
    # Eq. 7, 1-based: I_k = k * floor(|W| / N_B) for k < N_B, I_{N_B} = |W|.
    # |W| = 16, N_B = 4: floor(16/4) = 4 -> I = 4, 8, 12, 16 -> 0-based 3, 7, 11, 15.
    # |W| = 28, N_B = 4: floor(28/4) = 7 -> I = 7, 14, 21, 28 -> 0-based 6, 13, 20, 27.
    assert block_map(16).layers == (3, 7, 11, 15)
    assert block_map(28).layers == (6, 13, 20, 27)
    # block k of the 1B model pairs with block k of the 3B model
    assert block_map(16).pairs(block_map(28)) == [(3, 6), (7, 13), (11, 20), (15, 27)]


def test_eq7_remainder_goes_to_the_last_block():
    # |W| = 26, N_B = 4: floor(26/4) = 6 -> I = 6, 12, 18, 26 -> 0-based 5, 11, 17, 25
    # (Alg. 2's "n * B_k + B_r" would give 8, 14, 20, 26 instead; we follow Eq. 7 and the code)
    assert block_map(26).layers == (5, 11, 17, 25)
    # the tiny pair: 2 and 3 layers with N_B = 2
    assert block_map(2, 2).layers == (0, 1)
    assert block_map(3, 2).layers == (0, 2)
    assert block_map(3, 2).conventional_layers == (1,)


def test_too_many_blocks_is_refused_with_a_fix():
    with pytest.raises(ValueError, match="lower num_blocks to at most 2"):
        block_map(2, 4)
    with pytest.raises(ValueError, match="same N_B"):
        block_map(16, 4).pairs(block_map(28, 2))


@given(st.integers(1, 80), st.integers(1, 16))
def test_block_ends_are_increasing_and_end_at_the_top(depth, blocks):
    if blocks > depth:
        with pytest.raises(ValueError):
            block_map(depth, blocks)
        return
    bm = block_map(depth, blocks)
    assert len(bm.layers) == blocks
    assert list(bm.layers) == sorted(set(bm.layers))
    assert bm.layers[-1] == depth - 1 and bm.layers[0] >= 0
    assert set(bm.layers).isdisjoint(bm.conventional_layers)
    assert len(bm.layers) + len(bm.conventional_layers) == depth
    assert all(bm.block_of(i) == k for k, i in enumerate(bm.layers))


def test_regex_excludes_block_end_layers():
    regex = lora_target_regex(block_map(3, 2))
    prefix = "model.language_model.layers"
    assert re.fullmatch(regex, f"{prefix}.1.self_attn.q_proj")
    assert re.fullmatch(regex, f"{prefix}.1.mlp.down_proj")
    assert not re.fullmatch(regex, f"{prefix}.0.self_attn.q_proj")
    assert not re.fullmatch(regex, f"{prefix}.2.mlp.up_proj")
    assert not re.fullmatch(regex, f"{prefix}.11.self_attn.q_proj")  # no prefix match on "1"
    assert not re.fullmatch(regex, "model.vision_tower.layers.1.self_attn.q_proj")
    assert lora_target_regex(block_map(2, 2)) is None  # every layer carries PQ-LoRA
