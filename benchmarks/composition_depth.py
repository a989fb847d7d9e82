"""A look-up composed with an option's label: tiny language models trained from scratch, in text.

The lettered drake-synth tasks need two hops: find the answer (the look-up), then give the
label of the option that says it. The shipped tiny models find answers but not their labels
(the dataset card's *Why the lettered ... tasks stay at chance*). This script asks whether that
is a matter of depth, apart from pictures, pretraining data and LoRA: it trains decoder-only
language models of the zoo's width from random initialisation on text questions, a new sample
every time (nothing can be learnt by heart), and scores held-out questions of each kind:

* ``lookup``: facts ("the star is red ."), then "what colour is the <shape> ?"; answer the colour;
* ``copy``: "which option is <colour> ?" over lettered colours; answer the letter;
* ``two-hop``: facts, the colour question over lettered colours; answer the letter (the
  composition, as probe-text-two-hop in learnability.py);
* and, for ``--lora-kind``, the same three the other way round: ``reverse-lookup`` ("which is
  <colour> ?", answer the shape), ``shape-copy`` ("which option is <shape> ?" over lettered
  shapes) and ``reverse`` (their composition: "which is <colour> ?" over lettered shapes).

Training draws the three kinds with equal odds (``--mix all``) or those named (``--mix two-hop``,
``--mix lookup copy``). Each depth in ``--depths`` trains with the same seed, data and budget;
the script prints one row per depth and scoring point, and ``--json`` writes them.

``--lora-kind reverse`` then asks what a client task's LoRA can add to such a model: a LoRA of
the zoo's defaults (rank 8, alpha 16, every linear map) trains on that kind alone for
``--lora-steps`` steps of ``--lora-batch`` (the calibration's 240 of 8 by default), and a last
row per depth scores every kind after it. Pretraining with the colour composition
(``--mix lookup copy two-hop reverse-lookup shape-copy``) against without it
(``--mix lookup copy reverse-lookup shape-copy``) tells whether a composition learnt on one
family carries over to another through a task's LoRA.

    python benchmarks/composition_depth.py [--depths 2 3 4 6] [--steps 4000] [--every 1000]
        [--hidden 128] [--heads 4] [--kv-heads 2] [--batch 64] [--lr 1e-3] [--mix all | KIND...]
        [--facts words] [--lora-kind reverse [--lora-steps 240] [--lora-batch 8]
        [--lora-lr 2e-3]] [--jobs 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np
import torch

from drake.workers import exit_with_parent

SHAPES = ("circle", "square", "triangle", "star", "cross", "diamond", "heart", "ring")
COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "white", "black")
LETTERS = ("A", "B", "C", "D")
KINDS = ("lookup", "copy", "two-hop")
#: The same three asked the other way round (the shape of a colour), for ``--lora-kind``.
REVERSE_KINDS = ("reverse-lookup", "shape-copy", "reverse")
ALL_KINDS = KINDS + REVERSE_KINDS
WORDS = ("<pad>", "the", "is", ".", "?", ":", "what", "colour", "which", "option", "question",
         "answer", "picture", *SHAPES, *COLOURS, *LETTERS, *(f"_{letter}" for letter in LETTERS),
         *(f"{shape}/{colour}" for shape in SHAPES for colour in COLOURS))
VOCAB = {w: i for i, w in enumerate(WORDS)}
#: The LoRA targets of ``--lora-kind``: the linear maps the zoo's LoRA takes in its language model.
LINEAR_MAPS = r".*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


def sample(kind: str, rng: np.random.Generator, facts: str = "words") -> tuple[list[str], str]:
    """One question of ``kind`` as words, and its one-word answer.

    ``facts="words"`` states each shape's colour in words ("the star is red ."): the look-up
    must first bind the colour to its shape across tokens. ``facts="bound"`` gives each shape
    and its colour as one token ("picture : star/red ..."), as a picture's patch carries both:
    the look-up is then one attention hop, as the zoo's visual look-up.
    """
    k = int(rng.integers(2, 5))
    shapes = [str(s) for s in rng.choice(SHAPES, k, replace=False)]
    colours = [str(c) for c in rng.choice(COLOURS, k, replace=False)]
    asked = int(rng.integers(k))
    if facts == "bound":
        stated = ["picture", ":", *(f"{s}/{c}" for s, c in zip(shapes, colours)), "."]
    elif facts == "words":
        stated = [w for s, c in zip(shapes, colours) for w in ("the", s, "is", c, ".")]
    else:
        raise ValueError(f"unknown facts {facts!r}; use 'words' or 'bound'")
    if kind in REVERSE_KINDS:  # asked by colour, answered by shape
        gold, pool, question = shapes[asked], SHAPES, ["which", "is", colours[asked], "?"]
    else:
        gold, pool, question = colours[asked], COLOURS, ["what", "colour", "is", "the",
                                                         shapes[asked], "?"]
    if kind in ("lookup", "reverse-lookup"):
        return [*stated, "question", ":", *question, "answer", ":"], gold
    others = [str(c) for c in rng.choice([c for c in pool if c != gold],
                                         int(rng.integers(1, 4)), replace=False)]
    options = [gold, *others]
    rng.shuffle(options)
    lines = [w for label, c in zip(LETTERS, options) for w in (label, ".", c)]
    # The zoo's tokenizer spells an answer's letter ("ASSISTANT: B", after a space) with another
    # token than the option line's ("\nB. red"), so the answer is the label's twin, "_B".
    letter = "_" + LETTERS[options.index(gold)]
    if kind in ("copy", "shape-copy"):
        return ["question", ":", "which", "option", "is", gold, "?", *lines, "answer", ":"], letter
    if kind in ("two-hop", "reverse"):
        return [*stated, "question", ":", *question, *lines, "answer", ":"], letter
    raise ValueError(f"unknown kind {kind!r}; use one of {ALL_KINDS}")


def batch(kinds: list[str], rng: np.random.Generator,
          facts: str = "words") -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompts ``[B, T]`` (the answer is predicted at the last position) and the
    answers' token ids ``[B]``."""
    pairs = [sample(kind, rng, facts) for kind in kinds]
    width = max(len(words) for words, _ in pairs)
    ids = torch.zeros((len(pairs), width), dtype=torch.long)
    for row, (words, _) in enumerate(pairs):
        ids[row, width - len(words):] = torch.tensor([VOCAB[w] for w in words])
    return ids, torch.tensor([VOCAB[answer] for _, answer in pairs])


