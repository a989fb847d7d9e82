"""Fixtures of the model-zoo tests: a small hand-made vocabulary, samples, tiny bundles and an
offline Hugging Face Hub cache."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from drake.models import load_model

VOCAB = [
    "What", "colour", "is", "the", "shape", "?", "red", "blue", "green", "circle", "square",
    "Image", "A", "B", "Choice", "list", "True", "False", "Your", "answer", "Which", "one",
    "has", "more", "shapes", ".", ",", ":", "[", "]",
]


#: the commit every snapshot of the test Hub caches claims to be
HUB_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def hub_snapshot_folder(hub: Path, repo_id: str) -> Path:
    """The snapshot folder of ``repo_id`` in the Hub cache ``hub``, laid out as huggingface_hub
    does (``models--owner--name/snapshots/<commit>``, ``refs/main`` naming the commit), for the
    caller to fill with a checkpoint."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / HUB_COMMIT
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(HUB_COMMIT)
    return snapshot


@pytest.fixture(scope="session")
def hub_snapshot():
    """``hub_snapshot(hub, repo_id)``: an empty snapshot folder of ``repo_id`` in Hub cache
    ``hub`` (:func:`hub_snapshot_folder`)."""
    return hub_snapshot_folder


class SimulatedCrash(Exception):
    """Raised by the callbacks of :func:`crash_at`: a pretraining run killed mid-stage."""


@pytest.fixture(scope="session")
def crash_at():
    """``crash_at(step)``: a pretraining ``progress`` callback that raises
    :class:`SimulatedCrash` once step ``step`` is done, as a run killed there would stop;
    ``crash_at.error`` is that class, for ``pytest.raises``."""
    def make(step: int):
        def progress(done: int, total: int, loss: float) -> None:
            if done == step:
                raise SimulatedCrash(f"killed after step {done}")
        return progress

    make.error = SimulatedCrash
    return make


@pytest.fixture()
def offline_hub(tmp_path, monkeypatch):
    """An empty Hub cache under ``tmp_path`` with ``HF_HUB_OFFLINE=1``."""
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hub


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny models run fastest on one thread (and do not stall on a busy machine)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def shape_image(colour: tuple[int, int, int], *, size: int = 64, box: int = 20) -> Image.Image:
    """A grey image with one filled square of ``colour``."""
    image = Image.new("RGB", (size, size), (230, 230, 230))
    ImageDraw.Draw(image).rectangle([size // 4, size // 4, size // 4 + box, size // 4 + box],
                                    fill=colour)
    return image


def png_dict(image: Image.Image) -> dict:
    """The ``{"bytes", "path"}`` form ``datasets`` returns for an image read from parquet."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return {"bytes": buffer.getvalue(), "path": None}


def make_sample(sid: str, prompt: str, images: list, answer: str, choices=()) -> dict:
    return {
        "id": sid, "task": "t", "images": list(images), "prompt": prompt, "answer": answer,
        "choices": list(choices), "answer_type": "multiple_choice" if choices else "open_ended",
        "label": -1, "domain": "", "meta": "{}",
    }


@pytest.fixture(scope="session")
def samples() -> list[dict]:
    """One single-image, one two-image and one text-only sample."""
    red, blue = shape_image((220, 20, 20)), shape_image((20, 20, 220))
    return [
        make_sample("one", "<image>\nWhat colour is the shape?", [red], "red",
                    ["red", "blue", "green"]),
        make_sample("two", "Image A:<image> Image B:<image>\nWhich one has more shapes?",
                    [red, png_dict(blue)], "Image A", ["Image A", "Image B"]),
        make_sample("zero", "Choice list:[True, False]. Your answer is:", [], "True",
                    ["True", "False"]),
    ]


@pytest.fixture(scope="session")
def llama_bundle():
    """A randomly initialised tiny-llava-llama (seed 0) on the hand-made vocabulary."""
    return load_model("tiny-llava-llama", pretrained=False, seed=0, vocab=VOCAB)


@pytest.fixture(scope="session")
def qwen_bundle():
    """A randomly initialised tiny-llava-qwen (seed 0) on the hand-made vocabulary."""
    return load_model("tiny-llava-qwen", pretrained=False, seed=0, vocab=VOCAB)


@pytest.fixture()
def fresh_llama():
    """A fresh tiny-llava-llama for tests that change weights or add adapters."""
    return load_model("tiny-llava-llama", pretrained=False, seed=0, vocab=VOCAB)


@pytest.fixture(scope="session")
def make_image():
    """``make_image(colour, size=64, box=20)``: a grey image with one coloured square."""
    return shape_image


@pytest.fixture(scope="session")
def as_parquet_image():
    """``as_parquet_image(image)``: the ``{"bytes", "path"}`` dict form of an image."""
    return png_dict


@pytest.fixture(scope="session")
def sample_factory():
    """``sample_factory(id, prompt, images, answer, choices=())``: a schema sample."""
    return make_sample


@pytest.fixture(scope="session")
def vocab() -> list[str]:
    """The hand-made vocabulary of the test models."""
    return list(VOCAB)


@pytest.fixture(scope="module")
def stage3_root(tmp_path_factory):
    """A model cache with micro stage-1, stage-2 and stage-3 weights of tiny-llava-llama (seed
    1), and a copy of the stage-2 weights beside it, in ``<name>-stage2``."""
    import shutil

    from drake.models.lookup_pretrain import pretrain_lookup
    from drake.models.pretrain import pretrain, pretrain_vision

    root = tmp_path_factory.mktemp("stage3")
    pretrain_vision(out_dir=root, seed=1, steps=2, batch_size=2, pictures=4, eval_pictures=4)
    pretrain("tiny-llava-llama", out_dir=root, seed=1, steps=2, batch_size=2, train_size=6,
             eval_size=0)
    shutil.copytree(root, root.parent / (root.name + "-stage2"))
    pretrain_lookup("tiny-llava-llama", out_dir=root, seed=1, steps=2, batch_size=2,
                    eval_size=0)
    return root
