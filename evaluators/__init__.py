"""DRAKE's metrics: pure functions over predictions and references, and the aggregations
(Self/Others, A_last/A_AUC, forgetting, base/novel HM, seeds, domains) that turn a run's
evaluation points into the papers' figures. Every score is on a 0-100 scale unless its docstring
says otherwise (MSE is an error; CIDEr-D is pycocoevalcap's value times 100).

Reference libraries (sacrebleu, rouge-score, NLTK, bert-score) are imported on first use.
"""

from evaluators.base_novel import base_novel_hm
from evaluators.bertscore import BERTScoreResult, bertscore, default_bertscore_model
from evaluators.choice import accuracy_mc, match_choice, mc_correctness, parse_choices
from evaluators.classification import classification_accuracy
from evaluators.curves import a_auc, a_last, forgetting
from evaluators.domains import per_domain_accuracy
from evaluators.errors import MetricInputError, MetricSetupError
from evaluators.generation import ROUGE_TYPES, bleu, cider, google_bleu, meteor, rouge
from evaluators.image import mse
from evaluators.matrices import SelfOthers, personalised_vs_global, self_others, self_others_curves
from evaluators.registry import REGISTRY, Metric, resolve, score_task
from evaluators.stats import BootstrapCI, MeanStd, bootstrap_ci, mean_std
from evaluators.text import exact_match, normalise, token_f1
from evaluators.wordnet import default_nltk_dir, ensure_wordnet, find_wordnet, setup_wordnet

__all__ = [
    "BERTScoreResult",
    "BootstrapCI",
    "MeanStd",
    "MetricInputError",
    "MetricSetupError",
    "Metric",
    "REGISTRY",
    "ROUGE_TYPES",
    "SelfOthers",
    "a_auc",
    "a_last",
    "accuracy_mc",
    "base_novel_hm",
    "bertscore",
    "bleu",
    "bootstrap_ci",
    "cider",
    "classification_accuracy",
    "default_bertscore_model",
    "default_nltk_dir",
    "ensure_wordnet",
    "exact_match",
    "find_wordnet",
    "forgetting",
    "google_bleu",
    "match_choice",
    "mc_correctness",
    "mean_std",
    "meteor",
    "mse",
    "normalise",
    "parse_choices",
    "per_domain_accuracy",
    "personalised_vs_global",
    "resolve",
    "rouge",
    "self_others",
    "score_task",
    "self_others_curves",
    "setup_wordnet",
    "token_f1",
]
