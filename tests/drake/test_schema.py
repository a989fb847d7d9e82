import json

import pytest
from PIL import Image

from drake.errors import SchemaError
from drake.schema import COLUMNS, encode_image, to_row, validate_sample


def sample(**kw):
    base = {
        "id": "t-train-000001", "task": "t", "images": [Image.new("RGB", (8, 8))],
        "prompt": "<image>\nIs it red? Choice list:[True, False]. Your answer is:",
        "answer": "True", "choices": ["True", "False"], "answer_type": "multiple_choice",
        "label": -1, "domain": "plain", "meta": json.dumps({"k": 1}),
    }
    base.update(kw)
    return base


def test_valid_sample_passes():
    validate_sample(sample())


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"prompt": "no placeholder"}, "0 <image> placeholder(s) but the sample has 1"),
        ({"prompt": "<image><image>"}, "2 <image> placeholder(s)"),
        ({"answer": "Maybe"}, "not one of its choices"),
        ({"answer_type": "mcq"}, "answer_type 'mcq'"),
        ({"choices": ["True"]}, "at least 2 choices"),
        ({"choices": ["True", "True"], "answer": "True"}, "repeat"),
        ({"label": 1.5}, "'label' must be an int"),
        ({"meta": "{not json"}, "'meta' is not valid JSON"),
        ({"meta": "[1]"}, "JSON object"),
        ({"id": ""}, "'id' is empty"),
        ({"answer_type": "open_ended"}, "empty choice list"),
        ({"answer_type": "classification", "choices": [], "label": -1}, "class id"),
        ({"prompt": 3}, "'prompt' must be a string"),
    ],
)
def test_bad_samples_name_the_problem(change, fragment):
    with pytest.raises(SchemaError) as info:
        validate_sample(sample(**change))
    assert fragment in str(info.value)
    if "id" not in change:
        assert "t-train-000001" in str(info.value)


def image_sample(**kw):
    """An image-generation sample: one input picture and, last, its target."""
    picture = Image.new("RGB", (8, 8))
    return sample(**{"images": [picture, picture], "prompt": "<image>", "answer": "",
                     "choices": [], "answer_type": "image", **kw})


def test_image_sample_stores_its_target_last_without_a_placeholder():
    validate_sample(image_sample())
    # text to image: no input picture, only the target
    validate_sample(image_sample(images=[Image.new("RGB", (8, 8))], prompt="Draw a red circle"))
    # two inputs and the target
    validate_sample(image_sample(images=[Image.new("RGB", (8, 8))] * 3,
                                 prompt="<image> then <image>"))


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"images": [], "prompt": ""}, "field 'images' is empty, but an image sample stores its "
                                       "target image as the last entry of 'images'"),
        ({"prompt": "<image><image>"}, "prompt holds 2 <image> placeholder(s) but the image "
                                       "sample has 1 input image(s) (its last image is the "
                                       "target, with no placeholder)"),
        ({"prompt": "no placeholder"}, "prompt holds 0 <image> placeholder(s) but the image "
                                       "sample has 1 input image(s)"),
        ({"answer": "a picture"}, "field 'answer' is 'a picture', but an image sample's target "
                                  "is its last image; leave 'answer' empty"),
        ({"choices": ["a", "b"]}, "an image sample must have an empty choice list"),
    ],
)
def test_bad_image_samples_name_the_problem(change, fragment):
    with pytest.raises(SchemaError) as info:
        validate_sample(image_sample(**change))
    assert fragment in str(info.value) and "t-train-000001" in str(info.value)


def test_other_answer_types_keep_one_placeholder_per_image():
    """Only an image sample's last picture goes without a placeholder."""
    with pytest.raises(SchemaError, match="1 <image> placeholder.*2 image"):
        validate_sample(image_sample(answer_type="captioning", answer="a caption"))


def test_missing_and_extra_fields_are_named():
    s = sample()
    del s["domain"]
    with pytest.raises(SchemaError, match="missing field"):
        validate_sample(s)
    with pytest.raises(SchemaError, match="unknown field"):
        validate_sample(sample(extra=1))


def test_png_encoding_is_deterministic_and_roundtrips():
    img = Image.new("RGB", (16, 16), (10, 200, 30))
    a, b = encode_image(img), encode_image(img.copy())
    assert a == b and a["bytes"].startswith(b"\x89PNG")
    row = to_row(sample(images=[img]))
    assert set(row) == set(COLUMNS) and row["images"][0]["bytes"] == a["bytes"]
