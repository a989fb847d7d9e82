"""Moving a teacher's next-token distributions onto a student with another tokenizer.

FedMKT (Fan et al. 2024) and the cross-family distillation of TAKFL need a teacher's
distribution per answer token on the student's tokens when the two model families tokenize
differently. Two maps, as FuseLLM and FATE-LLM's FedMKT build them:

* **Vocabulary map** (:func:`vocab_map`): each teacher token goes to the student token spelled
  the same once the word-start marker is swapped (``▁`` for SentencePiece tokenizers, ``Ġ`` for
  byte-level BPE), else to the student token at the least Levenshtein distance (ties: the
  lowest id).
* **Sequence alignment** (:func:`align`): the two tokenizations of the same answer are aligned
  by dynamic time warping, the cost of a pair being the Levenshtein distance of the tokens with
  their markers stripped; the path is traced back preferring the diagonal, then a step in the
  student's sequence, then one in the teacher's.

:func:`transfer` gives each student position the teacher's distribution at its aligned
position, moved through the vocabulary map, where exactly one teacher position aligns with it
and the two tokens agree (same string, or the map sends one to the other); every other
position gets a one-hot target on the student's own token. A moved distribution keeps its
``top_k`` most likely teacher tokens; tokens that the map sends to the same student token add
up, and the result is **renormalised** to sum to one (the FedMosaic code instead softmaxes the
moved probabilities again as if they were logits, which flattens the target towards uniform;
``resoftmax=True`` reproduces that, as a recorded option). The one-hot sits on the token the
position predicts (the label), not on the current input token as FuseLLM's code does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

#: word-start markers of the common tokenizer families
MARKERS = ("\u2581", "\u0120")


def strip_markers(token: str) -> str:
    for m in MARKERS:
        token = token.replace(m, "")
    return token


def marker_of(vocab: Mapping[str, int]) -> str:
    """The word-start marker a vocabulary uses most (``▁`` or ``Ġ``; ``▁`` where neither)."""
    counts = {m: sum(1 for t in vocab if t.startswith(m)) for m in MARKERS}
    return max(MARKERS, key=lambda m: (counts[m], m == MARKERS[0]))


def vocab_map(src: Mapping[str, int], dst: Mapping[str, int]) -> torch.Tensor:
    """``out[i]``: the id in ``dst`` of the token that source token ``i`` maps to (exact after
    swapping the markers, else the least Levenshtein distance, ties to the lowest id)."""
    s_mark, d_mark = marker_of(src), marker_of(dst)
    dst_tokens = [t for t, _ in sorted(dst.items(), key=lambda kv: kv[1])]
    dst_ids = [i for _, i in sorted(dst.items(), key=lambda kv: kv[1])]
    out = torch.zeros(max(src.values()) + 1, dtype=torch.long)
    for token, i in src.items():
        swapped = token.replace(s_mark, d_mark) if s_mark != d_mark else token
        if swapped in dst:
            out[i] = dst[swapped]
            continue
        # extractOne keeps the first of equally distant choices, i.e. the lowest id
        _, _, pos = process.extractOne(swapped, dst_tokens, scorer=Levenshtein.distance)
        out[i] = dst_ids[pos]
    return out


def align(student: Sequence[str], teacher: Sequence[str]) -> list[tuple[int, int]]:
    """The DTW path ``[(i, j), ...]`` pairing student position ``i`` with teacher position
    ``j``, from ``(0, 0)`` to the two ends (see the module docstring)."""
    n, m = len(student), len(teacher)
    if not n or not m:
        return []
    a = [strip_markers(t) for t in student]
    b = [strip_markers(t) for t in teacher]
    cost = np.array([[Levenshtein.distance(x, y) for y in b] for x in a], dtype=np.float64)
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            acc[i, j] = cost[i - 1, j - 1] + min(acc[i - 1, j - 1], acc[i - 1, j],
                                                 acc[i, j - 1])
    path, i, j = [], n, m
    while True:
        path.append((i - 1, j - 1))
        if i == 1 and j == 1:
            break
        moves = [(acc[i - 1, j - 1], i - 1, j - 1), (acc[i - 1, j], i - 1, j),
                 (acc[i, j - 1], i, j - 1)]
        _, i, j = min(moves, key=lambda mv: mv[0])  # min keeps the first: diag, up, left
    return path[::-1]


def transfer(student_tokens: Sequence[str], student_ids: Sequence[int],
             teacher_tokens: Sequence[str], teacher_ids: Sequence[int],
             teacher_probs: torch.Tensor, vmap: torch.Tensor, student_vocab: int, *,
             top_k: int = 128, resoftmax: bool = False) -> torch.Tensor:
    """Targets ``[len(student_ids), student_vocab]`` for one answer (see the module
    docstring): ``teacher_probs`` ``[len(teacher_ids), V_t]`` are the teacher's probabilities
    at its positions, ``vmap`` the teacher → student vocabulary map."""
    out = torch.zeros(len(student_ids), student_vocab, dtype=teacher_probs.dtype)
    partners: dict[int, list[int]] = {}
    for i, j in align(student_tokens, teacher_tokens):
        partners.setdefault(i, []).append(j)
    for i, sid in enumerate(student_ids):
        js = partners.get(i, [])
        j = js[0] if len(js) == 1 else None
        agree = j is not None and (student_tokens[i] == teacher_tokens[j]
                                   or int(vmap[teacher_ids[j]]) == int(sid))
        if not agree:
            out[i, sid] = 1.0
            continue
        p = teacher_probs[j]
        k = min(top_k, p.numel())
        vals, idx = p.topk(k)
        row = torch.zeros(student_vocab, dtype=p.dtype).index_add_(0, vmap[idx], vals)
        if resoftmax:  # the kept entries' probabilities softmaxed as if logits
            kept = row > 0
            row[kept] = torch.softmax(row[kept], -1)
            out[i] = row
        else:
            out[i] = row / row.sum().clamp_min(1e-12)
    return out
