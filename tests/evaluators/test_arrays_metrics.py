"""MSE for image reconstruction and classification accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evaluators import MetricInputError, classification_accuracy, mse


def test_mse_hand_computed():
    pred = np.zeros((2, 2, 2))
    true = np.stack([np.zeros((2, 2)), np.full((2, 2), 2.0)])
    assert mse(pred, true) == pytest.approx(2.0)  # (0 + 4) / 2


def test_mse_weighs_images_equally_across_sizes():
    # image 0: 1 pixel off by 1 -> 1; image 1: 4 pixels, one off by 2 -> 1
    preds = [np.array([[1.0]]), np.array([[0.0, 0.0], [0.0, 2.0]])]
    trues = [np.array([[0.0]]), np.zeros((2, 2))]
    assert mse(preds, trues) == pytest.approx(1.0)


def test_mse_accepts_torch_tensors():
    pred = torch.full((3, 1, 4, 4), 0.5)
    true = torch.zeros((3, 1, 4, 4))
    assert mse(pred, true) == pytest.approx(0.25)
    assert mse(pred.to(torch.bfloat16), true) == pytest.approx(0.25)


def test_mse_bad_input():
    with pytest.raises(MetricInputError, match="length mismatch"):
        mse(np.zeros((2, 3)), np.zeros((3, 3)))
    with pytest.raises(MetricInputError, match=r"images_pred\[1\] has shape \(2,\)"):
        mse([np.zeros(3), np.zeros(2)], [np.zeros(3), np.zeros(3)])
    with pytest.raises(MetricInputError, match=r"images_true\[0\] is None"):
        mse([np.zeros(3)], [None])
    with pytest.raises(MetricInputError, match="image 0 holds NaN"):
        mse(np.array([[math.nan]]), np.zeros((1, 1)))
    with pytest.raises(MetricInputError, match="empty"):
        mse([], [])


def test_classification_accuracy_from_logits_and_ids():
    logits = [[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]
    assert classification_accuracy(logits, [1, 0, 0]) == pytest.approx(200 / 3)
    assert classification_accuracy(np.array([2, 0, 1, 1]), [2, 0, 0, 1]) == 75.0
    assert classification_accuracy(torch.tensor(logits), torch.tensor([1, 0, 1])) == 100.0
    assert classification_accuracy([1.0, 0.0], [1, 1]) == 50.0  # integer-valued floats


def test_classification_accuracy_bad_input():
    with pytest.raises(MetricInputError, match="length mismatch"):
        classification_accuracy([1, 0], [1])
    with pytest.raises(MetricInputError, match="empty"):
        classification_accuracy([], [])
    with pytest.raises(MetricInputError, match=r"logits_or_preds\[1\] holds NaN"):
        classification_accuracy([[0.0, 1.0], [math.nan, 0.0]], [1, 0])
    with pytest.raises(MetricInputError, match=r"logits_or_preds\[0\] = .*not an integer"):
        classification_accuracy([0.5, 1.0], [0, 1])
    with pytest.raises(MetricInputError, match=r"labels\[1\] is None"):
        classification_accuracy([0, 1], [0, None])
    with pytest.raises(MetricInputError, match="labels is None"):
        classification_accuracy([0, 1], None)


def test_mse_of_a_task_scores_reconstructions_against_the_stored_target():
    """The registry's ``mse`` task scorer: the target is the sample's last image (an
    ``"image"`` sample's stored target) at the prediction's size, in [0, 1] (a 2 x 2 image: two
    black pixels, two white)."""
    from PIL import Image

    from evaluators import score_task

    image = Image.new("RGB", (2, 2), (0, 0, 0))
    image.putpixel((1, 0), (255, 255, 255))
    image.putpixel((1, 1), (255, 255, 255))
    sample = {"id": "s0", "images": [image, image], "answer": "", "answer_type": "image"}
    grey = np.full((2, 2, 3), 0.5)
    assert score_task("mse", [grey], [sample]) == pytest.approx(0.25)  # every pixel off by 0.5
    perfect = np.asarray(image, dtype=float) / 255.0
    assert score_task("mse", [perfect, grey], [sample, sample]) == pytest.approx(0.125)
    with pytest.raises(MetricInputError, match="s0.*H x W x 3"):
        score_task("mse", ["a caption"], [sample])


def test_mse_reads_the_last_image_not_the_input():
    """A sample whose target differs from its input: scored against the target (the last)."""
    from PIL import Image

    from evaluators import score_task

    black, white = Image.new("RGB", (2, 2), (0, 0, 0)), Image.new("RGB", (2, 2), (255,) * 3)
    sample = {"id": "s1", "images": [black, white], "answer": "", "answer_type": "image"}
    assert score_task("mse", [np.ones((2, 2, 3))], [sample]) == 0.0
    assert score_task("mse", [np.zeros((2, 2, 3))], [sample]) == pytest.approx(1.0)


@pytest.mark.parametrize("answer_type", ["captioning", None])
def test_mse_refuses_a_sample_without_a_stored_target(answer_type):
    from PIL import Image

    from evaluators import score_task

    sample = {"id": "old", "images": [Image.new("RGB", (2, 2))], "answer": ""}
    if answer_type:
        sample["answer_type"] = answer_type
    with pytest.raises(MetricInputError, match=r"'old'.*needs answer_type 'image' with its "
                                               r"target as the last image"):
        score_task("mse", [np.zeros((2, 2, 3))], [sample])
