"""Drawing primitives of drake-synth: shapes, colours, sizes, fills, grid positions, domains.

Every drake-synth image is a :class:`Scene` (a few :class:`Obj` shapes on a background of one
visual *domain*, optionally a bar chart, occluding boxes and image degradations) rendered by
:func:`render`. Scenes are plain frozen data, so the task generators can build, compare and edit
them and record them in a sample's ``meta``; only :func:`render` touches pixels.

Rendering draws directly at the requested side (64 px by default) with ``PIL.ImageDraw``; all
coordinates are fractions of the side, so any ``image_size`` gives the same picture at another
resolution. Every random draw (background noise, stripe phase, degradation noise) comes from the
``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

SHAPES = ("circle", "square", "triangle", "star", "hexagon", "cross", "heart", "diamond")
COLOURS = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink")
SIZES = ("small", "large")
FILLS = ("solid", "outlined", "striped")
STATES = ("", "broken", "faded")
"""Object states besides the fill: intact (``""``), broken (cracked in two) or faded (pale)."""

COLOUR_RGB = MappingProxyType(
    {
        "red": (220, 38, 38),
        "orange": (245, 130, 20),
        "yellow": (232, 200, 16),
        "green": (34, 160, 60),
        "cyan": (20, 188, 208),
        "blue": (35, 75, 215),
        "purple": (135, 55, 185),
        "pink": (240, 110, 175),
    }
)
NEAR_COLOURS = MappingProxyType(
    {
        "red": ("orange", "pink"),
        "orange": ("red", "yellow"),
        "yellow": ("orange", "green"),
        "green": ("yellow", "cyan"),
        "cyan": ("green", "blue"),
        "blue": ("cyan", "purple"),
        "purple": ("blue", "pink"),
        "pink": ("purple", "red"),
    }
)
"""Hue neighbours: the colours a close distractor swaps in."""
NEAR_SHAPES = MappingProxyType(
    {
        "circle": ("hexagon", "heart"),
        "square": ("diamond", "hexagon"),
        "triangle": ("diamond", "heart"),
        "star": ("cross", "hexagon"),
        "hexagon": ("circle", "square"),
        "cross": ("star", "square"),
        "heart": ("circle", "triangle"),
        "diamond": ("square", "triangle"),
    }
)
"""Look-alike shapes: the shapes a close distractor swaps in."""
SHAPE_PAIRS = (
    ("square", "diamond"),
    ("circle", "hexagon"),
    ("star", "cross"),
    ("triangle", "heart"),
)
"""Disjoint look-alike pairs: close option sets are unions of whole pairs."""
HUE_WINDOWS = tuple(tuple(COLOURS[(i + k) % 8] for k in range(4)) for i in range(8))
"""Runs of four neighbouring hues (the colours are listed around the hue circle)."""
CELL_BLOCKS = (
    (0, 1, 3, 4),
    (1, 2, 4, 5),
    (3, 4, 6, 7),
    (4, 5, 7, 8),
)
"""The 2 x 2 blocks of neighbouring grid cells."""
WARM_COLOURS = ("red", "orange", "yellow")
COOL_COLOURS = ("cyan", "blue", "purple")

GRID = 3
POSITIONS = (
    "top left",
    "top",
    "top right",
    "left",
    "centre",
    "right",
    "bottom left",
    "bottom",
    "bottom right",
)
"""Names of the cells of the 3 x 3 grid, row by row."""

DOMAINS = ("plain", "noise", "stripes", "gradient", "sketch", "texture")
"""Visual domains the client tasks, the public split, synth-cls and synth-caption draw from."""
HELD_OUT_DOMAINS = ("dots", "checker", "night")
"""Visual domains seen only by the unseen-domain tasks."""
ALL_DOMAINS = DOMAINS + HELD_OUT_DOMAINS

RADIUS = MappingProxyType({"small": 0.075, "large": 0.14})
"""Shape radius as a fraction of the image side, on the 3 x 3 grid."""

_PAPER_GREY = (128, 128, 128)


@dataclass(frozen=True)
class Obj:
    """One shape: what it is, where it sits (centre ``x, y`` and radius ``r`` as side fractions)."""

    shape: str
    colour: str
    size: str = "large"
    fill: str = "solid"
    x: float = 0.5
    y: float = 0.5
    r: float = 0.14
    state: str = ""
    label: str = ""

    def describe(self, size: bool = False, fill: bool = False) -> str:
        """Noun phrase without article, e.g. ``"small red striped star"``."""
        words = ([self.size] if size else []) + [self.colour]
        words += [self.fill] if fill else []
        return " ".join([*words, self.shape])

    def cell(self, grid: int = GRID) -> int:
        """Index of the grid cell holding the centre, row by row."""
        col = min(grid - 1, max(0, int(self.x * grid)))
        row = min(grid - 1, max(0, int(self.y * grid)))
        return row * grid + col

    def key(self) -> tuple[str, str]:
        """The (shape, colour) pair; scenes keep it unique so that text can name each object."""
        return (self.shape, self.colour)

    def summary(self) -> str:
        """Compact form for ``meta``: ``"size colour fill shape@x,y[state][#label]"``."""
        text = f"{self.size} {self.colour} {self.fill} {self.shape}@{self.x:.2f},{self.y:.2f}"
        if self.state:
            text += f"[{self.state}]"
        if self.label:
            text += f"#{self.label}"
        return text


@dataclass(frozen=True)
class Scene:
    """One image: objects on a domain background, then bars, occluders and degradations.

    ``bars`` is a bar chart as (colour, value 1..10) pairs drawn before the objects; ``occluders``
    are grey boxes (x0, y0, x1, y1 as side fractions); ``effects`` are degradations applied in
    order after drawing: ``("blur", px at 64 px side)``, ``("noise", std)``, ``("dark", f)``,
    ``("bright", f)``, ``("contrast", f)`` (f in [0, 1]) and ``("pixelate", factor >= 2)``.
    ``bg_seed`` >= 0 draws the background from its own seed, so that several images (video
    frames, an edited pair) share one background exactly.
    """

    objects: tuple[Obj, ...] = ()
    domain: str = "plain"
    effects: tuple[tuple[str, float], ...] = ()
    occluders: tuple[tuple[float, float, float, float], ...] = ()
    bars: tuple[tuple[str, int], ...] = ()
    bg_seed: int = -1

    def summary(self) -> dict:
        """A JSON-able record of the scene for a sample's ``meta``."""
        out: dict = {"domain": self.domain, "objects": [o.summary() for o in self.objects]}
        if self.effects:
            out["effects"] = [[k, round(float(v), 3)] for k, v in self.effects]
        if self.occluders:
            out["occluders"] = [[round(v, 3) for v in box] for box in self.occluders]
        if self.bars:
            out["bars"] = [[c, int(v)] for c, v in self.bars]
        return out

    @classmethod
    def from_summary(cls, record: Mapping) -> Scene:
        """The scene a :meth:`summary` describes, up to its rounding: centres to two decimals,
        radii nominal for the size. What the picture shows (every object's attributes and grid
        cell, the domain, degradations, boxes and bars) is recovered exactly.

        Raises
        ------
        ValueError
            Naming the object record that does not parse.
        """
        objects = []
        for text in record.get("objects", ()):
            match = _SUMMARY.fullmatch(str(text))
            if match is None:
                raise ValueError(f"object record {text!r} is not 'size colour fill shape@x,y"
                                 "[state]#label' (Obj.summary's form)")
            size, colour, fill, shape, x, y, state, label = match.groups()
            objects.append(Obj(shape, colour, size, fill, float(x), float(y), RADIUS[size],
                               state or "", label or ""))
        return cls(tuple(objects), str(record.get("domain", "plain")),
                   tuple((str(k), float(v)) for k, v in record.get("effects", ())),
                   tuple(tuple(float(v) for v in box) for box in record.get("occluders", ())),
                   tuple((str(c), int(v)) for c, v in record.get("bars", ())))


