"""Image decoding (PIL, bytes, parquet dicts) and the PIL/numpy CLIP transform."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from drake.errors import SchemaError
from drake.models import clip_pixels, to_pil
from drake.models.images import CLIP_MEAN, CLIP_STD


def test_all_image_forms_decode_to_the_same_pixels(tmp_path, make_image, as_parquet_image):
    image = make_image((10, 200, 30))
    stored = as_parquet_image(image)
    path = tmp_path / "x.png"
    image.save(path)
    forms = [image, stored["bytes"], stored, {"bytes": None, "path": str(path)},
             image.convert("RGBA")]
    arrays = [np.asarray(to_pil(f)) for f in forms]
    for array in arrays[1:]:
        np.testing.assert_array_equal(array, arrays[0])


def test_bad_image_values_raise_schema_errors():
    with pytest.raises(SchemaError, match="not a readable image"):
        to_pil(b"not a png")
    with pytest.raises(SchemaError, match="neither 'bytes' nor 'path'"):
        to_pil({"bytes": None, "path": None})
    with pytest.raises(SchemaError, match="cannot read an image"):
        to_pil(3.5)


def test_clip_transform_golden_values():
    white = Image.new("RGB", (8, 8), (255, 255, 255))
    black = Image.new("RGB", (8, 8), (0, 0, 0))
    out = clip_pixels([white, black], 4)
    assert out.shape == (2, 3, 4, 4) and out.dtype.is_floating_point
    for c in range(3):
        assert out[0, c].flatten().tolist() == pytest.approx([(1 - CLIP_MEAN[c]) / CLIP_STD[c]] * 16)
        assert out[1, c].flatten().tolist() == pytest.approx([-CLIP_MEAN[c] / CLIP_STD[c]] * 16)


def test_clip_transform_resizes_bicubic_channels_first(make_image):
    image = make_image((200, 0, 0), size=64)
    out = clip_pixels([image], 32)
    expected = np.asarray(image.resize((32, 32), Image.Resampling.BICUBIC), dtype=np.float32)
    expected = (expected / 255.0 - np.asarray(CLIP_MEAN, np.float32)) / np.asarray(CLIP_STD,
                                                                                   np.float32)
    np.testing.assert_allclose(out[0].numpy(), expected.transpose(2, 0, 1), rtol=1e-5, atol=1e-5)
    assert clip_pixels([], 32).shape == (0, 3, 32, 32)


@pytest.mark.parametrize("width, height", [(40, 25), (25, 40), (33, 47), (20, 20)])
def test_center_crop_matches_clips_own_processor(width, height):
    """With ``center_crop``, the transform is OpenAI CLIP's: shorter side to the size, central
    square, CLIP normalisation (compared with transformers' PIL CLIP processor)."""
    processors = pytest.importorskip("transformers")
    processor_class = getattr(processors, "CLIPImageProcessorPil", None)
    if processor_class is None:
        pytest.skip("this transformers has no PIL CLIP image processor")
    rng = np.random.default_rng(width * height)
    image = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    reference = processor_class(size={"shortest_edge": 16},
                                crop_size={"height": 16, "width": 16})
    expected = reference(images=[image], return_tensors="pt")["pixel_values"]
    got = clip_pixels([image], 16, center_crop=True)
    assert got.shape == expected.shape == (1, 3, 16, 16)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5)
    if width != height:  # the squashing transform of the tiny models differs
        assert not np.allclose(clip_pixels([image], 16).numpy(), expected.numpy(), atol=1e-3)