def build_model(depth: int, hidden: int, heads: int, seed: int, kv_heads: int | None = None):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(WORDS), hidden_size=hidden, num_hidden_layers=depth,
                         num_attention_heads=heads,
                         num_key_value_heads=kv_heads or max(1, heads // 2),
                         intermediate_size=3 * hidden, max_position_embeddings=128,
                         pad_token_id=0, tie_word_embeddings=True)
    return LlamaForCausalLM(config)


def last_logits(model, ids: torch.Tensor) -> torch.Tensor:
    mask = (ids != 0).long()
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return model(input_ids=ids, attention_mask=mask, position_ids=positions,
                 logits_to_keep=1).logits[:, -1]


def score(model, kind: str, count: int, seed: int, facts: str = "words") -> float:
    """Held-out accuracy (%) on ``count`` questions of ``kind`` (their own generator)."""
    rng = np.random.default_rng([seed, 1, ALL_KINDS.index(kind)])
    right = 0
    model.eval()
    with torch.no_grad():
        for start in range(0, count, 250):
            ids, answers = batch([kind] * min(250, count - start), rng, facts)
            right += int((last_logits(model, ids).argmax(-1) == answers).sum())
    model.train()
    return 100.0 * right / count


def scored_kinds(args: argparse.Namespace) -> tuple[str, ...]:
    """The kinds each row scores: the three, and the reverse ones where training asks them."""
    asked = set(args.mix) | {args.lora_kind}
    return ALL_KINDS if asked & set(REVERSE_KINDS) else KINDS


