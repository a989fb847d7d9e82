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
