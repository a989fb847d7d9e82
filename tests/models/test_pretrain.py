"""`drake models pretrain` on a micro budget: determinism, cache layout, safetensors only."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

from drake.models import load_model, pretrain
from drake.models.pretrain import pretrain_vision, public_tasks

MICRO = {"steps": 3, "batch_size": 2, "train_size": 8, "eval_size": 4}
VISION = {"steps": 3, "batch_size": 2, "pictures": 6, "eval_pictures": 6}
PACKAGE = Path(__file__).resolve().parents[2] / "drake" / "models"


@pytest.fixture(scope="module")
def vision_root(tmp_path_factory):
    """A model cache holding a (micro-budget) stage-1 vision tower."""
    root = tmp_path_factory.mktemp("cache")
    pretrain_vision(out_dir=root, seed=1, **VISION)
    return root


def _with_vision(vision_root: Path, root: Path) -> Path:
    shutil.copytree(vision_root / "tiny-vision", root / "tiny-vision")
    return root


@pytest.fixture(scope="module")
def two_runs(vision_root, tmp_path_factory):
    a = pretrain("tiny-llava-llama", out_dir=vision_root, seed=1, **MICRO)
    root_b = _with_vision(vision_root, tmp_path_factory.mktemp("b"))
    b = pretrain("tiny-llava-llama", out_dir=root_b, seed=1, **MICRO)
    return a, b


def test_public_split_tasks():
    from drake.synth import SYNTH_TASKS

    tasks = public_tasks()
    assert tasks and all(SYNTH_TASKS[t].group == "public" for t in tasks)


def test_same_seed_same_weight_bytes(two_runs):
    a, b = two_runs
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()


def test_other_seed_other_weights(two_runs, vision_root, tmp_path):
    c = pretrain("tiny-llava-llama", out_dir=_with_vision(vision_root, tmp_path), seed=2, **MICRO)
    assert (c / "model.safetensors").read_bytes() != (two_runs[0] / "model.safetensors").read_bytes()


def test_cache_layout_and_report(two_runs):
    folder = two_runs[0]
    assert folder.name == "tiny-llava-llama"
    files = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "pretrain_report.json"} <= files
    assert not any(re.search(r"\.(bin|pt|pth|pkl|pickle|ckpt)$", f) for f in files)
    assert not any(p.name.startswith(".") for p in folder.parent.iterdir())  # no staging left
    report = json.loads((folder / "pretrain_report.json").read_text())
    assert report["steps"] == 3 and report["seed"] == 1 and report["model"] == "tiny-llava-llama"
    assert report["train_samples"] == 8 and report["eval_samples"] == 4
    assert report["device"].startswith("cpu")
    # the CPU type decides the float kernels, so the report names it beside the versions
    assert report["machine"]["cpu"] and report["machine"]["cpu_capability"]
    assert set(report["versions"]) >= {"torch", "transformers", "numpy"}
    assert report["final_loss"] > 0 and len(report["loss_curve"]) >= 1
    for key in ("accuracy_before", "accuracy_after"):
        acc = report[key]
        assert set(acc) > {"mean"} and all(0 <= v <= 1 for v in acc.values())
    vision = folder.parent / "tiny-vision" / "vision.safetensors"
    assert report["vision_sha256"] == hashlib.sha256(vision.read_bytes()).hexdigest()
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        assert any("language_model" in k for k in handle.keys())


def test_load_model_finds_the_cached_weights(two_runs):
    folder = two_runs[0]
    bundle = load_model("tiny-llava-llama", cache_dir=folder.parent)
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        saved = {k: handle.get_tensor(k) for k in handle.keys()}
    # transformers renames some checkpoint keys on load (Swin's attention), so match by value
    params = list(bundle.model.state_dict().values())
    for key, value in saved.items():
        assert any(p.shape == value.shape and torch.equal(p, value) for p in params), key
    assert len(bundle.tokenizer) == bundle.model.config.text_config.vocab_size


def test_stage_two_loads_the_vision_tower_and_keeps_it_frozen(two_runs, vision_root):
    from safetensors.torch import load_file

    tower = load_file(str(vision_root / "tiny-vision" / "vision.safetensors"))
    loaded = load_model("tiny-llava-llama", cache_dir=two_runs[0].parent).model
    assert set(tower) == set(loaded.model.vision_tower.state_dict())
    for key, value in loaded.model.vision_tower.state_dict().items():
        assert torch.equal(tower[key], value), key
    report = json.loads((vision_root / "tiny-vision" / "pretrain_report.json").read_text())
    assert report["stage"] == "vision" and report["pictures"] == 6
    assert {"colour", "shape", "fill", "count"} <= set(report["held_out_accuracy"])


@pytest.mark.parametrize("device, message", [
    ("meta", "'cpu' or a CUDA device"), ("not a device", "not a torch device"),
    ("cuda:3", "0 CUDA device"),
])
def test_device_is_checked_before_any_work(tmp_path, monkeypatch, device, message):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(ValueError, match=message):
        pretrain("tiny-llava-llama", out_dir=tmp_path, device=device, **MICRO)
    with pytest.raises(ValueError, match=message):
        pretrain_vision(out_dir=tmp_path, device=device, **VISION)
    assert not any(tmp_path.iterdir())


def test_stage_two_needs_stage_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="vision tower"):
        pretrain("tiny-llava-llama", out_dir=tmp_path, **MICRO)


def test_real_backbones_are_not_pretrained_here(tmp_path):
    with pytest.raises(ValueError, match="tiny models only"):
        pretrain("llama3.2-1b-vl", out_dir=tmp_path, **MICRO)
    with pytest.raises(ValueError, match="steps"):
        pretrain("tiny-llava-llama", out_dir=tmp_path, steps=0)


def test_no_pickle_in_the_model_zoo():
    for source in PACKAGE.glob("*.py"):
        text = source.read_text()
        assert "import pickle" not in text and "pickle." not in text, source
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, (source, call)


def test_language_loss_is_answer_ce_plus_grounding(vision_root):
    """The stage-2 loss by hand: cross-entropy of the answer tokens through the LLaVA forward,
    plus the mean cross-entropy of each image token's four object words."""
    import torch.nn.functional as F

    from drake.models.pretrain import (
        GROUNDING_WEIGHT,
        _Features,
        _language_loss,
        _picture_inputs,
        public_samples,
    )

    bundle = load_model("tiny-llava-llama", pretrained=False, seed=3)
    samples = public_samples("synth-public-open", "public", 3, seed=0)
    feats = _Features(bundle, _picture_inputs(bundle, samples))
    items = [bundle._encode(s, answer=s["answer"], eos=True) for s in samples]
    f, w = feats.rows(range(3))
    got = _language_loss(bundle, [type(it)(it.ids, it.labels, []) for it in items], f, w)
    batch = bundle.collate(samples, train=True)
    model = bundle.model
    with torch.no_grad():
        out = model(**{k: v for k, v in batch.items() if k != "labels"})
        logits = out.logits[:, :-1]
        labels = batch["labels"][:, 1:]
        answer = F.cross_entropy(logits[labels != -100], labels[labels != -100])
        projected = model.model.multi_modal_projector(f).reshape(-1, bundle.hidden_size)
        targets = w.reshape(-1, 4)
        keep = targets[:, 0] != -100
        word_logits = model.get_output_embeddings()(projected[keep])
        grounding = sum(F.cross_entropy(word_logits, targets[keep][:, j]) for j in range(4)) / 4
    # features are kept in bfloat16, so the two forwards agree to bf16 precision
    assert abs(float(got) - float(answer + GROUNDING_WEIGHT * grounding)) < 2e-2
    assert bool(keep.any())


