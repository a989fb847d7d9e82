"""Text-generation metrics: BLEU, Google-BLEU, ROUGE, METEOR and CIDEr-D.

BLEU, ROUGE and METEOR are thin wrappers over their reference libraries (sacrebleu, rouge-score,
NLTK) and agree with a direct call to them; Google-BLEU (GLEU) and CIDEr-D are written here from
their papers, because their usual homes (Hugging Face ``evaluate``, ``pycocoevalcap``) are not
dependencies of the suite. Every function takes one prediction per sample and, per sample, one
reference string or a non-empty list of reference strings, and returns a corpus-level score on a
0-100 scale (CIDEr-D: see :func:`cider` for its scale).

The reference libraries are imported on first use, so importing this module is cheap.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

from evaluators._validate import as_reference_lists, check_references, check_texts
from evaluators.errors import MetricInputError

__all__ = ["ROUGE_TYPES", "bleu", "google_bleu", "rouge", "meteor", "cider"]

logger = logging.getLogger(__name__)

ROUGE_TYPES: tuple[str, ...] = ("rouge1", "rouge2", "rougeL", "rougeLsum")

ReferencesArg = Sequence[str | Sequence[str]]


def _reference_streams(references: Sequence[object], single: bool) -> list[Sequence[str | None]]:
    """Transpose per-sample references into sacrebleu's reference streams.

    Samples with fewer references than the most are padded with ``None``, which sacrebleu skips.
    """
    if single:
        return [references]  # type: ignore[list-item]
    refs = as_reference_lists(references, single)
    width = max(len(r) for r in refs)
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


def bleu(
    predictions: Sequence[str],
    references: ReferencesArg,
    *,
    tokenize: str = "13a",
    lowercase: bool = False,
    max_order: int = 4,
) -> float:
    """Corpus BLEU (Papineni et al. 2002) computed by sacrebleu.

    Modified n-gram precisions for n = 1..``max_order`` are pooled over the corpus, combined by a
    geometric mean and multiplied by the brevity penalty exp(min(0, 1 - r/c)), where c is the
    total prediction length and r the total closest-reference length. This is
    ``sacrebleu.corpus_bleu`` with its defaults (13a tokenisation, case-sensitive,
    exponential smoothing), already on a 0-100 scale.

    Parameters
    ----------
    predictions : list of str
        One prediction per sample (empty strings are allowed).
    references : list of str or list of list of str
        One reference, or a non-empty list of references, per sample; the lists may differ in
        length.
    tokenize : str
        sacrebleu tokenizer name (``"13a"``, ``"intl"``, ``"char"``, ``"none"``, ...).
    lowercase : bool
        Lowercase before scoring.
    max_order : int
        Highest n-gram order (4 gives BLEU-4; 1 gives BLEU-1).

    Returns
    -------
    float
        BLEU on a 0-100 scale.

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch or ``None`` entries.

    Examples
    --------
    >>> round(bleu(["the cat sat on the mat"], ["the cat sat on the mat"]), 4)
    100.0
    """
    from sacrebleu.metrics import BLEU

    predictions = check_texts("predictions", predictions)
    references, single = check_references("references", references, len(predictions))
    if not isinstance(max_order, int) or max_order < 1:
        raise MetricInputError(f"max_order must be a positive int, got {max_order!r}")
    metric = BLEU(tokenize=tokenize, lowercase=lowercase, max_ngram_order=max_order)
    return float(metric.corpus_score(predictions, _reference_streams(references, single)).score)


def _ngram_counts(tokens: list[str], min_len: int, max_len: int) -> Counter[tuple[str, ...]]:
    counts: Counter[tuple[str, ...]] = Counter()
    n_tok = len(tokens)
    for n in range(min_len, min(max_len, n_tok) + 1):
        counts.update(tuple(tokens[i : i + n]) for i in range(n_tok - n + 1))
    return counts


def _n_ngrams(length: int, min_len: int, max_len: int) -> int:
    return sum(max(0, length - n + 1) for n in range(min_len, max_len + 1))


def _tokenizer_13a() -> Callable[[str], list[str]]:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tok = Tokenizer13a()
    return lambda text: tok(text).split()


def google_bleu(
    predictions: Sequence[str],
    references: ReferencesArg,
    *,
    min_len: int = 1,
    max_len: int = 4,
    tokenizer: Callable[[str], list[str]] | None = None,
) -> float:
    """Corpus Google-BLEU (GLEU; Wu et al. 2016), as FediLoRA reports it.

    For a prediction h and a reference r, let H and R be the multisets of their n-grams of orders
    ``min_len``..``max_len`` and tp = |H ∩ R| (clipped counts). Sentence GLEU is
    min(tp/|H|, tp/|R|) = tp / max(|H|, |R|). With several references, the sample uses the
    reference with the highest sentence GLEU (the first on ties); references for which
    max(|H|, |R|) = 0 are skipped. The corpus score sums numerators and denominators over the
    samples: GLEU = sum tp / sum max(|H|, |R|), and 0 when the denominator is 0. Times 100.

    Texts are tokenised with sacrebleu's 13a tokenizer (case kept), as the Hugging Face
    ``evaluate`` metric ``google_bleu`` used by FediLoRA does, so the value equals
    ``evaluate.load("google_bleu")`` times 100. FediLoRA first normalises predictions and
    references with the VQA/EvalAI rules; apply :func:`evaluators.text.normalise` to both to
    reproduce that.

    Parameters
    ----------
    predictions : list of str
        One prediction per sample.
    references : list of str or list of list of str
        One reference, or a non-empty list of references, per sample.
    min_len, max_len : int
        Smallest and largest n-gram order (default 1 and 4).
    tokenizer : callable, optional
        ``str -> list[str]``; default the 13a tokenizer.

    Returns
    -------
    float
        GLEU on a 0-100 scale.

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch, ``None`` entries or bad n-gram orders.

    Examples
    --------
    >>> google_bleu(["a b c"], ["a b d"])  # tp = 2 + 1 = 3 of max(6, 6) n-grams
    50.0
    """
    predictions = check_texts("predictions", predictions)
    references, single = check_references("references", references, len(predictions))
    if not (isinstance(min_len, int) and isinstance(max_len, int) and 1 <= min_len <= max_len):
        raise MetricInputError(
            f"need 1 <= min_len <= max_len, got min_len={min_len!r}, max_len={max_len!r}"
        )
    tok = tokenizer if tokenizer is not None else _tokenizer_13a()
    refs = as_reference_lists(references, single)
    total_match = 0
    total_all = 0
    for pred, rs in zip(predictions, refs):
        hyp_tokens = tok(pred)
        hyp = _ngram_counts(hyp_tokens, min_len, max_len)
        n_hyp = _n_ngrams(len(hyp_tokens), min_len, max_len)
        best: tuple[int, int] | None = None
        for r in rs:
            ref_tokens = tok(r)
            n_all = max(n_hyp, _n_ngrams(len(ref_tokens), min_len, max_len))
            if n_all == 0:
                continue
            ref = _ngram_counts(ref_tokens, min_len, max_len)
            tp = sum(min(c, ref[g]) for g, c in hyp.items() if g in ref)
            # strictly greater keeps the first reference on ties
            if best is None or tp * best[1] > best[0] * n_all:
                best = (tp, n_all)
        if best is not None:
            total_match += best[0]
            total_all += best[1]
    return 100.0 * total_match / total_all if total_all else 0.0


def rouge(
    predictions: Sequence[str], references: ReferencesArg, *, use_stemmer: bool = True
) -> dict[str, float]:
    """ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum F-measures from Google's ``rouge-score``.

    Each pair is scored with ``RougeScorer(ROUGE_TYPES, use_stemmer=True).score(ref, pred)``
    (``score_multi`` with several references, which keeps the reference with the best F-measure
    for each type); the result is the plain mean of the F-measures over samples, times 100 (no
    bootstrap aggregation).

    rouge-score's tokenizer lowercases and keeps only ``[a-z0-9]`` runs, so non-Latin text
    scores 0. ROUGE-Lsum treats each newline-separated line as a sentence, as rouge-score expects:
    put one sentence per line in predictions and references to get summary-level LCS.
    FediLoRA reports ROUGE-Lsum after VQA/EvalAI normalisation (:func:`evaluators.text.normalise`
    on both sides; note that it joins lines, so split sentences before normalising each line).

    Parameters
    ----------
    predictions : list of str
        One prediction per sample.
    references : list of str or list of list of str
        One reference, or a non-empty list of references, per sample.
    use_stemmer : bool
        Porter-stem tokens before matching (default True, as FediLoRA does).

    Returns
    -------
    dict
        ``{"rouge1", "rouge2", "rougeL", "rougeLsum"}`` -> F-measure on a 0-100 scale.

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch or ``None`` entries.

    Examples
    --------
    >>> rouge(["the cat sat"], ["the cat sat"])["rougeL"]
    100.0
    """
    from rouge_score.rouge_scorer import RougeScorer

    predictions = check_texts("predictions", predictions)
    references, single = check_references("references", references, len(predictions))
    scorer = RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)
    sums = dict.fromkeys(ROUGE_TYPES, 0.0)
    for pred, ref in zip(predictions, references):
        if isinstance(ref, str):
            scores = scorer.score(ref, pred)
        elif len(ref) == 1:
            scores = scorer.score(ref[0], pred)
        else:
            scores = scorer.score_multi(list(ref), pred)
        for key in ROUGE_TYPES:
            sums[key] += scores[key].fmeasure
    n = len(predictions)
    return {key: 100.0 * total / n for key, total in sums.items()}


def meteor(
    predictions: Sequence[str],
    references: ReferencesArg,
    *,
    alpha: float = 0.9,
    beta: float = 3.0,
    gamma: float = 0.5,
) -> float:
    """Mean sentence METEOR (Banerjee and Lavie 2005) from NLTK, with WordNet synonyms.

    Each pair is scored with
    ``nltk.translate.meteor_score.meteor_score([ref.split() ...], pred.split(), wordnet=wn)``:
    exact, Porter-stem and WordNet-synonym unigram matches, F-mean weighted by ``alpha``,
    fragmentation penalty ``gamma * (chunks / matches) ** beta``; with several references the
    best one counts. Tokens are the whitespace-split words (``str.split()``), as TAP does; NLTK
    lowercases them. The result is the mean over samples, times 100.

    WordNet is located by :func:`evaluators.wordnet.ensure_wordnet`; if it is missing this raises
    rather than falling back to exact matching.

    Parameters
    ----------
    predictions : list of str
        One prediction per sample.
    references : list of str or list of list of str
        One reference, or a non-empty list of references, per sample.
    alpha, beta, gamma : float
        METEOR parameters (NLTK's defaults).

    Returns
    -------
    float
        METEOR on a 0-100 scale.

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch or ``None`` entries.
    MetricSetupError
        When WordNet is not installed (run ``drake setup-metrics``).
    """
    from nltk.translate.meteor_score import meteor_score

    from evaluators.wordnet import ensure_wordnet

    predictions = check_texts("predictions", predictions)
    references, single = check_references("references", references, len(predictions))
    wordnet = ensure_wordnet()
    total = 0.0
    for pred, ref in zip(predictions, references):
        refs = [ref.split()] if isinstance(ref, str) else [r.split() for r in ref]
        total += meteor_score(
            refs, pred.split(), wordnet=wordnet, alpha=alpha, beta=beta, gamma=gamma
        )
    return 100.0 * total / len(predictions)


_CIDER_PUNCT = re.compile(r"[^\w\s]|_")


def _cider_tokens(text: str) -> list[str]:
    return _CIDER_PUNCT.sub(" ", text.lower()).split()


def cider(
    predictions: Sequence[str],
    references: ReferencesArg,
    *,
    sigma: float = 6.0,
    max_order: int = 4,
) -> float:
    """Corpus CIDEr-D (Vedantam et al. 2015), as pycocoevalcap computes it, times 100.

    With N samples (images), sample i's candidate c_i and references s_i1..s_im:

    * n-gram vectors g^n(x), n = 1..4: each n-gram k of x weighted by TF-IDF
      ``count_x(k) * (log N - log max(1, df(k)))``, where df(k) is the number of samples whose
      reference set contains k (document frequency over the reference corpus);
    * ``CIDEr-D_n(c_i, S_i) = 10/m * sum_j exp(-(l(c_i) - l(s_ij))^2 / (2 sigma^2))
      * <min(g^n(c_i), g^n(s_ij)), g^n(s_ij)> / (|g^n(c_i)| |g^n(s_ij)|)``, with sigma = 6, the
      element-wise min clipping candidate weights by reference weights, l the token count, and
      the term 0 when either norm is 0;
    * ``CIDEr-D(c_i, S_i) = (1/4) sum_n CIDEr-D_n(c_i, S_i)``; the corpus score is its mean over
      samples.

    **Scale.** pycocoevalcap returns this value, which lies in [0, 10]; captioning papers print
    it times 100 (e.g. "CIDEr 110.5" for 1.105). This function returns pycocoevalcap's value
    times 100, so its numbers read like the papers' tables; it is the one metric of the suite
    whose range is [0, 1000] rather than [0, 100].

    **Corpus dependence.** The IDF weights come from the whole reference corpus, so a sample's
    score depends on the other samples, and scores from different corpora do not compare. A
    one-sample corpus is degenerate: log N = 0 makes every weight 0 and the score 0 (a warning
    is logged). Score a whole test set at once.

    Tokens: lowercase, every character that is not a letter, digit or whitespace replaced by a
    space, then split on whitespace (pycocoevalcap uses the Java PTB tokenizer and also drops
    punctuation; contractions may tokenise differently). Lengths are token counts.

    Parameters
    ----------
    predictions : list of str
        One candidate caption per sample.
    references : list of str or list of list of str
        One reference, or a non-empty list of references, per sample.
    sigma : float
        Length-penalty width (6 in CIDEr-D).
    max_order : int
        Highest n-gram order (4 in CIDEr-D).

    Returns
    -------
    float
        CIDEr-D times 100 (pycocoevalcap value x 100; range 0-1000).

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch, ``None`` entries or bad parameters.

    Examples
    --------
    >>> round(cider(["a b", "c d"], [["a b", "a c"], "c d"]), 4)  # worked in the tests
    419.1942
    """
    predictions = check_texts("predictions", predictions)
    references, single = check_references("references", references, len(predictions))
    if not (isinstance(max_order, int) and max_order >= 1):
        raise MetricInputError(f"max_order must be a positive int, got {max_order!r}")
    if not (isinstance(sigma, (int, float)) and sigma > 0 and math.isfinite(sigma)):
        raise MetricInputError(f"sigma must be a positive number, got {sigma!r}")
    refs = as_reference_lists(references, single)
    n_samples = len(predictions)
    if n_samples == 1:
        logger.warning(
            "CIDEr-D over a single sample is 0 by construction (IDF = log 1 = 0); "
            "score the whole test set at once"
        )

    ref_tokens = [[_cider_tokens(r) for r in rs] for rs in refs]
    ref_counts = [[_ngram_counts(t, 1, max_order) for t in ts] for ts in ref_tokens]
    df: Counter[tuple[str, ...]] = Counter()
    for counts in ref_counts:
        df.update(set().union(*counts))
    log_n = math.log(float(n_samples))

    def vectorise(
        counts: Counter[tuple[str, ...]],
    ) -> tuple[list[dict[tuple[str, ...], float]], list[float]]:
        vec: list[dict[tuple[str, ...], float]] = [{} for _ in range(max_order)]
        norms = [0.0] * max_order
        for gram, tf in counts.items():
            n = len(gram) - 1
            w = tf * (log_n - math.log(max(1.0, float(df.get(gram, 0)))))
            vec[n][gram] = w
            norms[n] += w * w
        return vec, [math.sqrt(x) for x in norms]

    two_sigma2 = 2.0 * sigma * sigma
    total = 0.0
    for pred, tokens_list, counts_list in zip(predictions, ref_tokens, ref_counts):
        hyp_tokens = _cider_tokens(pred)
        hyp_vec, hyp_norm = vectorise(_ngram_counts(hyp_tokens, 1, max_order))
        acc = [0.0] * max_order
        for r_tokens, r_counts in zip(tokens_list, counts_list):
            ref_vec, ref_norm = vectorise(r_counts)
            delta = float(len(hyp_tokens) - len(r_tokens))
            penalty = math.exp(-(delta * delta) / two_sigma2)
            for n in range(max_order):
                if hyp_norm[n] == 0.0 or ref_norm[n] == 0.0:
                    continue
                rv = ref_vec[n]
                dot = sum(min(w, rv[g]) * rv[g] for g, w in hyp_vec[n].items() if g in rv)
                acc[n] += penalty * dot / (hyp_norm[n] * ref_norm[n])
        total += 10.0 * (sum(acc) / max_order) / len(tokens_list)
    return 100.0 * total / n_samples
