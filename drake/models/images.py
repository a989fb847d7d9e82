"""Images in, pixel tensors out: decoding the schema's image values and the CLIP transform.

A sample's ``images`` hold PIL images when generated in memory, and ``{"bytes": ..., "path": ...}``
dicts (or raw bytes) when read back from parquet. :func:`to_pil` accepts all three.

:func:`clip_pixels` is the image transform of the CLIP-style image towers, written with PIL and
numpy only (torchvision does not import beside the project's torch build): bicubic resize to a
square, scale to [0, 1], normalise with CLIP's mean and standard deviation, channels first. The
tiny models squash each image to the square; OpenAI's CLIP models take ``center_crop=True``, their
own preprocessing: the shorter side resized to the size, then the central square cut out.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from drake.errors import SchemaError

__all__ = ["CLIP_MEAN", "CLIP_STD", "to_pil", "clip_pixels", "resized_uint8", "normalise"]

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def to_pil(value: Any) -> Image.Image:
    """Decode one image value of the sample schema into an RGB PIL image.

    Parameters
    ----------
    value : PIL.Image.Image, bytes, or mapping with ``bytes`` and/or ``path``
        As a sample holds it in memory or as ``datasets`` returns it from parquet.

    Raises
    ------
    SchemaError
        When the value is none of these, or its bytes are not an image.
    """
    if isinstance(value, Image.Image):
        image = value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        image = _open(bytes(value), "bytes")
    elif isinstance(value, Mapping):
        data = value.get("bytes")
        path = value.get("path")
        if data:
            image = _open(bytes(data), f"bytes of {path or 'image'}")
        elif path:
            image = _open(Path(path).read_bytes(), str(path))
        else:
            raise SchemaError("image dict has neither 'bytes' nor 'path'; store encoded bytes")
    else:
        raise SchemaError(
            f"cannot read an image from a {type(value).__name__}; give a PIL image, encoded bytes "
            "or a {'bytes': ..., 'path': ...} dict"
        )
    return image if image.mode == "RGB" else image.convert("RGB")


def _open(data: bytes, what: str) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as err:  # PIL raises several unrelated types for bad data
        raise SchemaError(f"{what} is not a readable image ({err})") from err
    return image


def resized_uint8(images: Sequence[Any], size: int, *, center_crop: bool = False) -> np.ndarray:
    """Decode and resize images (bicubic, to ``size`` x ``size``) into ``[N, size, size, 3]``
    uint8: the compact form pretraining keeps many pictures in.

    With ``center_crop``, the aspect ratio is kept: the shorter side is resized to ``size`` and
    the central ``size`` x ``size`` square is cut out (CLIP's preprocessing); else each image is
    resized to the square directly.
    """
    if size <= 0:
        raise ValueError(f"image size must be positive, got {size}")
    out = np.empty((len(images), size, size, 3), dtype=np.uint8)
    for i, value in enumerate(images):
        image = to_pil(value)
        if center_crop and image.size[0] != image.size[1]:
            image = _shorter_side_then_crop(image, size)
        elif image.size != (size, size):
            image = image.resize((size, size), Image.Resampling.BICUBIC)
        out[i] = np.asarray(image, dtype=np.uint8)
    return out


def _shorter_side_then_crop(image: Image.Image, size: int) -> Image.Image:
    width, height = image.size
    short, long = min(width, height), max(width, height)
    long = int(size * long / short)  # the longer side, as CLIP's processor rounds it
    resized = image.resize((size, long) if width < height else (long, size),
                           Image.Resampling.BICUBIC)
    left, top = (resized.size[0] - size) // 2, (resized.size[1] - size) // 2
    return resized.crop((left, top, left + size, top + size))


def normalise(pixels: np.ndarray | torch.Tensor, mean: Sequence[float] = CLIP_MEAN,
              std: Sequence[float] = CLIP_STD) -> torch.Tensor:
    """``[N, S, S, 3]`` uint8 pixels to a normalised ``[N, 3, S, S]`` float32 tensor:
    scaled to [0, 1], then ``(x - mean) / std`` per channel."""
    array = torch.as_tensor(np.asarray(pixels)).permute(0, 3, 1, 2).to(torch.float32) / 255.0
    mean_t = torch.tensor(mean, dtype=torch.float32).reshape(1, 3, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32).reshape(1, 3, 1, 1)
    return (array - mean_t) / std_t


def clip_pixels(
    images: Sequence[Any],
    size: int,
    mean: Sequence[float] = CLIP_MEAN,
    std: Sequence[float] = CLIP_STD,
    *,
    center_crop: bool = False,
) -> torch.Tensor:
    """Turn images into a normalised ``[N, 3, size, size]`` float32 tensor.

    Each image is converted to RGB, resized to ``size`` x ``size`` with bicubic resampling
    (aspect ratio not kept, as drake-synth images are square; or, with ``center_crop``, kept by
    resizing the shorter side and cutting out the central square, as CLIP's processor does),
    scaled to [0, 1] and normalised per channel as ``(x - mean) / std`` (:func:`resized_uint8`,
    then :func:`normalise`).
    """
    return normalise(resized_uint8(images, size, center_crop=center_crop), mean, std)