_SUMMARY = re.compile(r"(small|large) (\w+) (\w+) (\w+)@(-?[\d.]+),(-?[\d.]+)"
                      r"(?:\[(\w+)\])?(?:#(\d+))?")


# ---------------------------------------------------------------------------------------------
# placement


def cell_centre(cell: int, grid: int = GRID) -> tuple[float, float]:
    """Centre of grid cell ``cell`` (row by row) as side fractions."""
    return ((cell % grid + 0.5) / grid, (cell // grid + 0.5) / grid)


def radius_for(size: str, grid: int = GRID) -> float:
    """Nominal radius of a ``size`` shape on a ``grid`` x ``grid`` layout (small shapes shrink
    less on fine grids, so that they stay recognisable)."""
    factor = GRID / grid if size == "large" else min(1.0, 1.2 * GRID / grid)
    return RADIUS[size] * factor


def arrange(
    rng: np.random.Generator,
    objs: Sequence[Obj],
    *,
    grid: int = GRID,
    cells: Sequence[int] | None = None,
    jitter: float = 0.025,
) -> tuple[Obj, ...]:
    """Place ``objs`` in distinct grid cells (random ones unless ``cells`` is given).

    Each centre is the cell centre plus a uniform jitter of at most ``jitter`` (scaled to the
    cell), and each radius the nominal one for its size times a factor in [0.92, 1.08].
    """
    if cells is None:
        cells = [int(c) for c in rng.choice(grid * grid, size=len(objs), replace=False)]
    if len(cells) != len(objs):
        raise ValueError(f"arrange got {len(objs)} objects but {len(cells)} cells")
    scale = GRID / grid
    out = []
    for obj, cell in zip(objs, cells):
        cx, cy = cell_centre(int(cell), grid)
        dx, dy = rng.uniform(-jitter, jitter, size=2) * scale
        r = radius_for(obj.size, grid) * float(rng.uniform(0.92, 1.08))
        out.append(replace(obj, x=cx + float(dx), y=cy + float(dy), r=r))
    return tuple(out)


def free_cells(objs: Sequence[Obj], grid: int = GRID) -> list[int]:
    """Grid cells that hold no object centre, in increasing order."""
    used = {o.cell(grid) for o in objs}
    return [c for c in range(grid * grid) if c not in used]


# ---------------------------------------------------------------------------------------------
# shape outlines (unit radius, y down)


def _regular(n: int, radius: float, start: float) -> tuple[tuple[float, float], ...]:
    return tuple(
        (
            radius * math.cos(start + 2 * math.pi * k / n),
            radius * math.sin(start + 2 * math.pi * k / n),
        )
        for k in range(n)
    )


def _star() -> tuple[tuple[float, float], ...]:
    pts = []
    for k in range(10):
        rad = 1.0 if k % 2 == 0 else 0.42
        ang = -math.pi / 2 + math.pi * k / 5
        pts.append((rad * math.cos(ang), rad * math.sin(ang)))
    return tuple(pts)


def _heart() -> tuple[tuple[float, float], ...]:
    pts = []
    for k in range(28):
        t = 2 * math.pi * k / 28
        x = 16 * math.sin(t) ** 3
        y = -(13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t) - math.cos(4 * t))
        pts.append((x / 16.5, (y + 2.5) / 15.0))
    return tuple(pts)


_W = 0.34
_UNIT = MappingProxyType(
    {
        "square": ((-0.8, -0.8), (0.8, -0.8), (0.8, 0.8), (-0.8, 0.8)),
        "diamond": ((0.0, -1.0), (0.68, 0.0), (0.0, 1.0), (-0.68, 0.0)),
        "triangle": ((0.0, -0.95), (0.95, 0.75), (-0.95, 0.75)),
        "hexagon": _regular(6, 0.95, 0.0),
        "star": _star(),
        "cross": (
            (-_W, -0.95),
            (_W, -0.95),
            (_W, -_W),
            (0.95, -_W),
            (0.95, _W),
            (_W, _W),
            (_W, 0.95),
            (-_W, 0.95),
            (-_W, _W),
            (-0.95, _W),
            (-0.95, -_W),
            (-_W, -_W),
        ),
        "heart": _heart(),
    }
)

CORNERS = MappingProxyType(
    {"circle": 0, "triangle": 3, "square": 4, "diamond": 4, "hexagon": 6, "star": 10, "cross": 12}
)
"""Number of corners of each polygonal shape (the heart has none defined and is left out)."""


def _draw_shape(
    draw: ImageDraw.ImageDraw,
    shape: str,
    cx: float,
    cy: float,
    r: float,
    fill=None,
    outline=None,
    width: int = 1,
) -> None:
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill, outline=outline, width=width)
        return
    pts = [(cx + r * ux, cy + r * uy) for ux, uy in _UNIT[shape]]
    draw.polygon(pts, fill=fill, outline=outline, width=width)


