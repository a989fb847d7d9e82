"""The gold answers are right: recomputed from each sample's recorded scenes (``meta``)."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

from drake.synth import generate_sample
from drake.synth.common import (
    EDIT_KINDS,
    Ctx,
    apply_edit,
    random_edit,
    random_objects,
    relation_holds,
)
from drake.synth.knobs import Knobs
from drake.synth.reasoning import FIGURES, HOI_RELATIONS, relation_objects
from drake.synth.relation import query_reference
from drake.synth.scene import COLOURS, CORNERS, FILLS, POSITIONS, RADIUS, SHAPES, Obj, arrange
from drake.synth.text import plural
from drake.synth.vqa import DISHES, LAYOUTS, REGION_SHAPES

_SUMMARY = re.compile(
    r"^(?P<size>\w+) (?P<colour>\w+) (?P<fill>\w+) (?P<shape>\w+)@(?P<x>[\d.-]+),(?P<y>[\d.-]+)"
    r"(?:\[(?P<state>\w+)\])?(?:#(?P<label>\d+))?$"
)
N = 40
SINGULAR = {plural(s): s for s in SHAPES}


def _objects(scene: dict) -> list[Obj]:
    out = []
    for text in scene["objects"]:
        m = _SUMMARY.match(text)
        assert m, text
        out.append(
            Obj(
                m["shape"],
                m["colour"],
                m["size"],
                m["fill"],
                x=float(m["x"]),
                y=float(m["y"]),
                state=m["state"] or "",
                label=m["label"] or "",
            )
        )
    return out


def _samples(task_id: str, n: int = N):
    for i in range(n):
        s = generate_sample(task_id, "train", i, seed=5, image_size=16)
        yield s, json.loads(s["meta"])


def _truth(s) -> bool:
    return s["answer"] in ("True", "Yes", "Positive")


def test_colour_count():
    for s, meta in _samples("synth-colour-count"):
        colour = meta["colour"]
        total = sum(o.colour == colour for sc in meta["scenes"] for o in _objects(sc))
        assert s["answer"] == str(total)


def test_spatial_caption():
    pattern = re.compile(
        r"The (\w+) (\w+) is (to the left of|to the right of|above|below) the (\w+) (\w+)\."
    )
    rel_of = {
        "to the left of": "left of",
        "to the right of": "right of",
        "above": "above",
        "below": "below",
    }
    for s, meta in _samples("synth-spatial"):
        c1, s1, rel, c2, s2 = pattern.match(meta["caption"]).groups()
        objs = {(o.colour, o.shape): o for o in _objects(meta["scenes"][0])}
        assert relation_holds(objs[(c1, s1)], objs[(c2, s2)], rel_of[rel]) == _truth(s)


def test_pair_count_statements():
    for s, meta in _samples("synth-pair-count"):
        statement = meta["statement"]
        left, right = (_objects(sc) for sc in meta["scenes"])
        m = re.match(r"The left image contains (more|fewer) (\w+) than", statement)
        if statement.startswith("The right image contains more objects"):
            truth = len(right) > len(left)
        elif m:
            shape = SINGULAR[m.group(2)]
            nl, nr = (sum(o.shape == shape for o in side) for side in (left, right))
            truth = nl > nr if m.group(1) == "more" else nl < nr
        else:
            things = re.match(
                r"The two images contain the same number of (\w+)\.", statement
            ).group(1)
            shape = SINGULAR[things]
            truth = sum(o.shape == shape for o in left) == sum(o.shape == shape for o in right)
        assert truth == _truth(s), statement


@pytest.mark.parametrize("task_id", ["synth-count-easy", "synth-count-open"])
def test_counts(task_id):
    for s, meta in _samples(task_id):
        shape = SINGULAR[re.search(r"(?:How many|there are _) (\w+)", s["prompt"]).group(1)]
        assert s["answer"] == str(sum(o.shape == shape for o in _objects(meta["scenes"][0])))


def test_bar_chart_questions():
    for s, meta in _samples("synth-bar-chart", 60):
        bars = dict(meta["scenes"][0]["bars"])
        q = s["prompt"]
        if "tallest" in q:
            assert bars[s["answer"]] == max(bars.values())
        elif "shortest" in q:
            assert bars[s["answer"]] == min(bars.values())
        elif "value of the" in q:
            colour = re.search(r"value of the (\w+) bar", q).group(1)
            assert s["answer"] == str(bars[colour])
        elif "taller than" in q:
            a, b = re.search(r"Is the (\w+) bar taller than the (\w+) bar", q).groups()
            assert (bars[a] > bars[b]) == (s["answer"] == "Yes")
        else:
            assert s["answer"] == str(len(bars))


@pytest.mark.parametrize("task_id", ["synth-quality-pair", "synth-quality-triple"])
def test_quality_winner_has_the_extreme_level(task_id):
    names = ["First image", "Second image", "Third image"]
    for s, meta in _samples(task_id):
        levels = meta["levels"]
        winner = levels[names.index(s["answer"])]
        lowest = any(
            w in meta["question"]
            for w in ("sharper", "sharpest", "brighter", "less noise", "better", "best")
        )
        assert winner == (min(levels) if lowest else max(levels)), meta["question"]


def test_shape_fact_corner_questions():
    for s, meta in _samples("synth-shape-facts", 60):
        if meta["family"] != "corners":
            continue
        (obj,) = _objects(meta["scenes"][0])
        letter_line = re.search(rf"^{s['answer']}\. (\d+)$", s["prompt"], re.M)
        assert int(letter_line.group(1)) == CORNERS[obj.shape]


def test_instance_position_questions():
    for s, meta in _samples("synth-instance-attr", 60):
        if meta["family"] != "where":
            continue
        colour, shape = re.search(r"Where is the (\w+) (\w+)\?", s["prompt"]).groups()
        (obj,) = [o for o in _objects(meta["scenes"][0]) if (o.colour, o.shape) == (colour, shape)]
        assert (
            re.search(rf"^{s['answer']}\. (.+)$", s["prompt"], re.M).group(1)
            == POSITIONS[obj.cell()]
        )


@pytest.mark.parametrize(
    "task_id", ["synth-idiom-image", "synth-metaphor-image", "synth-figurative-tf"]
)
def test_figures_hold_exactly_in_the_gold_images(task_id):
    figures = {f.name: f for f in FIGURES}
    for s, meta in _samples(task_id):
        fig = figures[meta["figure"]]
        holds = [fig.holds(_objects(sc)) for sc in meta["scenes"]]
        if task_id == "synth-figurative-tf":
            assert holds == [_truth(s)]
        else:
            assert holds == [c == s["answer"] for c in s["choices"]]


def test_phrase_for_image_options_other_than_gold_do_not_hold():
    for s, meta in _samples("synth-phrase-for-image"):
        objs = _objects(meta["scenes"][0])
        kind = meta["kind"]
        for option in s["choices"]:
            (fig,) = [f for f in FIGURES if f.text(kind) == option]
            assert fig.holds(objs) == (option == s["answer"])


def _relation_of(objs: list[Obj]) -> str:
    thing, actor = objs
    dx, dy = actor.x - thing.x, actor.y - thing.y
    if abs(dx) < 0.05 and abs(dy) < 0.05:
        return "inside"
    if abs(dx) > 0.3 and abs(dy) > 0.3:
        return "far from"
    if abs(dy) > abs(dx):
        return "above" if dy < 0 else "below"
    return "left of" if dx < 0 else "right of"


def test_query_reference_description_and_item_size():
    """Gold: every claimed value is the query item's and none is the reference item's. Both
    items have a large shape's radius (drawn larger, their shape and fill were not read)."""
    kind = {**{c: "colour" for c in COLOURS}, **{f: "fill" for f in FILLS},
            **{s: "shape" for s in SHAPES}}
    for s, meta in _samples("synth-query-reference"):
        query, ref = (_objects(sc)[0] for sc in meta["scenes"])
        claims = [re.sub(r"^is (an? )?", "", part)
                  for part in re.split(r", and |, | and ", meta["description"])]
        assert sorted(kind[c] for c in claims) == sorted(meta["changed"])
        holds = all(getattr(query, kind[c]) == c != getattr(ref, kind[c]) for c in claims)
        assert holds == _truth(s), meta["description"]
    for k in range(20):
        ctx = Ctx(np.random.default_rng(k), Knobs(objects=(1, 2)), ("plain",))
        for scene in query_reference(ctx).scenes:
            item = scene.objects[0]
            assert 0.92 * RADIUS["large"] <= item.r <= 1.08 * RADIUS["large"]


