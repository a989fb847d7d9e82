"""Can a pretrained tiny model learn to give the label of an answer it finds? (issue #13)

``public_formats.py`` shows the shipped models answer the public questions in words (``open``,
``choice``) far better than by option label (``letter``, ``id``), where they sit at chance. This
script continues stage 2 of pretraining (the same data, batches and grounding loss as
``drake models pretrain``, on the frozen tower, every language weight trained) with up to two
auxiliary losses that each supply one step of the indirection, and measures whether the label
step follows:

* ``--early-weight`` with ``--early-layer K``: the *early answer*. At the first answer position,
  the residual stream after layer ``K``, read through the final norm and the tied output
  embeddings (a logit lens), must name the answer's first word: the gold option's word behind a
  letter or an id, the answer itself in the open and choice formats (verdicts are left out). It
  asks the model to hold the answer as a word while layers remain to match it with the options.
* ``--attend-weight``: *attention to the gold option*. Head 0 of the last layer, at the first
  answer position, must attend to the gold option's word (its first token, on the option line
  after the image; the loss is minus the log of that attention weight). It supplies the
  matching step itself.

Before and after, it prints the held-out format accuracies (greedy exact match, as
``public_formats.py``) and, on the held-out lettered questions, how the last layer's head 0
spreads its attention over the options: the mean share on the gold option's word, how often
the gold gets the most, the model's letter accuracy (argmax over the option letters) and how
often that letter is the one head 0 attends to most.

    python benchmarks/option_indirection.py [--model tiny-llava-qwen] [--model-cache DIR]
        [--steps 3000] [--lr 3e-4] [--train-size 20000] [--early-layer 2] [--early-weight 0]
        [--attend-weight 0] [--samples 1200] [--seed 0] [--save weights.safetensors]

One thread, CPU; 3000 steps of the 3-layer qwen take about 25 minutes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from public_formats import format_means, gold_index, load_tiny, model_arguments, options, table

from drake.models.bundle import IGNORE_INDEX, _Encoded
from evaluators.choice import parse_choices

# drake.models re-exports the function `pretrain`, which hides the module of that name
pretrain = importlib.import_module("drake.models.pretrain")

BATCH_SIZE = 32
#: Share of the easy pool in each batch (pretraining's floor, where it ends).
EASY_SHARE = 0.1


def _format(sample: dict[str, Any]) -> str:
    return json.loads(sample["meta"]).get("format", "open")


def content_answer(sample: dict[str, Any]) -> str | None:
    """The answer as words: the gold option behind a letter or an id, the answer itself in
    the other formats, None for a verdict (its answer is a judgement, not the answer)."""
    fmt = _format(sample)
    if fmt == "verdict":
        return None
    if fmt in ("letter", "id"):
        return parse_choices(sample["prompt"])[gold_index(sample)]
    return sample["answer"]


def option_positions(bundle: Any, sample: dict[str, Any], ids: Sequence[int]) -> list[int]:
    """Token positions of each option's first word on the option lines after the last image
    (``A. word`` / ``1. word``), in option order, for a lettered or numbered question.

    Raises
    ------
    ValueError
        Naming the sample, when an option's line is not among its tokens.
    """
    words = parse_choices(sample["prompt"])
    tokens = [t.lstrip("\u2581") for t in bundle.tokenizer.convert_ids_to_tokens(list(ids))]
    found = []
    for label, word in zip(options(sample), words, strict=True):
        first = word.split()[0]
        hits = [i + 2 for i in range(len(tokens) - 2)
                if tokens[i] == label and tokens[i + 1] == "." and tokens[i + 2] == first]
        if not hits:
            raise ValueError(f"sample {sample['id']}: option {label}. {word!r} is not among its "
                             "prompt tokens")
        found.append(hits[-1])
    return found


def answer_token(bundle: Any, sample: dict[str, Any], word: str) -> int:
    """The first token of ``word`` as the model answers it (after the chat's answer prefix,
    so ``▁word``: the token an option line holds, not the bare ``word`` of mid-word text)."""
    return bundle._answer_ids(word, eos=False, sample_id=sample["id"])[0]


def lens_logits(bundle: Any, state: torch.Tensor, *, final: bool) -> torch.Tensor:
    """The logit lens of residual-stream ``state``: read through the final norm and the tied
    output embeddings. transformers returns the last layer's state (``final``) already normed,
    so that one goes to the output embeddings as it is."""
    model = bundle.model
    if not final:
        state = model.model.language_model.norm(state)
    return model.get_output_embeddings()(state)


@dataclass
class _Pool:
    """One training pool: encoded samples, their tower features, and per sample the early
    answer's first token id and the gold option word's position (``IGNORE_INDEX`` / -1 where
    the sample has none)."""

    encoded: list[_Encoded]
    features: Any
    early: torch.Tensor
    gold: torch.Tensor


def _pool(bundle: Any, samples: Sequence[dict[str, Any]]) -> _Pool:
    encoded, early, gold = [], [], []
    for s in samples:
        enc = bundle._encode(s, answer=s["answer"], eos=True)
        encoded.append(enc)
        word = content_answer(s)
        early.append(IGNORE_INDEX if word is None else answer_token(bundle, s, word))
        gold.append(option_positions(bundle, s, enc.ids)[gold_index(s)]
                    if _format(s) in ("letter", "id") else -1)
    features = pretrain._Features(bundle, pretrain._picture_inputs(bundle, samples))
    return _Pool(encoded, features, torch.tensor(early), torch.tensor(gold))


def losses(bundle: Any, items: Sequence[_Encoded], feats: torch.Tensor, words: torch.Tensor,
           early: torch.Tensor, gold: torch.Tensor, early_layer: int) -> dict[str, torch.Tensor]:
    """Stage 2's loss (answer + grounding) and the two auxiliary losses of a batch.

    ``early[i]`` is sample i's early-answer token (``IGNORE_INDEX``: none); ``gold[i]`` its gold
    option word's position (-1: none). A loss with no sample to score is zero.
    """
    model = bundle.model
    lm = model.model.language_model
    batch, embeds, grounding = pretrain.multimodal_inputs(bundle, items, feats, words)
    out = lm(inputs_embeds=embeds, attention_mask=batch["attention_mask"], use_cache=False,
             output_hidden_states=True, output_attentions=True)
    first = (batch["labels"][:, 1:] != IGNORE_INDEX).float().argmax(1)
    rows = torch.arange(len(items))
    zero = embeds.new_zeros(())
    keep = early != IGNORE_INDEX
    early_loss = zero
    if bool(keep.any()):
        state = out.hidden_states[early_layer][rows, first][keep]
        final = early_layer == len(out.hidden_states) - 1
        early_loss = F.cross_entropy(lens_logits(bundle, state, final=final), early[keep])
    keep = gold >= 0
    attend_loss = zero
    if bool(keep.any()):
        weight = out.attentions[-1][rows[keep], 0, first[keep], gold[keep]]
        attend_loss = -torch.log(weight + 1e-6).mean()
    return {"stage2": pretrain.answer_loss(bundle, batch, out.last_hidden_state)
            + pretrain.GROUNDING_WEIGHT * grounding, "early": early_loss, "attend": attend_loss}


def attention_report(bundle: Any, samples: Sequence[dict[str, Any]]) -> dict[str, float]:
    """On lettered ``samples``: head 0 of the last layer at the answer position, over the
    options' words (gold share, gold-most rate), the letter accuracy (argmax over the option
    letters after the prompt) and the agreement of that letter with head 0's most-attended
    option; all in percent, with the chance of the letter and the sample count."""
    model = bundle.model.eval()
    share, most, right, agree = [], [], [], []
    with torch.no_grad():
        for s in samples:
            enc = bundle._encode(s, answer=None, eos=False)
            where = option_positions(bundle, s, enc.ids)
            labels = options(s)
            out = model(**bundle._pad([enc], left=False, with_labels=False),
                        output_attentions=True)
            weights = out.attentions[-1][0, 0, -1][where]
            letter_ids = [answer_token(bundle, s, x) for x in labels]
            pick = int(out.logits[0, -1][letter_ids].argmax())
            gold = gold_index(s)
            share.append(float(weights[gold] / weights.sum()))
            most.append(int(weights.argmax()) == gold)
            right.append(pick == gold)
            agree.append(pick == int(weights.argmax()))
    chance = [1 / len(options(s)) for s in samples]
    return {name: round(100.0 * float(np.mean(v)), 1) for name, v in (
        ("gold_share", share), ("gold_most", most), ("letter", right), ("agree", agree),
        ("chance", chance))} | {"n": len(samples)}


def summary(bundle: Any, samples: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Accuracy per answer format over ``samples`` (percent, greedy exact match)."""
    return {fmt: None if acc is None else round(acc, 1)
            for fmt, (acc, _, _) in format_means(table(bundle, samples)).items()}