# ---------------------------------------------------------------------------------------------
# backgrounds


def _grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    ys, xs = np.indices((size, size), dtype=np.float32)
    return xs, ys


def _from_array(arr: np.ndarray) -> Image.Image:
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")


def _light(rng: np.random.Generator, lo: int = 200, hi: int = 240, tint: int = 8) -> np.ndarray:
    base = float(rng.integers(lo, hi + 1))
    return base + rng.integers(-tint, tint + 1, size=3).astype(np.float32)


def background(domain: str, size: int, rng: np.random.Generator) -> Image.Image:
    """A fresh ``size`` x ``size`` RGB background of ``domain`` (low saturation: colours read)."""
    s = size / 64.0
    if domain == "plain":
        return Image.new("RGB", (size, size), tuple(int(v) for v in _light(rng)))
    if domain == "noise":
        base = float(rng.integers(180, 221))
        return _from_array(base + rng.normal(0.0, 22.0, size=(size, size)).astype(np.float32))
    if domain == "stripes":
        xs, ys = _grid(size)
        period = float(rng.integers(6, 13)) * s
        coord = (xs, ys, xs + ys, xs - ys)[int(rng.integers(4))]
        phase = float(rng.uniform(0, period))
        on = ((coord + phase) % period) < period / 2
        g1, g2 = _light(rng, 205, 235, 4), _light(rng, 165, 195, 4)
        return _from_array(np.where(on[:, :, None], g1, g2))
    if domain == "gradient":
        xs, ys = _grid(size)
        ang = float(rng.uniform(0, 2 * math.pi))
        t = (xs * math.cos(ang) + ys * math.sin(ang)) / size
        t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
        c1, c2 = _light(rng, 215, 245, 14), _light(rng, 150, 185, 14)
        return _from_array(c1 * (1 - t[:, :, None]) + c2 * t[:, :, None])
    if domain == "sketch":
        paper = np.array([246.0, 243.0, 234.0], dtype=np.float32)
        noise = rng.normal(0.0, 4.0, size=(size, size, 1)).astype(np.float32)
        return _from_array(paper + noise)
    if domain == "texture":
        coarse = rng.integers(160, 236, size=(8, 8), dtype=np.uint8)
        img = Image.fromarray(coarse, "L").resize((size, size), Image.Resampling.BILINEAR)
        arr = np.asarray(img, dtype=np.float32) + rng.normal(0.0, 7.0, size=(size, size))
        warm = np.array([1.0, 0.97, 0.9], dtype=np.float32)
        return _from_array(arr[:, :, None] * warm)
    if domain == "dots":
        xs, ys = _grid(size)
        period = float(rng.integers(7, 11)) * s
        ox, oy = rng.uniform(0, period, size=2)
        dx = (xs + ox) % period - period / 2
        dy = (ys + oy) % period - period / 2
        dot = dx * dx + dy * dy < (1.6 * s) ** 2
        return _from_array(
            np.where(dot[:, :, None], _light(rng, 120, 150, 6), _light(rng, 215, 240, 6))
        )
    if domain == "checker":
        xs, ys = _grid(size)
        period = float(rng.integers(8, 13)) * s
        ox, oy = rng.uniform(0, period, size=2)
        on = ((np.floor((xs + ox) / period) + np.floor((ys + oy) / period)) % 2) == 0
        return _from_array(
            np.where(on[:, :, None], _light(rng, 220, 245, 5), _light(rng, 170, 195, 5))
        )
    if domain == "night":
        base = np.array([18.0, 22.0, 46.0], dtype=np.float32) + float(rng.integers(0, 15))
        arr = np.broadcast_to(base, (size, size, 3)).copy()
        specks = rng.random((size, size)) < 0.012
        arr[specks] = 200.0
        return _from_array(arr)
    raise ValueError(f"unknown domain {domain!r}; choose one of {list(ALL_DOMAINS)}")