def test_easy_pool_caps_objects():
    from drake.models.pretrain import EASY_OBJECTS, _train_set

    easy, full = _train_set(seed=0, size=120)
    assert len(easy) + len(full) == 120 and easy
    assert {s["task"] for s in easy} == {s["task"] for s in full} == {
        "synth-public-open", "synth-public-multi", "synth-public-formats"}
    for sample in easy:
        meta = json.loads(sample["meta"])
        # multi_count caps the other shapes and adds the counted one on top
        cap = EASY_OBJECTS + (meta["family"] == "multi_count")
        for scene in meta["scenes"]:
            assert len(scene["objects"]) <= cap
    assert {json.loads(s["meta"])["family"] for s in easy} & {"where", "colour", "shape"}


def test_parallel_workers_give_the_same_weights(tmp_path):
    from drake.models.pretrain import pretrain_many

    seen = []
    folders = pretrain_many(["tiny-llava-llama", "tiny-llava-qwen"], workers=2,
                            out_dir=tmp_path / "par", seed=1, progress=lambda *a: seen.append(a),
                            vision_steps=3, vision_batch_size=2, vision_pictures=6,
                            vision_eval_pictures=6, lookup_steps=0, **{**MICRO, "steps": 10})
    folders.pop("tiny-vision")
    alone_root = _with_vision(tmp_path / "par", tmp_path / "alone")
    alone = pretrain("tiny-llava-llama", out_dir=alone_root, seed=1, **{**MICRO, "steps": 10})
    assert set(folders) == {"tiny-llava-llama", "tiny-llava-qwen"}
    assert ((folders["tiny-llava-llama"] / "model.safetensors").read_bytes()
            == (alone / "model.safetensors").read_bytes())
    assert {name for name, *_ in seen} == set(folders) | {"tiny-vision"}
    assert all(step <= total for _, step, total, _ in seen)


