"""The tiny models' vision tower, and what it is pretrained to see.

Both tiny families share one vision tower design: a Swin transformer (:data:`VISION_CONFIG`)
that turns a 48 x 48 picture into a 3 x 3 grid of features, one per cell of drake-synth's scene
grid. Each of them reaches the language model as one image token, so a picture costs 9 tokens
and a client task of eight pictures stays short.

Why Swin and not CLIP's ViT: shapes in drake-synth are a few pixels wide, and a ViT with 8-pixel
patches read the shape of an object at 0.3-0.4 even when trained on shape labels directly
(issue #6). Swin's 2-pixel patches, local windows and patch merging see strokes and corners
first, and its last stage lines up with the 3 x 3 grid the scenes are drawn on.

What the tower is pretrained for (stage 1 of ``drake models pretrain``) is written here as
*targets* read from a public sample's ``meta["scenes"]``; nothing else about the picture is used:

* per grid cell, the two largest objects whose centre lies in the cell, each with its colour,
  shape, fill, size, state and number tag (:data:`SLOT_ATTRIBUTES`); the number of objects in the
  cell (0-3, 3 meaning three or more); whether a grey box covers the cell's centre;
* per picture, the background domain, the degradation, and the bar chart's value per colour.

The same records give the *grounding* targets of stage 2 (:func:`grounding_words`): the words
that name each cell's largest object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from drake.synth.scene import COLOURS, DOMAINS, FILLS, SHAPES, SIZES, Scene

__all__ = [
    "GRID_CELLS",
    "SLOT_ATTRIBUTES",
    "EFFECT_KINDS",
    "SceneTargets",
    "scene_targets",
    "stack_targets",
    "VisionHeads",
    "grounding_words",
    "tower_features",
]

GRID_CELLS = 9
SLOTS = 2
MAX_CELL_COUNT = 3
BAR_VALUES = 11  # 0 (no bar of that colour) .. 10

SLOT_ATTRIBUTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("colour", COLOURS),
    ("shape", SHAPES),
    ("fill", FILLS),
    ("size", SIZES),
    ("state", ("", "broken", "faded")),
    ("tag", ("",) + tuple(str(d) for d in range(1, 10))),
)
"""Attributes predicted for each object slot of a cell, with their classes in order."""
EFFECT_KINDS = ("", "blur", "noise", "dark", "bright", "contrast", "pixelate")
"""Degradation classes of a picture (``""``: none; the last one applied counts)."""

_SLOT_WIDTH = sum(len(classes) for _, classes in SLOT_ATTRIBUTES)
_INDEX = {name: {value: i for i, value in enumerate(classes)} for name, classes in SLOT_ATTRIBUTES}


class SceneTargets(dict):
    """Targets of one picture (numpy arrays), as :func:`scene_targets` builds them:

    ``slots`` int64 ``[9, 2, 6]`` (-100 where a slot is empty), ``count`` int64 ``[9]``,
    ``covered`` float32 ``[9]``, ``domain`` int64 ``[]``, ``effect`` int64 ``[]``, ``bars`` int64
    ``[8]``.
    """


def _cell(x: float, y: float) -> int:
    return min(2, max(0, int(y * 3))) * 3 + min(2, max(0, int(x * 3)))


def scene_targets(scene: Scene | Mapping[str, Any]) -> SceneTargets:
    """The pretraining targets of one picture, from its :class:`Scene` or scene record."""
    if not isinstance(scene, Scene):
        scene = Scene.from_summary(scene)
    slots = np.full((GRID_CELLS, SLOTS, len(SLOT_ATTRIBUTES)), -100, dtype=np.int64)
    count = np.zeros(GRID_CELLS, dtype=np.int64)
    by_cell: dict[int, list] = {}
    for obj in scene.objects:
        by_cell.setdefault(obj.cell(), []).append(obj)
    for cell, objs in by_cell.items():
        count[cell] = min(len(objs), MAX_CELL_COUNT)
        ranked = sorted(objs, key=lambda o: (-SIZES.index(o.size), o.y, o.x))
        for slot, obj in enumerate(ranked[:SLOTS]):
            values = {"colour": obj.colour, "shape": obj.shape, "fill": obj.fill,
                      "size": obj.size, "state": obj.state, "tag": obj.label}
            slots[cell, slot] = [_INDEX[name][values[name]] for name, _ in SLOT_ATTRIBUTES]
    covered = np.zeros(GRID_CELLS, dtype=np.float32)
    for x0, y0, x1, y1 in scene.occluders:
        covered[_cell((x0 + x1) / 2, (y0 + y1) / 2)] = 1.0
    effect = 0
    for kind, _ in scene.effects:
        effect = EFFECT_KINDS.index(kind)
    bars = np.zeros(len(COLOURS), dtype=np.int64)
    for colour, value in scene.bars:
        bars[COLOURS.index(colour)] = int(value)
    return SceneTargets(slots=slots, count=count, covered=covered,
                        domain=np.int64(DOMAINS.index(scene.domain)
                                        if scene.domain in DOMAINS else -100),
                        effect=np.int64(effect), bars=bars)


def stack_targets(targets: Sequence[SceneTargets]) -> dict[str, torch.Tensor]:
    """Stack per-picture targets into batch tensors (leading dimension = pictures)."""
    return {key: torch.as_tensor(np.stack([t[key] for t in targets])) for key in targets[0]}


class VisionHeads(nn.Module):
    """Linear read-outs of the tower's 3 x 3 features, one set per target kind.

    Per cell (one feature each): :data:`SLOTS` x :data:`SLOT_ATTRIBUTES` classifiers, the object
    count and the covered flag. Per picture (mean of the nine features): domain, degradation
    and the bar value of each colour. They exist only during pretraining.
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.cell = nn.Linear(hidden, SLOTS * _SLOT_WIDTH + (MAX_CELL_COUNT + 1) + 1)
        self.picture = nn.Linear(hidden, len(DOMAINS) + len(EFFECT_KINDS)
                                 + len(COLOURS) * BAR_VALUES)

    def loss(self, features: torch.Tensor, targets: Mapping[str, torch.Tensor]
             ) -> tuple[torch.Tensor, dict[str, float]]:
        """Summed cross-entropies of a batch ``features [N, 9, H]``; and per-target accuracy.

        Shape and fill weigh twice (they are the hardest to see), second slots half.
        """
        cell = self.cell(features)
        picture = self.picture(features.mean(dim=1))
        total = features.new_zeros(())
        acc: dict[str, float] = {}
        offset = 0
        for slot in range(SLOTS):
            for j, (name, classes) in enumerate(SLOT_ATTRIBUTES):
                logits = cell[..., offset:offset + len(classes)]
                offset += len(classes)
                gold = targets["slots"][..., slot, j]
                known = gold != -100
                if not bool(known.any()):
                    continue
                weight = (2.0 if name in ("shape", "fill") else 1.0) * (1.0 if slot == 0 else 0.5)
                total = total + weight * F.cross_entropy(logits[known], gold[known])
                if slot == 0:
                    acc[name] = _accuracy(logits[known], gold[known])
        count = cell[..., offset:offset + MAX_CELL_COUNT + 1]
        total = total + F.cross_entropy(count.reshape(-1, count.shape[-1]),
                                        targets["count"].reshape(-1))
        acc["count"] = _accuracy(count.reshape(-1, count.shape[-1]), targets["count"].reshape(-1))
        covered = cell[..., offset + MAX_CELL_COUNT + 1]
        total = total + F.binary_cross_entropy_with_logits(covered, targets["covered"])
        nd, ne = len(DOMAINS), len(EFFECT_KINDS)
        domain, effect = picture[:, :nd], picture[:, nd:nd + ne]
        bars = picture[:, nd + ne:].reshape(-1, len(COLOURS), BAR_VALUES)
        known = targets["domain"] != -100
        if bool(known.any()):
            total = total + F.cross_entropy(domain[known], targets["domain"][known])
            acc["domain"] = _accuracy(domain[known], targets["domain"][known])
        total = total + F.cross_entropy(effect, targets["effect"])
        acc["effect"] = _accuracy(effect, targets["effect"])
        charts = targets["bars"].sum(dim=1) > 0
        if bool(charts.any()):
            total = total + F.cross_entropy(bars[charts].reshape(-1, BAR_VALUES),
                                            targets["bars"][charts].reshape(-1))
            acc["bars"] = _accuracy(bars[charts].reshape(-1, BAR_VALUES),
                                    targets["bars"][charts].reshape(-1))
        return total, acc