def train(model, kinds: list[str], steps: int, batch_size: int, lr: float,
          rng: np.random.Generator, args: argparse.Namespace, row: dict) -> list[dict]:
    """``steps`` AdamW steps on the trainable weights (warm-up over 200, clipped at 1), a fresh
    batch of ``kinds`` at each; every ``args.every`` steps and at the end a row of ``row``'s
    fields, the mean loss since the last and each scored kind's held-out accuracy."""
    weights = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(weights, lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: min(1.0, (s + 1) / 200))
    rows, start, losses = [], time.perf_counter(), []
    for step in range(1, steps + 1):
        ids, answers = batch([kinds[int(i)] for i in rng.integers(len(kinds), size=batch_size)],
                             rng, args.facts)
        loss = torch.nn.functional.cross_entropy(last_logits(model, ids), answers)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(weights, 1.0)
        optimiser.step()
        schedule.step()
        losses.append(loss.item())
        if step % args.every == 0 or step == steps:
            rows.append({**row, "step": step, "loss": round(float(np.mean(losses)), 4),
                         **{kind: round(score(model, kind, args.test, args.seed, args.facts), 1)
                            for kind in scored_kinds(args)},
                         "seconds": round(time.perf_counter() - start, 1)})
            losses = []
            print(json.dumps(rows[-1]), flush=True)
    return rows


def run(depth: int, args: argparse.Namespace) -> list[dict]:
    torch.set_num_threads(1)
    model = build_model(depth, args.hidden, args.heads, args.seed, args.kv_heads)
    rng = np.random.default_rng([args.seed, 0])
    kinds = list(KINDS) if args.mix == ["all"] else args.mix
    rows = train(model, kinds, args.steps, args.batch, args.lr, rng, args,
                 {"depth": depth, "stage": "pretrain"})
    if args.lora_kind:
        from drake.models.lora import add_lora
        from drake.models.zoo import get_info

        # the tiny zoo's setting, on every linear map (this model has no ``language_model``)
        zoo = get_info("tiny-llava-llama").lora_defaults
        lora = add_lora(model, "task", r=zoo["r"], alpha=zoo["alpha"], dropout=zoo["dropout"],
                        seed=args.seed, target_regex=LINEAR_MAPS)
        rows += train(lora, [args.lora_kind], args.lora_steps, args.lora_batch, args.lora_lr,
                      np.random.default_rng([args.seed, 2]), args,
                      {"depth": depth, "stage": f"lora {args.lora_kind}"})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 3, 4, 6])
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=None,
                        help="key/value heads (default: half the heads, as tiny-llava-llama)")
    parser.add_argument("--facts", choices=("words", "bound"), default="words")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--mix", nargs="+", choices=("all", *ALL_KINDS), default=["all"],
                        help="the kinds training draws, with equal odds (all: the first three)")
    parser.add_argument("--lora-kind", choices=ALL_KINDS, default=None,
                        help="then train a LoRA on this kind alone")
    parser.add_argument("--lora-steps", type=int, default=240)
    parser.add_argument("--lora-batch", type=int, default=8)
    parser.add_argument("--lora-lr", type=float, default=2e-3)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    print(f"chance: lookup {100 / len(COLOURS):.1f} (or 1/k of the facts' colours), copy and "
          f"two-hop about {100 * np.mean([1 / n for n in (2, 3, 4)]):.1f}", flush=True)
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn"),
                             initializer=exit_with_parent) as pool:
        results = list(pool.map(run, args.depths, [args] * len(args.depths)))
    rows = [row for rows in results for row in rows]
    kinds = scored_kinds(args)
    print(f"{'depth':>5} {'stage':<14} {'step':>6} {'loss':>7} "
          + " ".join(f"{k:>14}" for k in kinds))
    for row in rows:
        print(f"{row['depth']:>5} {row['stage']:<14} {row['step']:>6} {row['loss']:>7.3f} "
              + " ".join(f"{row[k]:>14.1f}" for k in kinds))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