def test_fresh_streams_draw_every_sample_once_in_a_seeded_order():
    import importlib

    stage = importlib.import_module("drake.models.pretrain")
    full = stage._FreshStream(1, 0, None)
    ids = [s["id"] for s in full.take(30) + full.take(30)]
    assert len(set(ids)) == 60 and full.drawn == 60  # none drawn twice, across calls too
    again = stage._FreshStream(1, 0, None)
    assert [s["id"] for s in again.take(60)] == ids  # the same seed, the same order
    assert {s["task"] for s in again.take(60)} == set(stage.TASK_SHARES)  # every public task
    assert [s["id"] for s in stage._FreshStream(2, 0, None).take(60)] != ids
    # the full stream starts each task at index 0, where the fixed pool's full part starts
    first = {}
    for s in stage._FreshStream(1, 0, None).take(60):
        first.setdefault(s["task"], s["id"])
    assert {t: stage.public_samples(t, "public", 1, 1)[0]["id"] for t in first} == first
    # the easy stream: its own indices, drawn with the easy pool's object knob
    easy = stage._FreshStream(1, stage._EASY_START, (0, stage.EASY_OBJECTS)).take(40)
    assert not {s["id"] for s in easy} & set(ids)
    firsts = {}
    for s in easy:
        firsts.setdefault(s["task"], s)
    for task, s in firsts.items():
        knob = stage.public_samples(task, "public", 1, 1, start=stage._EASY_START,
                                    objects=(0, stage.EASY_OBJECTS))[0]
        assert (s["id"], s["prompt"], s["meta"]) == (knob["id"], knob["prompt"], knob["meta"])