def _accuracy(logits: torch.Tensor, gold: torch.Tensor) -> float:
    return float((logits.argmax(dim=-1) == gold).float().mean()) if gold.numel() else float("nan")


def grounding_words(scene: Scene | Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Per grid cell, the words naming its largest object (colour, shape, fill, size), or ``()``
    for an empty cell. Stage 2 of pretraining asks each image token to predict them through the
    language model's (tied) word embeddings, which puts image tokens and words in one space."""
    if not isinstance(scene, Scene):
        scene = Scene.from_summary(scene)
    words: list[tuple[str, ...]] = [()] * GRID_CELLS
    for obj in sorted(scene.objects, key=lambda o: (SIZES.index(o.size), -o.y, -o.x)):
        words[obj.cell()] = (obj.colour, obj.shape, obj.fill, obj.size)
    return words


def tower_features(tower: nn.Module, pixels: torch.Tensor) -> torch.Tensor:
    """``[N, 9, H]`` features of a Swin tower for ``[N, 3, 48, 48]`` pixels: its last stage's
    hidden states, which is what LLaVA reads with ``vision_feature_layer=-1`` (not
    ``last_hidden_state``, which adds the tower's final layer norm)."""
    return tower(pixel_values=pixels, output_hidden_states=True).hidden_states[-1]