def train(bundle: Any, pools: Sequence[_Pool], *, steps: int, lr: float, early_layer: int,
          early_weight: float, attend_weight: float, seed: int) -> list[dict[str, float]]:
    """Continue stage 2 on the (easy, full) pools with the auxiliary losses; AdamW (0.9, 0.98),
    100 warm-up steps then a cosine to 10%, gradient clip 1. Returns each step's losses."""
    model = bundle.model
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    rng = np.random.default_rng([seed, 0x0B71])
    model.train()
    history = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = pretrain._lr_at(step, steps, lr, warm=100, floor=0.1)
        n_easy = int(rng.binomial(BATCH_SIZE, EASY_SHARE))
        items, feats, words, early, gold = [], [], [], [], []
        for pool, count in zip(pools, (n_easy, BATCH_SIZE - n_easy)):
            if not count:
                continue
            rows = pretrain._draw(rng, len(pool.encoded), count)
            items += [_Encoded(pool.encoded[i].ids, pool.encoded[i].labels, []) for i in rows]
            f, w = pool.features.rows(rows)
            feats.append(f)
            words.append(w)
            early.append(pool.early[rows])
            gold.append(pool.gold[rows])
        parts = losses(bundle, items, torch.cat(feats), torch.cat(words), torch.cat(early),
                       torch.cat(gold), early_layer)
        loss = parts["stage2"] + early_weight * parts["early"] + attend_weight * parts["attend"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        history.append({k: float(v.detach()) for k, v in parts.items()})
    model.eval()
    return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_arguments(parser)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--train-size", type=int, default=20000,
                        help="public training samples (pretraining's draw, seed --seed)")
    parser.add_argument("--early-layer", type=int, default=2,
                        help="residual stream read by the early-answer loss (after that layer)")
    parser.add_argument("--early-weight", type=float, default=0.0)
    parser.add_argument("--attend-weight", type=float, default=0.0)
    parser.add_argument("--samples", type=int, default=1200,
                        help="held-out formats questions scored before and after")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None,
                        help="write the trained weights here (safetensors, tied head left out)")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    started = time.perf_counter()
    bundle = load_tiny(args)
    bundle.model.set_attn_implementation("eager")  # attention weights for the losses
    if not 0 <= args.early_layer <= bundle.num_layers:
        parser.error(f"--early-layer {args.early_layer}: {args.model} has layers 0.."
                     f"{bundle.num_layers}")
    bundle.model.requires_grad_(True)
    bundle.model.model.vision_tower.requires_grad_(False)
    held = pretrain.public_samples("synth-public-formats", "test", args.samples, args.seed)
    lettered = [s for s in held if _format(s) == "letter"]
    pools = [_pool(bundle, pool) for pool in pretrain._train_set(args.seed, args.train_size)]
    before = summary(bundle, held), attention_report(bundle, lettered)
    history = train(bundle, pools, steps=args.steps, lr=args.lr, early_layer=args.early_layer,
                    early_weight=args.early_weight, attend_weight=args.attend_weight,
                    seed=args.seed)
    after = summary(bundle, held), attention_report(bundle, lettered)
    tail = {k: round(float(np.mean([h[k] for h in history[-100:]])), 3) for k in history[0]}
    print(f"{args.model}: {args.steps} steps, lr {args.lr}, early-answer weight "
          f"{args.early_weight} (layer {args.early_layer}), attend weight {args.attend_weight}; "
          f"last-100-step losses {tail}; {time.perf_counter() - started:.0f}s")
    for name, (formats, attention) in (("before", before), ("after", after)):
        print(f"{name:>6} formats % {formats}")
        print(f"{name:>6} lettered, last-layer head 0 % {attention}")
    if args.save:
        from safetensors.torch import save_file

        state = {k: v.contiguous() for k, v in bundle.model.state_dict().items()
                 if k != "lm_head.weight"}
        save_file(state, args.save)


if __name__ == "__main__":
    main()