def test_relation_layouts_are_recognisable():
    for k, rel in enumerate(HOI_RELATIONS * 10):
        objs = list(relation_objects(np.random.default_rng(k), rel))
        assert _relation_of(objs) == rel
        for o in objs:
            assert o.r <= o.x <= 1 - o.r and o.r <= o.y <= 1 - o.r


def test_relation_query_and_odd_one():
    for s, meta in _samples("synth-relation-query"):
        rels = [_relation_of(_objects(sc)) for sc in meta["scenes"]]
        assert rels[:3] == [meta["relation"]] * 3
        assert meta["relation"] not in rels[3:6]
        assert (rels[6] == meta["relation"]) == _truth(s)
    for s, meta in _samples("synth-odd-relation"):
        rels = [_relation_of(_objects(sc)) for sc in meta["scenes"]]
        odd = [c for c, r in zip(s["choices"], rels) if r != meta["relation"]]
        assert odd == [s["answer"]]


def test_dish_answer_ids_name_the_drawn_dish():
    for task_id in ("synth-dish-name", "synth-dish-context", "synth-dish-misleading"):
        for s, meta in _samples(task_id, 20):
            line = re.search(rf"^{s['answer']}\. (.+)$", s["prompt"], re.M).group(1)
            assert line == meta["dish"]
    regions = {d.name: d.region for d in DISHES}
    for s, meta in _samples("synth-dish-region", 20):
        line = re.search(rf"^{s['answer']}\. (.+)$", s["prompt"], re.M).group(1)
        assert line == regions[meta["dish"]]
    assert set(LAYOUTS) == set(regions.values())