@pytest.mark.parametrize("focus", ["label", "lookup"])
def test_focus_questions_are_fresh_public_questions_of_their_kind(focus):
    import importlib

    stage = importlib.import_module("drake.models.pretrain")
    task_id, key, kept, start = stage.FOCUS[focus]
    pseudo = stage._FOCUS_PREFIX + focus
    plain = stage._FreshStream(1, 0, None)
    # a share of 0 draws exactly what a stream without one draws
    assert stage._FreshStream(1, 0, None, 0.0, focus).plan(200) == plain.plan(200)
    stream = stage._FreshStream(1, 0, None, 0.5, focus)
    plan = stream.plan(400)
    picked = [index for task, index in plan if task == pseudo]
    assert picked == list(range(len(picked)))  # each block once, in order
    assert 170 <= len(picked) <= 230  # about half of 400 (binomial sd 10)
    assert {t for t, _ in plan} - {pseudo} == set(stage.TASK_SHARES)
    samples = stage._fresh_samples(1, None, plan[:60])
    drawn = [s for (task, _), s in zip(plan[:60], samples, strict=True) if task == pseudo]
    assert drawn and all(s["task"] == task_id for s in drawn)
    assert {stage._meta(s)[key] for s in drawn} <= set(kept)
    assert len({stage._meta(s)[key] for s in drawn}) > 1
    # focus question 0: the first kept question of its block, by a direct scan
    block = stage.public_samples(task_id, "public", stage._FOCUS_BLOCK, 1, start=start)
    first = next(s for s in block if stage._meta(s)[key] in kept)
    assert drawn[0]["id"] == first["id"] and drawn[0]["prompt"] == first["prompt"]
    # never a question the plain streams (full and easy) or another block draws
    plain_ids = {s["id"] for s in stage._FreshStream(1, 0, None).take(200)}
    easy_ids = {s["id"] for s in stage._FreshStream(
        1, stage._EASY_START, (0, stage.EASY_OBJECTS)).take(100)}
    ids = [s["id"] for s in drawn]
    assert len(set(ids)) == len(ids) and not set(ids) & (plain_ids | easy_ids)
    # the easy stream's focus questions: blocks of their own, made with its object knob
    knob = (0, stage.EASY_OBJECTS)
    easy = stage._FreshStream(1, stage._EASY_START, knob, 0.5, focus)
    task, index = next(p for p in easy.plan(20) if p[0] == pseudo)
    assert index == stage._EASY_START
    block = stage.public_samples(task_id, "public", stage._FOCUS_BLOCK, 1,
                                 start=start + index * stage._FOCUS_BLOCK, objects=knob)
    first = next(s for s in block if stage._meta(s)[key] in kept)
    made = stage._fresh_samples(1, knob, [(task, index)])[0]
    assert (made["id"], made["prompt"], made["meta"]) == (first["id"], first["prompt"],
                                                          first["meta"])


def test_focus_share_pretrain_reports_it_and_refuses_what_it_cannot_do(vision_root, tmp_path):
    focused = pretrain("tiny-llava-llama", out_dir=_with_vision(vision_root, tmp_path / "l"),
                       seed=1, fresh=True, focus_share=0.5, focus="lookup", **MICRO)
    plain = pretrain("tiny-llava-llama", out_dir=_with_vision(vision_root, tmp_path / "p"),
                     seed=1, fresh=True, **MICRO)
    reports = [json.loads((f / "pretrain_report.json").read_text()) for f in (focused, plain)]
    assert [r["focus"] for r in reports] == [{"share": 0.5, "kind": "lookup"},
                                             {"share": 0.0, "kind": "label"}]
    assert (focused / "model.safetensors").read_bytes() != (plain / "model.safetensors"
                                                            ).read_bytes()
    with pytest.raises(ValueError, match=r"focus_share=0.5 needs fresh samples \(--fresh-"):
        pretrain("tiny-llava-llama", out_dir=vision_root, focus_share=0.5, **MICRO)
    with pytest.raises(ValueError, match="unknown focus 'labels'; choose one of label, lookup"):
        pretrain("tiny-llava-llama", out_dir=vision_root, fresh=True, focus_share=0.5,
                 focus="labels", **MICRO)
    for bad in (1.0, -0.1, True, "0.5"):
        with pytest.raises(ValueError, match=r"focus_share must be a number in \[0, 1\)"):
            pretrain("tiny-llava-llama", out_dir=vision_root, fresh=True, focus_share=bad,
                     **MICRO)


def _tokens(bundle, ids):
    return bundle.tokenizer.convert_ids_to_tokens(list(ids))


