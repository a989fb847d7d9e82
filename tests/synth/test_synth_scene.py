"""Rendering primitives: golden pixels for shapes, fills, occluders, bars and degradations."""

from __future__ import annotations

import numpy as np
import pytest

from drake.synth.scene import (
    ALL_DOMAINS,
    BAR_AREA,
    COLOUR_RGB,
    SHAPES,
    Obj,
    Scene,
    arrange,
    background,
    degrade,
    free_cells,
    radius_for,
    render,
)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _px(img, x: float, y: float) -> tuple[int, int, int]:
    return img.getpixel((int(x * img.size[0]), int(y * img.size[1])))


def test_plain_background_is_uniform_and_light():
    arr = np.asarray(background("plain", 32, _rng()))
    assert (arr == arr[0, 0]).all()
    assert arr.min() >= 190


@pytest.mark.parametrize("domain", ALL_DOMAINS)
def test_every_domain_renders_at_any_size(domain):
    for size in (16, 64, 100):
        img = background(domain, size, _rng(1))
        assert img.mode == "RGB" and img.size == (size, size)


def test_unknown_domain_and_degradation_are_named():
    with pytest.raises(ValueError, match="moon"):
        background("moon", 16, _rng())
    with pytest.raises(ValueError, match="smear"):
        degrade(background("plain", 16, _rng()), "smear", 1.0, _rng())


@pytest.mark.parametrize("shape", SHAPES)
def test_solid_shape_is_filled_with_its_colour(shape):
    obj = Obj(shape, "red", "large", "solid", x=0.5, y=0.5, r=0.3)
    img = render(Scene((obj,), "plain"), 64, _rng())
    assert _px(img, 0.5, 0.5) == COLOUR_RGB["red"]
    assert _px(img, 0.03, 0.03) != COLOUR_RGB["red"]


def test_outlined_shape_is_hollow_and_striped_is_mixed():
    bg = _px(render(Scene((), "plain"), 64, _rng(5)), 0.5, 0.5)
    hollow = render(Scene((Obj("square", "blue", fill="outlined", r=0.3),), "plain"), 64, _rng(5))
    assert _px(hollow, 0.5, 0.5) == bg
    assert _px(hollow, 0.5, 0.5 - 0.8 * 0.3 + 0.01) == COLOUR_RGB["blue"]
    striped = render(Scene((Obj("square", "green", fill="striped", r=0.3),), "plain"), 64, _rng(5))
    inside = np.asarray(striped)[24:40, 24:40].reshape(-1, 3)
    colours = {tuple(p) for p in inside}
    assert COLOUR_RGB["green"] in colours and bg in colours


def test_broken_and_faded_states():
    whole = render(Scene((Obj("circle", "red", r=0.3),), "plain"), 64, _rng(2))
    broken = render(Scene((Obj("circle", "red", r=0.3, state="broken"),), "plain"), 64, _rng(2))
    faded = render(Scene((Obj("circle", "red", r=0.3, state="faded"),), "plain"), 64, _rng(2))
    red = np.array(COLOUR_RGB["red"])
    count = lambda im: int((np.asarray(im) == red).all(axis=2).sum())  # noqa: E731
    assert 0 < count(broken) < count(whole)
    assert count(faded) == 0
    assert np.asarray(faded)[32, 32].mean() > red.mean()


def test_occluder_is_grey_and_label_is_drawn():
    obj = Obj("circle", "red", x=0.5, y=0.5, r=0.2, label="3")
    img = render(Scene((obj,), "plain", occluders=((0.4, 0.4, 0.6, 0.6),)), 64, _rng())
    assert _px(img, 0.5, 0.5) == (128, 128, 128)
    label_area = np.asarray(img)[26:38, 47:60]
    assert (label_area < 40).all(axis=2).any()  # dark digit pixels right of the shape


def test_bars_reach_their_values():
    img = render(Scene(bars=(("red", 3), ("blue", 8)), domain="plain"), 100, _rng())
    x0, y0, x1, y1 = (v * 100 for v in BAR_AREA)
    unit = (y1 - y0) / 10
    slot = (x1 - x0) / 2
    red_x, blue_x = int(x0 + 0.5 * slot), int(x0 + 1.5 * slot)
    assert img.getpixel((red_x, int(y1 - 2.5 * unit))) == COLOUR_RGB["red"]
    assert img.getpixel((red_x, int(y1 - 3.5 * unit))) != COLOUR_RGB["red"]
    assert img.getpixel((blue_x, int(y1 - 7.5 * unit))) == COLOUR_RGB["blue"]
    assert img.getpixel((blue_x, int(y1 - 8.5 * unit))) != COLOUR_RGB["blue"]


def test_degradations_move_the_statistics_the_right_way():
    scene = Scene((Obj("star", "purple", r=0.3),), "plain")
    clean = np.asarray(render(scene, 64, _rng(4)), dtype=float)

    def with_effect(kind, strength):
        return np.asarray(
            render(Scene(scene.objects, "plain", effects=((kind, strength),)), 64, _rng(4)),
            dtype=float,
        )

    assert with_effect("dark", 0.5).mean() < clean.mean()
    assert with_effect("bright", 0.5).mean() > clean.mean()
    assert with_effect("contrast", 0.8).std() < clean.std()
    assert (
        np.abs(np.diff(with_effect("blur", 2.0), axis=1)).mean()
        < np.abs(np.diff(clean, axis=1)).mean()
    )
    assert with_effect("noise", 30.0).std() > clean.std()
    pix = with_effect("pixelate", 8)
    assert (pix[:, 0::8] == pix[:, 1::8]).all()


def test_shared_background_seed_gives_identical_backgrounds():
    a = render(Scene((Obj("circle", "red", x=0.2, y=0.2),), "noise", bg_seed=7), 64, _rng(1))
    b = render(Scene((Obj("square", "blue", x=0.8, y=0.8),), "noise", bg_seed=7), 64, _rng(2))
    assert np.array_equal(np.asarray(a)[28:36, 28:36], np.asarray(b)[28:36, 28:36])
    c = render(Scene((), "noise"), 64, _rng(1))
    d = render(Scene((), "noise"), 64, _rng(2))
    assert not np.array_equal(np.asarray(c), np.asarray(d))


def test_arrange_uses_distinct_cells_and_nominal_sizes():
    objs = [Obj(s, "red", size="small" if i % 2 else "large") for i, s in enumerate(SHAPES)]
    placed = arrange(_rng(3), objs)
    assert len({o.cell() for o in placed}) == len(objs)
    for o in placed:
        assert abs(o.r / radius_for(o.size) - 1) <= 0.08 + 1e-9
    assert len(free_cells(placed)) == 9 - len(objs)
    with pytest.raises(ValueError, match="cells"):
        arrange(_rng(), objs[:2], cells=[0])
