"""Stage 3 of `drake models pretrain`: the look-up taught with a pointer loss on attention."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from drake.models.bundle import IGNORE_INDEX, _Encoded
from drake.models.errors import ModelNotPretrained
from drake.models.lookup_pretrain import (
    LOOKUP_STAGE,
    named_cells,
    pointer_loss,
    pretrain_lookup,
)
from drake.models.pretrain import pretrain, pretrain_many, pretrain_vision, train_family

MICRO = {"steps": 2, "batch_size": 2, "train_size": 6, "eval_size": 0}
LOOKUP = {"steps": 3, "batch_size": 4, "eval_size": 4, "seed": 1}


def _sample(task: str, family: str, prompt: str, *objects: str) -> dict:
    meta = {"family": family, "scenes": [{"domain": "plain", "objects": list(objects)}]}
    return {"id": f"{task}-public-000007", "prompt": f"<image>\n{prompt}",
            "meta": json.dumps(meta), "images": [None]}


def test_named_cells_are_the_cells_of_the_objects_the_question_names():
    scene = ("large blue striped hexagon@0.18,0.51",   # column 0, row 1: cell 3
             "small green outlined circle@0.51,0.16",  # column 1, row 0: cell 1
             "small cyan striped triangle@0.14,0.17",  # cell 0
             "small orange solid star@0.82,0.86")      # column 2, row 2: cell 8
    open_task = "synth-public-open"
    assert named_cells(_sample(open_task, "colour", "Tell me the colour of the hexagon.",
                               *scene)) == (3,)
    assert named_cells(_sample(open_task, "shape", "Tell me the shape that is orange.",
                               *scene)) == (8,)
    assert named_cells(_sample(open_task, "tags", "Tell me the tag of the cyan triangle.",
                               *scene)) == (0,)
    # a colour and a shape must both match: the green circle, not the cyan triangle
    assert named_cells(_sample(open_task, "where", "Tell me where the green circle sits.",
                               *scene, "small green striped triangle@0.5,0.5")) == (1,)
    # named by neither, another family, another task, or two pictures: no target
    assert named_cells(_sample(open_task, "tags", "Tell me the shape with tag 3.", *scene)) == ()
    assert named_cells(_sample(open_task, "count", "Tell me the number of blue shapes.",
                               *scene)) == ()
    assert named_cells(_sample("synth-public-formats", "colour",
                               "Tell me the colour of the hexagon.", *scene)) == ()
    two = _sample(open_task, "colour", "Tell me the colour of the hexagon.", *scene)
    meta = json.loads(two["meta"])
    two["meta"] = json.dumps({**meta, "scenes": meta["scenes"] * 2})
    assert named_cells(two) == ()


def test_named_cells_of_real_public_questions_hold_the_answer():
    """On generated look-ups, the named cells hold an object whose attribute is the answer."""
    from drake.models.pretrain import LOOKUP_FAMILIES, _meta, public_samples
    from drake.synth.scene import Scene

    checked = 0
    for sample in public_samples("synth-public-open", "public", 300, 0):
        meta = _meta(sample)
        if meta["family"] not in ("colour", "shape"):
            continue
        cells = named_cells(sample)
        scene = Scene.from_summary(meta["scenes"][0])
        assert cells, sample["id"]
        assert any(getattr(o, meta["family"]) == sample["answer"]
                   for o in scene.objects if o.cell() in cells), sample["id"]
        checked += 1
    assert checked > 30 and "colour" in LOOKUP_FAMILIES


def test_pointer_loss_is_minus_log_of_the_attention_on_the_named_cells():
    image = 5
    # positions: 0 text, 1-9 the nine image tokens, 10-11 the question, 12 the answer position,
    # 13 the answer
    ids = [1] + [image] * 9 + [2, 3, 4, 6]
    labels = [IGNORE_INDEX] * 13 + [6]
    items = [_Encoded(ids, labels, []), _Encoded(ids, labels, [])]
    layers = [torch.zeros(2, 2, 14, 14) for _ in range(3)]
    layers[1][0, 0, 12, 1 + 4] = 0.5   # item 0, head (1, 0): 0.5 on cell 4
    layers[1][0, 0, 12, 1 + 5] = 0.25  # and 0.25 on cell 5
    layers[2][0, 1, 12, 1 + 4] = 0.8
    layers[2][0, 1, 12, 1 + 5] = 0.1
    layers[1][0, 1, 12, 1 + 4] = 0.9   # a head not supervised
    loss = pointer_loss(layers, items, [(4, 5), ()], image, [(1, 0), (2, 1)])
    assert float(loss) == pytest.approx(-(math.log(0.75 + 1e-6) + math.log(0.9 + 1e-6)) / 2)
    assert pointer_loss(layers, items, [(), ()], image, [(1, 0)]) is None


@pytest.fixture(scope="module")
def stage2_root(tmp_path_factory):
    """A model cache with a micro stage 1 and micro stage-2 weights of tiny-llava-llama."""
    root = tmp_path_factory.mktemp("stage2")
    pretrain_vision(out_dir=root, seed=1, steps=2, batch_size=2, pictures=4, eval_pictures=4)
    pretrain("tiny-llava-llama", out_dir=root, seed=1, **MICRO)
    return root


def _copy(root, to):
    shutil.copytree(root, to)
    return to


def test_the_stage_is_seeded_reported_and_refuses_a_second_pass(stage2_root, tmp_path):
    before = json.loads((stage2_root / "tiny-llava-llama" / "pretrain_report.json").read_text())
    a = pretrain_lookup("tiny-llava-llama", out_dir=_copy(stage2_root, tmp_path / "a"), **LOOKUP)
    b = pretrain_lookup("tiny-llava-llama", out_dir=_copy(stage2_root, tmp_path / "b"), **LOOKUP)
    weights = (a / "model.safetensors").read_bytes()
    assert weights == (b / "model.safetensors").read_bytes()
    assert weights != (stage2_root / "tiny-llava-llama" / "model.safetensors").read_bytes()
    report = json.loads((a / "pretrain_report.json").read_text())
    stage = report.pop(LOOKUP_STAGE)
    assert report.pop("weights_sha256") != before.pop("weights_sha256")
    assert report == before  # stage 2's record stays as it was
    assert stage["steps"] == 3 and stage["train_samples"] == 12 and stage["seed"] == 1
    assert stage["pointer_heads"] == [[1, 0], [2, 1]] and stage["lookup_share"] == 0.5
    assert stage["from_weights_sha256"] != json.loads(
        (a / "pretrain_report.json").read_text())["weights_sha256"]
    assert set(stage["accuracy_after"]) > {"mean"} and len(stage["loss_curve"]) == 3
    assert not any(p.name.startswith(".") for p in a.parent.iterdir())  # no staging left
    with pytest.raises(ValueError, match=r"already went through the look-up stage.*"
                                         r"drake models pretrain --model tiny-llava-llama"):
        pretrain_lookup("tiny-llava-llama", out_dir=tmp_path / "a", **LOOKUP)


def test_the_stage_needs_stage_two_weights_and_good_arguments(tmp_path, stage2_root):
    with pytest.raises(ModelNotPretrained, match=r"no stage-2 weights in .*empty.*drake models "
                                                 r"pretrain --model tiny-llava-qwen --cache-dir"):
        pretrain_lookup("tiny-llava-qwen", out_dir=tmp_path / "empty", **LOOKUP)
    with pytest.raises(ValueError, match="share must be in"):
        pretrain_lookup("tiny-llava-llama", out_dir=stage2_root, **{**LOOKUP, "share": 0.0})
    with pytest.raises(ValueError, match="not 'tiny-clip'"):
        pretrain_lookup("tiny-clip", out_dir=stage2_root, **LOOKUP)


def test_a_stopped_stage_resumes_to_the_same_bytes(stage2_root, tmp_path, crash_at):
    budget = {**LOOKUP, "steps": 4, "checkpoint_every": 2}
    whole = pretrain_lookup("tiny-llava-llama", out_dir=_copy(stage2_root, tmp_path / "w"),
                            **budget)
    root = _copy(stage2_root, tmp_path / "r")


    with pytest.raises(crash_at.error):
        pretrain_lookup("tiny-llava-llama", out_dir=root, progress=crash_at(3), **budget)
    state = json.loads((root / ".tiny-llava-llama.lookup-resume" / "state.json").read_text())
    assert state["step"] == 2 and state["arguments"]["stage"] == "lookup"
    seen = []
    again = pretrain_lookup("tiny-llava-llama", out_dir=root,
                            progress=lambda s, t, v: seen.append(s), **budget)
    assert seen == [3, 4]
    assert (again / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    assert not (root / ".tiny-llava-llama.lookup-resume").exists()


def test_pretrain_many_runs_stage_three_after_stage_two_or_alone(stage2_root, tmp_path):
    """In worker processes, stage 2 then stage 3 gives the bytes of the two in this process;
    ``language=False`` runs stage 3 alone on the cached stage-2 weights."""
    root = tmp_path / "many"
    root.mkdir()
    shutil.copytree(stage2_root / "tiny-vision", root / "tiny-vision")
    seen = []
    folders = pretrain_many(["tiny-llava-llama", "tiny-llava-qwen"], workers=2, out_dir=root,
                            seed=1, vision=False, lookup_steps=2, label_steps=0,
                            progress=lambda *a: seen.append(a), **MICRO)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copytree(stage2_root / "tiny-vision", alone / "tiny-vision")
    one = train_family("tiny-llava-llama", out_dir=alone, seed=1, lookup_steps=2, label_steps=0,
                       **MICRO)
    assert ((folders["tiny-llava-llama"] / "model.safetensors").read_bytes()
            == (one / "model.safetensors").read_bytes())
    assert max(step for name, step, *_ in seen if name == "tiny-llava-qwen") == 4  # 2 + 2
    # stage 3 alone, on stage 2's cached weights: the same bytes again
    only = _copy(stage2_root, tmp_path / "only")
    got = pretrain_many(["tiny-llava-llama"], out_dir=only, seed=1, vision=False,
                        language=False, lookup_steps=2, label_steps=0, **MICRO)
    direct = pretrain_lookup("tiny-llava-llama", out_dir=_copy(stage2_root, tmp_path / "d"),
                             seed=1, steps=2, batch_size=2, eval_size=0)
    assert ((got["tiny-llava-llama"] / "model.safetensors").read_bytes()
            == (direct / "model.safetensors").read_bytes())
    with pytest.raises(ValueError, match="trains nothing"):
        pretrain_many(["tiny-llava-llama"], out_dir=only, vision=False, language=False,
                      lookup_steps=0)