def test_option_marks_name_the_answer_line_at_each_option_lines_end():
    import importlib

    stage = importlib.import_module("drake.models.pretrain")
    bundle = load_model("tiny-llava-llama", pretrained=False)
    image = np.zeros((8, 8, 3), dtype=np.uint8)
    lettered = {"id": "x", "images": [image], "answer": "B", "prompt": (
        "<image>\nQuestion: Which colour does the star have?\nA. red\nB. light blue\n"
        "C. green\nAnswer with the option's letter from the given choices directly.")}
    encoded = bundle._encode(lettered, answer="B", eos=True)
    marked = stage._mark_options(bundle, encoded, "B")
    tokens = _tokens(bundle, encoded.ids)
    # three option lines, each ending at the newline before the next line's first token
    lines = stage._option_lines(bundle, encoded.ids)
    assert [label for label, _ in lines] == ["A", "B", "C"]
    assert [tokens[end + 1] for _, end in lines] == ["B", "C", "Answer"]
    assert [tokens[end - 1] for _, end in lines] == ["\u2581red", "\u2581blue", "\u2581green"]
    # the hidden state at each line's end is trained on Yes (the answer's line) or No
    targets = {k - 1: _tokens(bundle, [t])[0] for k, t in enumerate(marked.labels)
               if t != -100}
    colon = len(encoded.ids) - 3  # "... ASSISTANT :" then the answer and </s>
    assert tokens[colon:] == [":", "\u2581B", "</s>"]
    assert targets == {lines[0][1]: "\u2581No", lines[1][1]: "\u2581Yes",
                       lines[2][1]: "\u2581No", colon: "\u2581B", colon + 1: "</s>"}
    assert marked.ids == encoded.ids and encoded.labels.count(-100) == len(encoded.ids) - 2
    # numbered options, numbers as options: only "<id>." at a line's start is a label
    numbered = {**lettered, "answer": "1", "prompt": (
        "<image>\nQuestion: How many stars are there?\n1. 3\n2. 1\n"
        "Print only the answer with a single answer id (1,2).")}
    encoded = bundle._encode(numbered, answer="1", eos=True)
    lines = stage._option_lines(bundle, encoded.ids)
    assert [label for label, _ in lines] == ["1", "2"]
    marked = stage._mark_options(bundle, encoded, "1")
    assert [_tokens(bundle, [marked.labels[end + 1]])[0] for _, end in lines] == [
        "\u2581Yes", "\u2581No"]
    # an answer that labels no option line (a choice list, an open question): no marks
    for prompt, answer in (("<image>\nQuestion: Which colour? Choose from: red, blue.", "red"),
                           ("<image>\nQuestion: How many stars?\nA. 2\nB. 3", "3")):
        sample = {**lettered, "prompt": prompt, "answer": answer}
        encoded = bundle._encode(sample, answer=answer, eos=True)
        assert stage._mark_options(bundle, encoded, answer).labels == encoded.labels


def test_mark_options_pretrain_reports_it_with_a_pool_and_fresh(vision_root, tmp_path):
    runs = {}
    for key, extra in (("pool", {}), ("fresh", {"fresh": True, "focus_share": 0.5})):
        runs[key] = pretrain("tiny-llava-llama", seed=1, mark_options=True,
                             out_dir=_with_vision(vision_root, tmp_path / key), **extra, **MICRO)
    plain = pretrain("tiny-llava-llama", out_dir=_with_vision(vision_root, tmp_path / "plain"),
                     seed=1, fresh=True, focus_share=0.5, **MICRO)
    reports = {k: json.loads((f / "pretrain_report.json").read_text()) for k, f in runs.items()}
    assert all(r["mark_options"] is True for r in reports.values())
    assert (runs["fresh"] / "model.safetensors").read_bytes() != (
        plain / "model.safetensors").read_bytes()