# ---------------------------------------------------------------------------------------------
# objects, labels, bars


def _pattern(kind: str, size: int, box: tuple[int, int, int, int]) -> np.ndarray:
    """0/255 fill pattern over ``box`` (x0, y0, x1, y1) in image coordinates, so that the phase
    of stripes and hatching is tied to the image, not to the object."""
    x0, y0, x1, y1 = box
    ys, xs = np.mgrid[y0:y1, x0:x1]
    unit = max(1, round(size / 64))
    if kind == "stripes":
        on = ((xs + ys) // (2 * unit)) % 2 == 0
    elif kind == "hatch":
        on = (((xs + ys) // unit) % 3 == 0) | (((xs - ys) // unit) % 3 == 0)
    else:  # sparse hatch
        on = ((xs + ys) // unit) % 5 == 0
    return np.where(on, 255, 0).astype(np.uint8)


def _faded(rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    return tuple(int(0.38 * c + 0.62 * 236) for c in rgb)


def draw_object(img: Image.Image, obj: Obj, domain: str) -> None:
    """Draw ``obj`` onto ``img`` in the style of ``domain`` (in place).

    Solid shapes are filled, outlined ones drawn as a 2 px (at 64 px) outline, striped ones as
    diagonal colour stripes inside an outline. The sketch domain draws strokes only: a 1 px
    outline, solid as dense cross-hatching, striped as sparse hatching. The night domain adds a
    light halo. A broken shape has a zigzag crack through it; a faded one is pale.
    """
    size = img.size[0]
    draw = ImageDraw.Draw(img)
    rgb = COLOUR_RGB[obj.colour]
    if obj.state == "faded":
        rgb = _faded(rgb)
    cx, cy, r = obj.x * size, obj.y * size, obj.r * size
    sketch = domain == "sketch"
    width = max(1, round(size / 64)) if sketch else max(1, round(size / 32))
    if domain == "night":
        _draw_shape(draw, obj.shape, cx, cy, r + width, outline=(235, 235, 235), width=width)
    pattern = None
    if sketch and obj.fill != "outlined":
        pattern = "hatch" if obj.fill == "solid" else "sparse"
    elif obj.fill == "striped":
        pattern = "stripes"
    if pattern is None and obj.state != "broken":
        if obj.fill == "outlined" or sketch:
            _draw_shape(draw, obj.shape, cx, cy, r, outline=rgb, width=width)
        else:
            _draw_shape(draw, obj.shape, cx, cy, r, fill=rgb)
        return
    # masked drawing, restricted to the object's bounding box
    pad = r + 2 * width + 2
    box = (
        max(0, int(cx - pad)),
        max(0, int(cy - pad)),
        min(size, int(cx + pad) + 1),
        min(size, int(cy + pad) + 1),
    )
    if box[2] <= box[0] or box[3] <= box[1]:
        return
    ox, oy = cx - box[0], cy - box[1]
    mask = Image.new("L", (box[2] - box[0], box[3] - box[1]), 0)
    mdraw = ImageDraw.Draw(mask)
    if obj.fill == "outlined" and pattern is None:
        _draw_shape(mdraw, obj.shape, ox, oy, r, outline=255, width=width)
    else:
        _draw_shape(mdraw, obj.shape, ox, oy, r, fill=255)
        if pattern is not None:
            arr = np.asarray(mask) & _pattern(pattern, size, box)
            mask = Image.fromarray(arr, "L")
            mdraw = ImageDraw.Draw(mask)
            _draw_shape(mdraw, obj.shape, ox, oy, r, outline=255, width=width)
    if obj.state == "broken":
        gap = max(2, round(size / 24))
        zig = [
            (ox - 1.1 * r, oy - 0.35 * r),
            (ox - 0.3 * r, oy + 0.25 * r),
            (ox + 0.3 * r, oy - 0.25 * r),
            (ox + 1.1 * r, oy + 0.35 * r),
        ]
        mdraw.line(zig, fill=0, width=gap)
    img.paste(rgb, box, mask)


_DIGITS = MappingProxyType(
    {
        "0": ("111", "101", "101", "101", "111"),
        "1": ("010", "110", "010", "010", "111"),
        "2": ("111", "001", "111", "100", "111"),
        "3": ("111", "001", "011", "001", "111"),
        "4": ("101", "101", "111", "001", "001"),
        "5": ("111", "100", "111", "001", "111"),
        "6": ("111", "100", "111", "101", "111"),
        "7": ("111", "001", "010", "010", "010"),
        "8": ("111", "101", "111", "101", "111"),
        "9": ("111", "101", "111", "001", "111"),
    }
)


def draw_label(img: Image.Image, text: str, x: float, y: float) -> None:
    """Draw digits ``text`` (3 x 5 pixel glyphs, scaled) on a white tag centred at ``x, y``."""
    size = img.size[0]
    draw = ImageDraw.Draw(img)
    px = max(1, round(size / 32))
    w = (4 * len(text) - 1) * px
    h = 5 * px
    x0 = min(max(int(x * size - w / 2), px), size - w - px - 1)
    y0 = min(max(int(y * size - h / 2), px), size - h - px - 1)
    draw.rectangle((x0 - px, y0 - px, x0 + w + px - 1, y0 + h + px - 1), fill=(255, 255, 255))
    for k, ch in enumerate(text):
        for row, bits in enumerate(_DIGITS[ch]):
            for col, bit in enumerate(bits):
                if bit == "1":
                    gx = x0 + (4 * k + col) * px
                    gy = y0 + row * px
                    draw.rectangle((gx, gy, gx + px - 1, gy + px - 1), fill=(20, 20, 20))


BAR_AREA = (0.12, 0.06, 0.95, 0.92)
"""Plot area of bar charts (x0, y0 top, x1, y1 baseline) as side fractions; values run 0..10."""


def _draw_bars(img: Image.Image, bars: Sequence[tuple[str, int]]) -> None:
    size = img.size[0]
    draw = ImageDraw.Draw(img)
    x0, y0, x1, y1 = (v * size for v in BAR_AREA)
    unit = (y1 - y0) / 10.0
    for k in range(1, 11):
        yy = y1 - k * unit
        draw.line((x0, yy, x1, yy), fill=(150, 150, 150), width=1)
    n = len(bars)
    slot = (x1 - x0) / n
    for i, (colour, value) in enumerate(bars):
        left = x0 + i * slot + 0.2 * slot
        right = x0 + (i + 1) * slot - 0.2 * slot
        draw.rectangle((left, y1 - value * unit, right, y1), fill=COLOUR_RGB[colour])
    draw.line((x0, y0, x0, y1), fill=(40, 40, 40), width=max(1, round(size / 64)))
    draw.line((x0, y1, x1, y1), fill=(40, 40, 40), width=max(1, round(size / 64)))


# ---------------------------------------------------------------------------------------------
# degradations


def degrade(img: Image.Image, kind: str, strength: float, rng: np.random.Generator) -> Image.Image:
    """Apply one degradation (see :class:`Scene` for the kinds and their strength units)."""
    size = img.size[0]
    if kind == "blur":
        return img.filter(ImageFilter.GaussianBlur(strength * size / 64.0))
    if kind == "pixelate":
        factor = max(2, int(round(strength)))
        small = max(2, size // factor)
        return img.resize((small, small), Image.Resampling.BILINEAR).resize(
            (size, size), Image.Resampling.NEAREST
        )
    arr = np.asarray(img, dtype=np.float32)
    if kind == "noise":
        arr = arr + rng.normal(0.0, strength, size=arr.shape[:2] + (1,)).astype(np.float32)
    elif kind == "dark":
        arr = arr * (1.0 - strength)
    elif kind == "bright":
        arr = arr + (255.0 - arr) * strength
    elif kind == "contrast":
        arr = arr.mean() + (arr - arr.mean()) * (1.0 - strength)
    else:
        raise ValueError(
            f"unknown degradation {kind!r}; use blur, pixelate, noise, dark, bright or contrast"
        )
    return _from_array(arr)


def render(scene: Scene, size: int, rng: np.random.Generator) -> Image.Image:
    """Draw ``scene`` as a ``size`` x ``size`` RGB image.

    Order: domain background, bar chart, objects (each with its digit label to its right),
    occluding grey boxes, then the degradations in order.
    """
    bg_rng = np.random.default_rng(scene.bg_seed) if scene.bg_seed >= 0 else rng
    img = background(scene.domain, size, bg_rng)
    if scene.bars:
        _draw_bars(img, scene.bars)
    for obj in scene.objects:
        draw_object(img, obj, scene.domain)
    for obj in scene.objects:
        if obj.label:
            side = 1.0 if obj.x + obj.r + 0.08 < 1.0 else -1.0
            draw_label(img, obj.label, obj.x + side * (obj.r + 0.06), obj.y)
    if scene.occluders:
        draw = ImageDraw.Draw(img)
        for x0, y0, x1, y1 in scene.occluders:
            draw.rectangle((x0 * size, y0 * size, x1 * size, y1 * size), fill=_PAPER_GREY)
    for kind, strength in scene.effects:
        img = degrade(img, kind, strength, rng)
    return img