def test_dish_look_names_it():
    """A dish's main part is large, in its region's shape, and its colour is the name's first
    word; the four dishes of a region differ in it, and so do the five options of a question."""
    for region in LAYOUTS:
        colours = [d.colour for d in DISHES if d.region == region]
        assert len(colours) == 4 and len(set(colours)) == 4, region
    for dish in DISHES:  # a misleading context always finds a region with two decoy colours
        same = [d for d in DISHES if d.region == dish.region and d is not dish]
        for pair in itertools.combinations(same, 2):
            taken = {d.colour for d in (dish, *pair)}
            assert any(sum(d.colour not in taken for d in DISHES if d.region == r) >= 2
                       for r in LAYOUTS if r != dish.region), (dish.name, pair)
    colour_of = {d.name: d.colour for d in DISHES}
    for task_id in ("synth-dish-name", "synth-dish-context", "synth-dish-misleading"):
        for s, meta in _samples(task_id, 30):
            names = re.findall(r"^\d\. (.+)$", s["prompt"], re.M)
            assert len(names) == 5 and len({colour_of[n] for n in names}) == 5, s["prompt"]
            assert all(n.split()[0] == colour_of[n] for n in names)
            dish = next(d for d in DISHES if d.name == meta["dish"])
            main = [o for o in _objects(meta["scenes"][0]) if o.size == "large"]
            assert [(o.shape, o.colour) for o in main] == [(REGION_SHAPES[dish.region], dish.colour)]