def test_fresh_batches_made_ahead_by_workers_keep_the_planned_order():
    import importlib

    stage = importlib.import_module("drake.models.pretrain")
    bundle = load_model("tiny-llava-qwen", pretrained=False)

    def batches(workers: int) -> list:
        streams = (stage._FreshStream(3, stage._EASY_START, (0, stage.EASY_OBJECTS)),
                   stage._FreshStream(3, 0, None))
        return list(stage._fresh_batches(bundle, streams, [3, 0, 2, 3, 1, 0, 2], 3, workers,
                                         chunk=2))

    inline = batches(0)
    # each step: its easy count of easy samples, the rest from the full stream, encoded with
    # their answers as the pool is
    assert [len(easy[0]) for easy, _ in inline] == [3, 0, 2, 3, 1, 0, 2]
    assert all(len(easy[0]) + len(full[0]) == 3 for easy, full in inline)
    streams = (stage._FreshStream(3, stage._EASY_START, (0, stage.EASY_OBJECTS)),
               stage._FreshStream(3, 0, None))
    first = streams[0].take(3)
    assert [e.ids for e in inline[0][0][0]] == [
        bundle._encode(s, answer=s["answer"], eos=True).ids for s in first]
    pixels, words, offsets = inline[0][0][1]
    assert torch.equal(torch.cat(pixels), bundle._pixel_fn([im for s in first for im in s["images"]]))
    assert len(words) == offsets[-1] == sum(len(s["images"]) for s in first)
    # four chunks of two steps over two processes come back the same, in the planned order
    ahead = batches(2)
    for made, want in zip(ahead, inline, strict=True):
        for (enc, (pix, wrd, off)), (enc0, (pix0, wrd0, off0)) in zip(made, want, strict=True):
            assert [(e.ids, e.labels) for e in enc] == [(e.ids, e.labels) for e in enc0]
            assert len(pix) == len(pix0) and all(torch.equal(a, b) for a, b in zip(pix, pix0))
            assert torch.equal(wrd, wrd0) and list(off) == list(off0)


def test_fresh_samples_pretrain_is_seeded_and_reports_its_draws(vision_root, tmp_path):
    runs = [pretrain("tiny-llava-llama", out_dir=_with_vision(vision_root, tmp_path / k), seed=1,
                     fresh=True, **MICRO) for k in "ab"]
    assert all((r / "model.safetensors").read_bytes() == (runs[0] / "model.safetensors")
               .read_bytes() for r in runs)
    report = json.loads((runs[0] / "pretrain_report.json").read_text())
    assert report["fresh_samples"] is True
    # steps x batch new samples in all, the easy ones among them; --train-size is unused
    assert report["train_samples"] == MICRO["steps"] * MICRO["batch_size"] != MICRO["train_size"]
    assert 0 < report["easy_pool"]["samples"] <= report["train_samples"]
    # samples made ahead by worker processes: the same samples, so the same bytes
    ahead = pretrain("tiny-llava-llama", out_dir=_with_vision(vision_root, tmp_path / "w"),
                     seed=1, fresh=True, sample_workers=2, **{**MICRO, "steps": 5})
    inline = pretrain("tiny-llava-llama", out_dir=_with_vision(vision_root, tmp_path / "i"),
                      seed=1, fresh=True, **{**MICRO, "steps": 5})
    assert (ahead / "model.safetensors").read_bytes() == (inline / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="sample_workers must be an integer >= 0, got -1"):
        pretrain("tiny-llava-llama", out_dir=vision_root, fresh=True, sample_workers=-1, **MICRO)
    pooled = pretrain("tiny-llava-llama", out_dir=_with_vision(vision_root, tmp_path / "c"),
                      seed=1, **MICRO)
    assert json.loads((pooled / "pretrain_report.json").read_text())["fresh_samples"] is False
    assert (pooled / "model.safetensors").read_bytes() != (runs[0] / "model.safetensors"
                                                           ).read_bytes()


@pytest.mark.parametrize("fresh", [False, True], ids=["pooled", "fresh"])
def test_a_stopped_pretraining_resumes_to_the_same_bytes(vision_root, tmp_path, fresh, crash_at):
    """Killed after step 5 of 6 (its last checkpoint at step 4), the run resumes there when
    called again and ends with the bytes, losses and accuracy of a run that never stopped."""
    budget = {**MICRO, "steps": 6, "fresh": fresh, "checkpoint_every": 2}
    whole = pretrain("tiny-llava-qwen", out_dir=_with_vision(vision_root, tmp_path / "w"), seed=1,
                     **budget)
    root = _with_vision(vision_root, tmp_path / "r")
    with pytest.raises(crash_at.error):
        pretrain("tiny-llava-qwen", out_dir=root, seed=1, progress=crash_at(5), **budget)
    resume = root / ".tiny-llava-qwen.resume"
    state = json.loads((resume / "state.json").read_text())
    assert state["step"] == 4 and len(state["losses"]) == 4
    assert [p.name for p in resume.glob("*.safetensors")] == ["state-4.safetensors"]
    seen = []
    again = pretrain("tiny-llava-qwen", out_dir=root, seed=1,
                     progress=lambda s, t, v: seen.append(s), **budget)
    assert seen == [5, 6]  # the first four steps are not run again
    assert (again / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    got, want = (json.loads((f / "pretrain_report.json").read_text()) for f in (again, whole))
    assert [r["step"] for r in got.pop("resumed_at")] == [4] and want.pop("resumed_at") == []
    for report in (got, want):
        report.pop("wall_seconds")
    assert got == want
    assert not resume.exists()  # a finished run leaves no checkpoint


def test_a_stopped_vision_stage_resumes_to_the_same_bytes(vision_root, tmp_path, crash_at):
    """Stage 1 checkpoints too: killed after step 3 of 4 (checkpoint at step 2), it resumes
    there and writes the tower of the unbroken run (``vision_root``'s, the same arguments)."""
    with pytest.raises(crash_at.error):
        pretrain_vision(out_dir=tmp_path, seed=1, progress=crash_at(3), checkpoint_every=2,
                        **{**VISION, "steps": 4})
    state = json.loads((tmp_path / ".tiny-vision.resume" / "state.json").read_text())
    assert state["step"] == 2 and state["arguments"]["stage"] == "vision"
    whole = pretrain_vision(out_dir=tmp_path / "w", seed=1, checkpoint_every=2,
                            **{**VISION, "steps": 4})
    seen = []
    again = pretrain_vision(out_dir=tmp_path, seed=1, checkpoint_every=2,
                            progress=lambda s, t, v: seen.append(s), **{**VISION, "steps": 4})
    assert seen == [3, 4]
    assert ((again / "vision.safetensors").read_bytes()
            == (whole / "vision.safetensors").read_bytes())
    got, want = (json.loads((f / "pretrain_report.json").read_text()) for f in (again, whole))
    assert [r["step"] for r in got.pop("resumed_at")] == [2] and want.pop("resumed_at") == []
    for report in (got, want):
        report.pop("wall_seconds")
    assert got == want
    assert not (tmp_path / ".tiny-vision.resume").exists()
    # another budget does not resume that checkpoint: it is refused, naming the difference
    with pytest.raises(crash_at.error):
        pretrain_vision(out_dir=tmp_path / "x", seed=1, progress=crash_at(3),
                        checkpoint_every=2, **{**VISION, "steps": 4})
    with pytest.raises(ValueError, match=r"another pretraining run \(steps 4 there, 5 now\)"):
        pretrain_vision(out_dir=tmp_path / "x", seed=1, checkpoint_every=2,
                        **{**VISION, "steps": 5})


def test_a_checkpoint_of_other_arguments_is_refused(vision_root, tmp_path, crash_at):
    root = _with_vision(vision_root, tmp_path)
    budget = {**MICRO, "steps": 4, "checkpoint_every": 2}
    with pytest.raises(crash_at.error):
        pretrain("tiny-llava-llama", out_dir=root, seed=1, progress=crash_at(3), **budget)
    folder = root / ".tiny-llava-llama.resume"
    with pytest.raises(ValueError, match=r"another pretraining run \(lr 0\.001 there, 0\.002 now\)"
                       r".*rerun with its arguments.*delete .*tiny-llava-llama\.resume"):
        pretrain("tiny-llava-llama", out_dir=root, seed=1, lr=2e-3, **budget)
    (folder / "state.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"state\.json: unreadable pretraining checkpoint.*"
                                         r"delete .* to start over"):
        pretrain("tiny-llava-llama", out_dir=root, seed=1, **budget)
    with pytest.raises(ValueError, match="checkpoint_every must be an integer >= 0, got -1"):
        pretrain("tiny-llava-llama", out_dir=root, seed=1, **{**budget, "checkpoint_every": -1})