def test_edit_direction_gold():
    for s, meta in _samples("synth-edit-direction"):
        a, b = (_objects(sc) for sc in meta["scenes"])
        (text,) = meta["edits"]
        if text.startswith("add "):
            assert (len(b) == len(a) + 1) == (s["answer"] == "A to B")
        elif text.startswith("remove "):
            assert (len(b) == len(a) - 1) == (s["answer"] == "A to B")


@pytest.mark.parametrize("kind", EDIT_KINDS)
def test_edits_change_what_their_text_says(kind):
    rng = np.random.default_rng(0)
    for _ in range(20):
        objs = arrange(rng, random_objects(rng, 3))
        edit = random_edit(rng, objs, kinds=(kind,))
        after = apply_edit(objs, edit)
        assert edit.kind == kind
        if kind == "add":
            assert len(after) == 4 and edit.text.startswith("add ")
        elif kind == "remove":
            assert len(after) == 2 and objs[edit.target] not in after
        else:
            assert len(after) == 3 and after[edit.target] != objs[edit.target]
            assert objs[edit.target].describe() in edit.text
        assert len({o.key() for o in after}) == len(after)


@pytest.mark.parametrize("task_id", ["synth-caption-match", "synth-caption-match-ood"])
def test_caption_match_gold_is_the_only_fit(task_id):
    pattern = re.compile(
        r"^An? (\w+ \w+ \w+ \w+)(?: (to the left of|to the right of|above|below) "
        r"an? (\w+ \w+ \w+ \w+))?\.?$"
    )
    rel_of = {
        "to the left of": "left of",
        "to the right of": "right of",
        "above": "above",
        "below": "below",
    }
    for s, meta in _samples(task_id, 20):
        first, rel, second = pattern.match(meta["caption"]).groups()
        wanted = [first] + ([second] if second else [])
        fits = []
        for sc in meta["scenes"]:
            objs = _objects(sc)
            same = [f"{o.size} {o.colour} {o.fill} {o.shape}" for o in objs] == wanted
            fits.append(same and (rel is None or relation_holds(objs[0], objs[1], rel_of[rel])))
        assert fits == [c == s["answer"] for c in s["choices"]]


def test_near_misses_follow_closeness():
    ctx_far = Ctx(np.random.default_rng(1), Knobs(closeness=0.0), ("plain",))
    ctx_near = Ctx(np.random.default_rng(1), Knobs(closeness=1.0), ("plain",))
    assert not any(ctx_far.near() for _ in range(50))
    assert all(ctx_near.near() for _ in range(50))


def test_knob_override_changes_the_scene_clutter():
    few = generate_sample("synth-spatial", "train", 0, 1, knobs=Knobs(objects=(2, 2)))
    many = generate_sample("synth-spatial", "train", 0, 1, knobs=Knobs(objects=(6, 6)))
    assert len(json.loads(few["meta"])["scenes"][0]["objects"]) == 2
    assert len(json.loads(many["meta"])["scenes"][0]["objects"]) == 6


def test_common_concept_gold_in_all_images_distractors_missing_somewhere():
    for s, meta in _samples("synth-common-concept"):
        lists = [_objects(sc) for sc in meta["scenes"]]

        def holds(phrase: str, objs: list[Obj]) -> bool:
            m = re.fullmatch(r"exactly (\d+) objects", phrase)
            if m:
                return len(objs) == int(m.group(1))
            words = phrase.split()[1:]  # drop the article
            if words[-1] == "object":
                return any(o.colour == words[0] for o in objs)
            if len(words) == 2:
                return any((o.colour, o.shape) == tuple(words) for o in objs)
            return any(o.shape == words[0] for o in objs)

        for option in s["choices"]:
            shown = [holds(option, objs) for objs in lists]
            assert all(shown) == (option == s["answer"]), (option, shown)
