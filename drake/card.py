"""Dataset cards in the Hugging Face Hub format, generated from the registry.

Two cards come from here: the card written into every built folder (``README.md``, with a YAML
``configs`` header so ``load_dataset(<folder>, "<task>")`` loads one task), and the project's
``DATASET_CARD.md``, whose task and client tables are rendered from the same declarations, so the
card cannot drift from the code (a test compares the committed file with :func:`project_card`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from drake.specs import BenchmarkSpec


def _yaml_header(spec: BenchmarkSpec, manifest: dict[str, Any] | None,
                 pretty_name: str | None = None, extra: tuple[str, ...] = ()) -> str:
    lines = ["---", "license: other", "task_categories:", "- visual-question-answering",
             "- image-text-to-text", f"pretty_name: {pretty_name or spec.name}", *extra,
             "configs:", "- config_name: default", "  data_files:"]
    splits = ("train", "test")
    for split in splits:
        lines += [f"  - split: {split}", f"    path: tasks/*/{split}-*.parquet"]
    tasks = manifest["tasks"] if manifest else {t.id: {s: None for s in splits} for t in spec.tasks}
    for task, present in tasks.items():
        lines += [f"- config_name: {json.dumps(task)}", "  data_files:"]
        for split in splits:
            if split in present:
                lines += [f"  - split: {split}", f"    path: tasks/{task}/{split}-*.parquet"]
    lines.append("---")
    return "\n".join(lines)


def task_table(spec: BenchmarkSpec, manifest: dict[str, Any] | None = None) -> str:
    """A markdown table of every task: group, answer type, metric, images, twin, sizes."""
    head = "| task | group | answer type | metric | images | twin of | train | test |"
    rows = [head, "|---|---|---|---|---|---|---|---|"]
    for t in spec.tasks:
        sizes = (manifest or {}).get("tasks", {}).get(t.id, {})
        train = sizes.get("train", {}).get("rows", t.caps.get("train", "")) if sizes or t.caps \
            else ""
        test = sizes.get("test", {}).get("rows", t.caps.get("test", "")) if sizes or t.caps \
            else ""
        lo, hi = t.num_images
        images = str(lo) if lo == hi else f"{lo}-{hi}"
        rows.append(f"| {t.id} | {t.subgroup} | {t.answer_type} | {t.metrics[0]} | {images} | "
                    f"{t.twin_of or ''} | {train} | {test} |")
    return "\n".join(rows)


def source_task_table(spec: BenchmarkSpec) -> str:
    """A markdown table of real tasks: client, what it asks, source tar, licence, format, caps."""
    client_of = {t: c.id for c in spec.clients for t in c.tasks}
    rows = ["| task | group | client | description | source: file | licence | answer type | "
            "metric | images | train cap | test cap |", "|---" * 11 + "|"]
    for t in spec.tasks:
        lo, hi = t.num_images
        images = str(lo) if lo == hi else f"{lo}-{hi}"
        args = t.source_args
        where = f": {args.get('repo', '')} `{args['file']}`" if args.get("file") else ""
        owner = client_of.get(t.id, "public" if t.id in spec.public_tasks else "unseen")
        rows.append(f"| {t.id} | {t.subgroup} | {owner} | "
                    f"{t.description} | {t.citation}{where} | {t.licence} | "
                    f"{t.answer_type} | {t.metrics[0]} | {images} | {t.caps.get('train', '')} | "
                    f"{t.caps.get('test', '')} |")
    return "\n".join(rows)


def counts_table(manifest: dict[str, Any]) -> str:
    """Where every source row of a real build went, per task split (empty for synthetic)."""
    sources = manifest.get("sources")
    if not sources:
        return ""
    rows = ["| task | split | source rows | kept | dropped (rule) | rejected (reason) |",
            "|---|---|---|---|---|---|"]
    for task, info in sources.items():
        for split, c in info["splits"].items():
            dropped = ", ".join(f"{k}: {v}" for k, v in c["dropped"].items()) or "-"
            rejected = ", ".join(f"{k}: {v}" for k, v in c["rejected"].items()) or "-"
            rows.append(f"| {task} | {split} | {c['source_rows']} | {c['kept']} | {dropped} | "
                        f"{rejected} |")
    return "\n".join(rows)


def client_table(spec: BenchmarkSpec, mix: str | None = None) -> str:
    """A markdown table: client, its model under the mix, its tasks in stream order."""
    if not spec.clients:
        return ""
    models = spec.models(mix) if spec.model_mixes else ("",) * len(spec.clients)
    rows = ["| client | model | tasks (stream order) |", "|---|---|---|"]
    for client, model in zip(spec.clients, models):
        rows.append(f"| {client.id} | {model} | {', '.join(client.tasks)} |")
    return "\n".join(rows)


CALIBRATION_FILE = Path(__file__).resolve().parent / "synth" / "calibration.json"
"""Measured learnability of drake-synth (written by ``benchmarks/learnability.py --json``)."""


def calibration_table(spec: BenchmarkSpec, path: Path = CALIBRATION_FILE) -> str:
    """The measured per-task learnability of drake-synth as markdown, from ``path``.

    One row per client task: for a multiple-choice task chance, held-out accuracy before
    training and at each measured step, and the knobs it was measured at; for an open-ended task
    token F1 at the same steps (its gain is over the untrained model, as it has no chance level)
    and exact match before and after.
    """
    record = json.loads(path.read_text())
    settings, rows = record["settings"], record["tasks"]
    steps = list(range(0, settings["steps"] + 1, settings["every"]))
    head = ("| client | task | chance | " + " | ".join(f"step {s}" for s in steps)
            + " | gain | closeness | objects |")
    lines = [
        f"Measured with `python benchmarks/learnability.py --json drake/synth/calibration.json "
        f"--test {settings['test']}` on `{settings['model']}` (the shipped weights): a fresh LoRA (the zoo's defaults, lr "
        f"{settings['lr']}, batch {settings['batch_size']}) trains on {settings['train_size']} "
        f"samples of one task; {settings['test']} held-out samples are scored by option "
        "likelihood (open-ended tasks: greedy answers, token F1 and exact match). Gain is the "
        "last accuracy minus chance (open-ended: minus the untrained score), in points; with "
        f"{settings['test']} test samples one standard error at 50% accuracy is "
        f"{100 * (0.25 / settings['test']) ** 0.5:.1f} points.",
        "", head, "|---|---|---|" + "---|" * len(steps) + "---|---|---|"]
    gains = []
    for client in spec.clients:
        for task in client.tasks:
            if task not in rows:
                lines.append(f"| {client.id} | {task} | not measured |"
                             + " |" * (len(steps) + 3))
                continue
            row = rows[task]
            lo, hi = row["knobs"]["objects"]
            if row["chance"] is None:  # open-ended: token F1, gain over the untrained model
                gain = row["curve"][-1] - row["curve"][0]
                lines.append(f"| {client.id} | {task} | token F1 | "
                             + " | ".join(f"{a:.1f}" for a in row["curve"])
                             + f" | {gain:+.1f} (exact match {row['exact'][0]:.1f} -> "
                             f"{row['exact'][-1]:.1f}) | {row['knobs']['closeness']} | {lo}-{hi} |")
                continue
            gain = row["curve"][-1] - row["chance"]
            gains.append((gain, row["curve"][-1]))
            lines.append(f"| {client.id} | {task} | {row['chance']:.1f} | "
                         + " | ".join(f"{a:.1f}" for a in row["curve"])
                         + f" | {gain:+.1f} | {row['knobs']['closeness']} | {lo}-{hi} |")
    lines += ["", _gain_sentence(gains)]
    return "\n".join(lines)


def _gain_sentence(rows: list[tuple[float, float]]) -> str:
    """``rows``: (gain over chance, final accuracy) per measured multiple-choice task."""
    gains = [g for g, _ in rows]
    return (f"{sum(g >= 15 for g in gains)} of {len(gains)} multiple-choice tasks gain 15 "
            "points or "
            f"more over chance ({sum(g >= 10 for g in gains)} gain 10 or more, "
            f"{sum(a > 95 for _, a in rows)} end above 95%); the mean gain is "
            f"{sum(gains) / len(gains):+.1f} points.")


def calibration_summary(path: Path = CALIBRATION_FILE) -> str:
    """One sentence on how learnable drake-synth is for the tiny models, from ``path``."""
    rows = json.loads(path.read_text())["tasks"].values()
    return ("drake-synth learnability (DATASET_CARD.md): "
            + _gain_sentence([(r["curve"][-1] - r["chance"], r["curve"][-1]) for r in rows
                              if r["chance"] is not None])
            + " Where a task stays at chance, method differences are format learning and noise.")


TRANSFER_FILE = Path(__file__).resolve().parent / "synth" / "transfer.json"
"""Knowledge sharing on drake-synth (written by ``benchmarks/transfer.py --json``)."""

#: The gain over no training that counts a client as helped by the others' data (issue #13).
TRANSFER_MARGIN = 5.0


def transfer_table(spec: BenchmarkSpec, path: Path = TRANSFER_FILE) -> str:
    """Does a drake-synth client gain from the other clients' data, as markdown from ``path``.

    One row per client: its multiple-choice tasks' held-out accuracy under (a) no training,
    (b) a LoRA trained on its own tasks and (c) one trained on the other clients' tasks only;
    then how many clients (c) lifts by :data:`TRANSFER_MARGIN` points or more over (a).
    """
    record = json.loads(path.read_text())
    settings = record["settings"]
    rows = {row["client"]: row for row in record["clients"]}
    lines = [
        f"Measured with `python benchmarks/transfer.py --json drake/synth/transfer.json` on "
        f"`{settings['model']}` (the shipped weights): for each client, a fresh LoRA (the zoo's "
        f"defaults, lr {settings['lr']}, batch {settings['batch_size']}, {settings['steps']} "
        f"steps) trains on {settings['train_per_task']} samples per task of (b) the client's own "
        "tasks or (c) the other nine clients' tasks pooled, never its own; (a) is no training. "
        f"{settings['test_per_task']} held-out samples per multiple-choice task of the client "
        "are scored by option likelihood.",
        "", "| client | tasks | test | chance | (a) nothing | (b) own | (c) others | (c) - (a) |",
        "|---|---|---|---|---|---|---|---|"]
    for client in spec.clients:
        row = rows.get(client.id)
        if row is None:
            lines.append(f"| {client.id} | not measured |" + " |" * 6)
            continue
        lines.append(f"| {client.id} | {', '.join(row['tasks'])} | {row['test_samples']} | "
                     f"{row['chance']:.1f} | {row['nothing']:.1f} | {row['own']:.1f} | "
                     f"{row['others']:.1f} | {row['others'] - row['nothing']:+.1f} |")
    measured = list(rows.values())
    helped = sum(r["others"] >= r["nothing"] + TRANSFER_MARGIN for r in measured)
    shared = sum(r["others"] - r["nothing"] for r in measured) / len(measured)
    own = sum(r["own"] - r["nothing"] for r in measured) / len(measured)
    lines += ["", f"{helped} of {len(measured)} clients gain {TRANSFER_MARGIN:g} points or more "
              f"from the other clients' data alone; the mean gain is {shared:+.1f} points from "
              f"the others' data and {own:+.1f} from the client's own."]
    return "\n".join(lines)


#: What the knowledge-sharing table above says (issue #13). Re-measure when the weights change.
TRANSFER_PROSE = """\
Issue #13 asks that the others' data lift at least 6 of the 10 clients by 5 points; at the
current task designs it lifts three (client 3, `synth-state` and `synth-answerable` among its
tasks, +12.0; client 8, +5.3 from an untrained score 5.5 points under chance; client 4, +5.0),
while each score on 150 to 200 test samples carries a standard error of about 3.5 points.
Before the dishes' redesign it lifted one (client 8, +7.3), with mean gains of +0.3 points from
the others' data and +6.8 from a client's own; after it two, with +1.8 and +8.4; now +1.5 and
+7.6. Only client 0's tasks changed last (`synth-query-reference`'s items at a large shape's
size, `synth-colour-count` counting one to four): untrained it scores 50.5% (44.0 before), its
own data adds 1.5 points, though each of the two tasks alone gains 26 points and more in the
calibration, and the others' data 1.0; the other clients' (a) and (b) are unchanged, and their
(c) moves by up to 5 points with the pooled data. A client's own data helps most where its
tasks are learnable (client 3 +27.0, client 7 +13.0, client 9 +12.0), but what the clients'
tasks share (the look-up, the option labels, the quality, counting and dish families) carries
from one task to another only in part: the pooled data of nine clients gives each of its 36
tasks a 36th of the steps, and client 6 (`synth-dish-name`) loses 4.7 points though clients 8
and 9 hold the other dish tasks. More steps did not bring it: at four times them for the three
dish clients (`python benchmarks/transfer.py --clients 6 8 9 --steps 1600`, before client 0's
change), a client's own data gave +8.0, +24.0 and +15.0 points over no training and the
others' data -9.3, -2.7 and -3.5. Until it carries, drake-synth's Others scores measure format
learning and noise more than knowledge sharing.
"""


CLIP_CALIBRATION_FILE = Path(__file__).resolve().parent / "synth" / "clip_calibration.json"
"""Every CLIP method on synth-cls with tiny-clip (written by ``benchmarks/clip_synth.py --json``)."""


def clip_calibration_table(path: Path = CLIP_CALIBRATION_FILE) -> str:
    """synth-cls on ``tiny-clip`` as markdown, from ``path``: per scenario, each method's
    metrics as mean ± std over seeds, chance, and how far each trained method moves from
    zero-shot CLIP."""
    record = json.loads(path.read_text())
    st, scenarios = record["settings"], record["scenarios"]
    data = st["data"]
    weights = st["weights"]
    rows_per_set = ("every test row" if st["eval_per_task"] == "all"
                    else f"{st['eval_per_task']} test rows")
    lrs = ", ".join(f"{m} {lr:g}" for m, lr in st["lrs"].items())
    lines = [
        "Measured with `python benchmarks/clip_synth.py --data <build> "
        + ("--validate <build of another seed> " if st.get("lr_choice") else "")
        + f"--json drake/synth/clip_calibration.json` on a {data['benchmark']} build (seed "
        f"{data['seed']}: {data['rows']['train']:,} train and {data['rows']['test']:,} test rows, "
        f"{data['classes']} classes) with `tiny-clip` (pretrained on the "
        f"{weights['objective']} objective, sha256 {weights['weights_sha256'][:12]}, held-out "
        f"zero-shot {weights['held_out_accuracy']:.1f}% over all classes"
        + (f"; its image tower's last stage trained too, where a fully aligned text side reaches "
           f"{weights['tower_held_out_accuracy']:.1f}%"
           if weights.get("tower_held_out_accuracy") is not None else "")
        + f"): {st['rounds']} "
        f"rounds of {st['local_steps']} local steps of {st['batch_size']}, every client every "
        f"round, {rows_per_set} per scored set, seeds {', '.join(map(str, st['seeds']))}; "
        + ("each method at its own paper's learning rate" if st["paper_lrs"] else
           "each method with its own optimiser at the learning rate chosen for this budget on "
           "a validation build of another seed")
        + f" ({lrs}"
        + ("; base-to-novel HM per rate tried: " + "; ".join(
            f"{m} " + ", ".join(f"{lr} {hm:.1f}" for lr, hm in by_lr.items())
            for m, by_lr in st["lr_choice"]["hm_by_lr"].items()) if st.get("lr_choice") else "")
        + f"), the prompt learners from CoOp's \"{st['ctx_init']}\" context. Mean ± std "
        f"over seeds (torch {weights['torch']}, transformers {weights['transformers']}, "
        f"{weights['machine']}). A CPU budget: pFedMMA's own is 100 rounds of one local epoch "
        "(`--preset paper`)."]
    for scenario, rows in scenarios.items():
        first = next(iter(rows.values()))[0]
        keys = [k for k in ("local", "base", "novel", "hm", "accuracy") if k in first]
        keys += sorted(k for k in first if k not in keys and k.startswith("acc_"))
        lines += ["", f"**{scenario}**", "", "| method | " + " | ".join(keys) + " |",
                  "|---|" + "---|" * len(keys)]
        means = {}
        for method, runs in rows.items():
            cells = []
            for k in keys:
                values = [r[k] for r in runs]
                mean = sum(values) / len(values)
                std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
                cells.append(f"{mean:.1f} ± {std:.1f}")
                means[(method, k)] = mean
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        head = "hm" if "hm" in keys else "accuracy"
        chance = 100 / (data["classes"] / 2 if head == "hm" else data["classes"])
        zs = means.get(("clip-zeroshot", head))
        if zs is not None:
            diffs = {m: means[(m, head)] - zs for m in rows if m != "clip-zeroshot"}
            moves = ", ".join(f"{m} {d:+.1f}" for m, d in diffs.items())
            still = sum(abs(d) < 1 for d in diffs.values())
            above = sum(d >= 5 for d in diffs.values())
            lines += ["", f"Chance is {chance:.1f}% per scored set; zero-shot CLIP scores "
                      f"{zs:.1f} ({head}). Trained methods' {head} minus zero-shot's: {moves}. "
                      f"{still} of {len(diffs)} trained methods stay within 1 point of zero-shot "
                      f"and {above} gain 5 or more: at this budget synth-cls "
                      f"{'separates' if above > len(diffs) / 2 else 'does not yet separate'} "
                      "the methods from zero-shot CLIP."]
    return "\n".join(lines)


#: What the diagnostic benchmarks measured on the tiny models (issue #13), printed under the
#: learnability table: on the stage-2 weights (shipped until stage 3 joined the defaults), then
#: what stage 3 changed, then the trials on the stage-3 weights (shipped until stage 4 joined
#: the defaults), then what stage 4 changed. Re-measure it when the shipped weights change.
SYNTH_FORMATS_PROSE = """\
**Which weights these paragraphs measure.** The table above is measured on the shipped weights,
which went through four pretraining stages. The paragraphs below are the measurements that
led there, each on the weights shipped when it was made. Up to *Attention supervision teaches
the look-up* they use the **stage-2 weights** (`drake models pretrain --lookup-steps 0` stops
there): they show why stage 3 was added. From that paragraph on, "the shipped weights" are the
**stage-3 weights** (`--label-steps 0` stops there), and the later paragraphs are trials on top
of them. *Stage 4 in the shipped weights* measures the weights shipped now against the stage-3
ones, on the task designs of its time; *Dishes that name their look* and *Items at the size
the tower reads* give the designs and knobs the table above is measured at, and the last six
paragraphs, *Image tokens do not say where they are*, *Tokens that carry their cell do not
teach the relations*, *Neither more verdicts nor a larger language model moves the tasks*,
*Verdicts follow once the worked-out value is read out before the last layer*, *Every family's
worked-out value, read out: the learnt tasks rise, the others do not* and *A glossary of the
twin world's facts lifts the dish's region*, are trials for the next pretraining.

**Why the lettered, numbered and statement tasks stay at chance (measured).**
`python benchmarks/public_formats.py` scores the stage-2 `tiny-llava-qwen` on 2,400 held-out
`synth-public-formats` questions: the public families asked in the client tasks' answer formats,
greedy exact match per family and format. Over all families: open 55.9%, choice list 52.9%
(chance 37.7), lettered options 38.7% (chance 37.2), numbered options 39.2% (chance 37.9),
verdict on a proposed answer 52.9% (chance 50). The model finds answers it cannot label: the
background is named 100% of the time in the open and choice-list forms, but its option letter
only 35.3% (chance 32) and its verdict 41.2% (chance 50); fill and picture quality read the same
way. So these tasks fail on relating an answer the model has found to the options or statement
in the prompt, not on the look-up, and a task-level LoRA does not add that skill (issue #13).
Inside the model (`python benchmarks/answer_lens.py`, 6,000 held-out questions; a logit lens at
the answer position, after each of the 3 layers): on the background, fill, quality and size
questions the gold word ranks first among the offered words 94.7% of the time in the choice-list
form and 61.3% in the lettered form (chance 38.0). Yet over all 1,220 lettered questions a
linear probe on the same position (trained on 70% of them, scored on the rest) finds the gold
option's index 38.5% of the time (chance 37.7). The lettered question is looked up as a word,
and no layer matches that word to its option line.

**The label step takes far more questions than pretraining asks (measured).**
`python benchmarks/composition_depth.py` trains language models of `tiny-llava-llama`'s width
(128, 4 heads, 2 key/value heads) from random weights on text questions, a new one at every
step, in equal parts: a look-up ("what colour is the <shape> ?" over two to four shapes), an
option copy ("which option is <colour> ?" over two to four lettered colours, answered with the
letter's answer token, as the zoo's tokenizer spells it) and their composition (the look-up asked
over lettered colours). With each shape and its colour in one token, as a picture's patch
carries both (`--facts bound --depths 3 4 --steps 10000 --every 2000`, steps of 64, 1,000 held-out questions
of each kind): at depth 4 the look-up reaches 99.0% and the copy 93.4% after 6,000 steps while
the composition is at 77.1%; it reaches 96.8% after 8,000 steps (about 170,000 composed
questions) and 99.4% after 10,000. Depth 3 is slower: 67.5% after 10,000 (chance about 36).
The composition comes last, after both of its parts. A client task's budget does not even give
the copy: from random weights, 1,200 steps of 8 reach 42.2% (`--depths 3 --mix copy --batch 8
--steps 1200 --every 300 --lr 2e-3 --test 500`), and the stage-2 models, which never learnt it, do not learn it in
1,200 steps of 8 on 10,000 questions (`python benchmarks/learnability.py --tasks
probe-option-copy --steps 1200 --every 300 --train-size 10000`): `tiny-llava-qwen` 28.5% with
its LoRA and 30.5% with every weight trained (`--full --lr 0.0005`), `tiny-llava-llama` 30.5%
(chance 31.6). Stage 2's pool holds about 2,700 lettered and as many numbered
questions (a fifth of `synth-public-formats` each, which is 35% of 40,000), two orders of
magnitude fewer than the text composition needed. In words ("the star is red ."), the look-up
itself is not learnt in 4,000 steps at depth 2 or 3 (36.3%, the chance of naming one of the
stated colours) while the copy is (99.9% and 100%; `--depths 2 3 --steps 4000`).
A composition learnt on one family carries over to another through a task's LoRA; the parts
alone do not. Two depth-4 models train 8,000 steps on bound facts, both on the look-up and copy
of colours and the look-up and copy the other way round (the shape of a named colour, and
"which option is <shape> ?"), one also on the colour composition; neither sees the reversed
composition ("which is <colour> ?" over lettered shapes). A LoRA of the zoo's defaults then
trains on that alone for the calibration's 240 steps of 8 (`--depths 4 --facts bound --steps
8000 --every 2000 --lora-kind reverse --mix lookup copy reverse-lookup shape-copy`, with and
without `two-hop`). With the colour composition it goes from 46.9% to 78.4%; with the parts only,
from 33.7% to 44.2% (chance about 36), though each part scores 99.9% or more.
Going on from the stage-2 weights with many more lettered and numbered questions does not add
the step either. `python benchmarks/format_drill.py` continues the stage-2 `tiny-llava-qwen`'s
stage 2 for 5,000 steps of 32, half of every batch from a pool of 16,000 such questions (three
times stage 2's pool's 5,400, each seen five times), the other half from public questions
drawn as stage 2 draws them. On about 100 held-out questions per format, lettered options go
from 44.2% to 48.4% and numbered ones stay at 43.8% (chance about 37); the drilled questions
themselves rise further (numbered: 41.6% to 62.4%), so they are being learnt by heart. With
three quarters of every batch drilled at twice the rate (`--share 0.75 --lr 1e-3`): 45.3% and
47.6% held out, 64.4% on the drilled numbered ones. The nine lettered and numbered client tasks
(`synth-shape-facts`, `-instance-attr`, `-diagram`, `-motion`, `-story-next` and the four
`synth-dish-` tasks) then train at the calibration's budget (`python benchmarks/learnability.py --model-cache DIR
--test 200`, DIR from `--save DIR`) to a mean of 23.4% and 23.5%, against 22.7% from the stage-2
weights (chance 22.8). So a drill on top of the stage-2 weights is not the remedy; what the
text models above suggest is pretraining that teaches the composition from the start, on fresh
questions and far more of them.

**The stage-2 weights learnt their training questions by heart (measured).** Pretraining's
language stage draws 384,000 samples (12,000 steps of 32) from a pool of 40,000, so each is seen
about ten times. `python benchmarks/memorisation.py` scores the stage-2 `tiny-llava-qwen` on the
first 2,500 questions of each public task's pool and on as many held-out ones: over 25 families
and formats the training questions score 19.6 points higher on average. The colour of a named
shape: 92.5% trained, 54.0% held out; the attribute of an object in one of several pictures:
75.6% against 33.5%; lettered options: 58.5% against 38.7% (chance about 37), so the letters of
its own training questions were recalled while the letter step was never learnt.
`drake models pretrain --fresh-samples` draws a new sample every time instead. From scratch
with the shipped tower, 3,000 steps (`--reuse-vision --steps 3000`): on a 10,000-sample pool
(`--train-size 10000`, the default's ten passes) the gap is +25.0 points and the held-out mean
47.2%; fresh, +1.3 and 49.3% (1,000 questions per task; the stage-2 weights: 60.2% after 12,000
steps). The fresh recipe is not yet the default: the weights would have to be remade from stage 2
with it (issue #13).

**The look-up comes before the label step (measured).** The image tokens carry the facts a
look-up needs, yet the language model does not look one up. `python benchmarks/lookup_gap.py`
(600 held-out questions per look-up, the same pictures' 2,964 cells that hold an object): the
stage-2 `tiny-llava-qwen`'s image tokens, read through the tied head, name their cell's object's
colour 98.1% of the time, its shape 87.7%, fill 92.2% and size 96.7%; asked "what colour is the
<shape>?" it answers 53.0%, exactly what answering with a colour present in the picture at random
scores (52.8%); asked "which shape is <colour>?", 80.5% against 52.0%, the one look-up it learnt.
`tiny-llava-llama`: 50.7% (line 52.8) and 44.0% (line 52.0). Pretraining `tiny-llava-llama` from
scratch on the shipped tower with fresh samples (`drake models pretrain --model
tiny-llava-llama --reuse-vision --fresh-samples`, stage 1's tower in the cache) and half of every
draw one kind of question does not bring it either, nor the label step:
`--focus-share 0.5 --focus label --steps 6000` (about 96,000 lettered or numbered questions, none
seen twice; 80 min beside another run) ends at 38.1% lettered and 40.2% numbered on about 490 held-out
questions each (`python benchmarks/public_formats.py --model tiny-llava-llama --model-cache
DIR`; chance 37.2 and 37.9), and its look-ups at 52.5% and 14.3% (it answers "heart" to every
shape question, even over a single star); the same with `--mark-options` (each option line also
trained to say whether it holds the answer) for 4,000 steps: 37.9% and 39.0%, and the line it marks most surely
holds the answer 41.3% of the time (820 held-out questions, chance about 37); `--focus lookup
--steps 3000` (about 48,000 look-ups: questions naming an object and asking one of its attributes)
leaves the two look-ups at 53.3% and 42.5%. So the model reads a picture as a bag of what it
holds, not by finding a named object in it, and the label step, which composes with that
look-up, cannot come first. Where the answer position looks (`--attention 150`: per layer and
head, the mean attention per image token on the named object's cell and on another object's,
over about 110 questions with two objects or more) shows it: asked the shape of a named colour,
four of the five heads of stage-2 qwen's second layer put 0.68 to 0.86 on the named cell against
0.07 to 0.16 on another; asked the colour of a named shape, 0.33 to 0.40 against 0.28 to 0.35.
Of the heads of stage-2 llama that put 0.1 or more per cell on either, none puts 1.5 times as
much on the named cell (at most 1.45), nor any of the look-up run's.
The text models of `composition_depth.py` learn the same look-up over bound tokens in about
128,000 questions at depth 4, so what stands between the pictures and the text is why attention
selects an object by its colour in one model and by its shape in none.

**Attention supervision teaches the look-up (measured).** Stage 3 of `drake models pretrain`
(`--lookup-steps`, 1,500 by default; `--lookup-only` runs it alone on stage-2 weights) trains on
fresh public samples, half of them questions that name an object, with stage 2's losses plus a
pointer loss: two heads (the second and third layers') must put their attention from the answer
position on the named object's image tokens. The shipped weights are the stage-2 weights after
it (`drake models pretrain --model all --lookup-only --lookup-steps 1500 --cache-dir DIR`, 15
minutes per family on one core of two). `lookup_gap.py`: `tiny-llava-qwen` answers the colour
of a named shape 91.3% of the time (stage 2: 53.0%, line 52.8) and the shape of a named colour
87.5% (80.5%; its image tokens name their shape 88% of the time, a ceiling); `tiny-llava-llama`
80.5% (50.7%) and 87.0% (44.0%). Asked a colour, every head of qwen's second layer puts 0.70
to 0.87 per image token on the named cell against 0.05 to 0.15 on another object's (`--attention
150`; stage 2: 0.33 to 0.40 against 0.28 to 0.35). Held-out public exact match, mean over
families, goes from 0.59 to 0.66 (qwen) and 0.63 (llama); the smallest look-up probe
(`learnability.py --tasks probe-colour-lookup`, "Is the <shape> <colour>?", 200 held-out) reaches 82.5% with qwen's LoRA
(stage 2: 78.5%) and 76.0% with llama's, short of issue #13's 90%. The calibration table above
was measured on these weights until stage 4 joined them: against the stage-2 weights at the
same settings, 21 of 38 tasks
end higher (mean difference +2.3 points, sd 5.0), the mean gain over chance goes from +6.4 to
+8.7 points and 8 tasks gain 15 points or more (7 before). The largest moves:
`synth-relation-query` -7.5 to +7.5, `synth-answerable` +26.0 to +40.0, `synth-colour-count`
+8.5 to +22.0, `synth-query-reference` +1.5 to +13.5. `synth-state` reached 97% at its old knobs
(one object large, one to three in all, closeness 0.5) and now has two to four objects and
closeness 0.8 (78%), for headroom. The lettered, numbered and statement tasks stay near chance:
`public_formats.py` on the shipped qwen gives open 63.6%, choice list 57.1%, lettered options
36.8% (chance 37.2), numbered 37.8% (37.9), verdict 51.2% (50). The label step, and sharing
between clients (below), are what issue #13 now waits on.

**Supervising the label step (measured).** Stage 4 of `drake
models pretrain` (`--label-steps N`, `--label-only` on stage-3 weights) goes on from stage 3
with half of every batch one-picture lettered, numbered or verdict questions of the look-up
families that name their object, the rest drawn as stage 3 draws, and four more losses: a head
of the first layer attends from each option's words to its label and its own output (read
through the final norm and the tied head) names that label; a head of the last layer attends
from the answer position to the gold option's words and its own output names the gold label.
In trials without the two read-outs, that head found the gold option (0.75 of its attention
after 2,000 steps, after some 300 steps at one over the option count) but the answer did not
follow (lettered 40%, numbered 39%). With them, 2,000 steps of 32 from the shipped weights
(`drake models pretrain --model all --label-only --label-steps 2000 --seed 1 --cache-dir DIR`,
the shipped folders copied into DIR; 24 minutes per family, both at once on two cores), then
`public_formats.py --model-cache DIR`: `tiny-llava-qwen` answers lettered options 48.6% (shipped
36.8, chance 37.2), numbered 44.6% (37.8, chance 37.9), verdicts 55.8% (51.2), choice lists
60.3% (57.1) and open questions 58.3% (63.6); the size, state and fill families reach 88 to 96%
lettered, while the colour and shape look-ups stay at 53% and 30% (15 to 27 questions each).
`tiny-llava-llama`, whose label head is in its fourth layer: 39.3% and 39.0%. The look-up
probe (`learnability.py --model-cache DIR --tasks probe-colour-lookup --test 200`) reaches 91.5%
with qwen's LoRA (shipped: 82.5%), over issue #13's 90% on these weights. The calibration's
settings on those qwen weights (`learnability.py --model-cache DIR --test 200`): 8 of 38 tasks
gain 15 points or more (11 gain 10), mean gain +9.8 (shipped: 8, 9, +8.7), 20 end higher
(mean difference +1.1, sd 7.3), and two go past the 95% headroom (`synth-state` 98.0,
`synth-answerable` 95.5). `synth-instance-attr` goes from 28.5 to 41.0% and `synth-quad-colour`
from 77.0 to 90.0%; `synth-count-easy` falls from 78.0 to 58.0% and `synth-common-concept` from
47.0 to 31.5%. The other lettered and numbered client tasks stay within a few points of chance
(the dish names, `synth-diagram`, `synth-motion`, `synth-story-next`): their answers are not
one look-up away. So the stage teaches part of the label step on the public questions but does
not yet lift the calibration; these weights were not shipped.

**Where the label step breaks (measured).** `python benchmarks/label_gap.py --samples 10000
--model-cache DIR` reads stage 4's chain on 1,385 held-out lettered and numbered look-ups (one
picture, a family that names its object), per family: whether the label head's attention from
the answer position falls most on the gold option's words (the *pointer*), whether its own
output names the gold label (the *read-out*), and the greedy answer. On the stage-4
`tiny-llava-qwen` above (chance in brackets), size 96.1 / 96.1 / 96.1% (50.0), state 92.8 /
93.3 / 88.2% (38.9) and fill 87.9 / 88.4 / 76.3% (38.8), but colour 46.7 / 39.0 / 35.2% (29.8),
shape 36.0 / 34.1 / 27.1% (32.0) and the position words (`where`) 33.2 / 34.0 / 30.4% (32.7);
over all, 62.7 / 61.2 / 56.8% (36.9). The shipped weights, never trained on it, give 39.6 /
37.3 / 36.1% over all. The three links rise and fall together: where the head finds the gold
option, its output names the label and the answer follows; it finds it for the attributes with
two or three values and not for colour and shape, though the model names those in the open
form 92% and 90% of the time (`public_formats.py`, 26 and 19 questions). In the lettered form
the looked-up value reaches the label head only in part: `--probe` fits linear probes on the
label layer's input (fitted on 70% of each family's questions, scored on the rest), and there
the answer position gives the gold option's colour 70.9% and shape 64.6% of the time (eight
values each; size 96.8%, fill 88.2%), while each option's last word gives its own colour 85.9%
and shape 93.3%. On the shipped weights, before stage 4, the answer position gives 18.2% and
32.3%. So stage 4 brings the looked-up colour or shape to its label head in about two questions
of three, and the head finds the option that spells it in fewer still; the look-up under the
option lines is the link to strengthen first. A deeper model helps only a little: in a trial
outside the package (`tiny-llava-qwen` grown to five layers by appending two copies of its last
layer whose output projections start at zero, so that the model's outputs do not change, then
the same stage 4 with the label head in the fourth layer), the pointer reaches 59.3% on colour
and 55.1% on shape, the answers 39.6% and 42.5%, and 60.3% over all, with the answer position
giving colour 56.4% and shape 66.2% at the label layer's input; `public_formats.py` gives 49.8%
lettered and 47.4% numbered (stage 4 at three layers: 48.6 and 44.6). Six layers, the label head
in the fifth, did worse (42.8 and 40.4). Supervising the look-up's value does more: stage 4's option
`--label-value-weight W` (default 0, off) adds one more loss, the first look-up head's own
output at the answer position (read through the final norm and the tied head, as the label
read-out is) naming the gold option's first word, weighed W. With W = 1 (the same command as
above plus `--label-value-weight 1`; 32 minutes for qwen on one core) the qwen pointer finds
colour's option 82.4% of the time and shape's 76.6%, the answers are right 70.9% and 66.4%
(from 35.2 and 27.1), and over all 74.7 / 74.0 / 70.9% (from 62.7 / 61.2 / 56.8); the answer
position gives the gold colour 78.2% and shape 87.7% at the label layer's input.
`public_formats.py`: 52.7% lettered, 51.6% numbered and 59.2% verdicts (stage 4: 48.6, 44.6
and 55.8), open 56.4% (58.3). `tiny-llava-llama`, whose label head stage 4 alone left at chance
(35.8% over all, pointer 38.3%), gets there with it: pointer 74.8%, answers 68.3% over all
(colour 52.7, shape 68.2), and `public_formats.py` 54.3% lettered and 45.0% numbered (39.3 and
39.0). The look-up probe reaches 96.0% on the qwen weights (issue #13's bar: 90; shipped
82.5). Yet the calibration's settings on them (`learnability.py --model-cache DIR --test 200`,
all 38 tasks) give 8 of 38 tasks at 15 points or more, 9 at 10, mean gain +9.1 (shipped: 8, 9,
+8.7): `synth-instance-attr` rises to 60.5% (28.5) and `synth-state` to 100.0% (78.0, past the
headroom, with `synth-answerable` at 96.0), but the counting tasks fall, `synth-count-easy` to
52.0% (78.0), `synth-colour-count` to 34.5% (47.0) and `synth-count-choice` to 33.0% (42.0),
with `synth-common-concept` at 37.5% (47.0); the other lettered and numbered tasks stay within
6 points of chance (`synth-shape-facts` 30.5, `synth-dish-name`, `synth-dish-region`,
`synth-diagram`, `synth-motion`, `synth-story-next`): their answers are not one look-up away.
So the label step now works on the public questions of both families. Three qwen variants of
that run (same seed, 2,000 steps, weight 1) looked for what costs the counting tasks. At
stage 3's learning rate (`--label-lr 0.001`) the label head does as well (pointer 76.9%,
answers 72.1% over all; colour 76.9, shape 65.0), `public_formats.py` gives 51.7% lettered and
53.2% numbered, and the full calibration gives **10 of 38 tasks at 15 points or more, 13 at 10,
mean gain +10.4** (shipped: 8, 9, +8.7; 18 tasks end higher, mean difference +1.7, sd 8.5):
`synth-instance-attr` 67.0%, `synth-shape-facts` 46.5% (34.5), `synth-count-easy` back to
69.0%, `synth-colour-count` 46.5% (47.0), `synth-count-choice` 43.0% (42.0), but
`synth-quad-colour` 66.0% (77.0), and `synth-answerable` (99.0) and `synth-state` (96.5) past the
headroom. `tiny-llava-llama` at that rate also leaves chance, a little lower than at 0.002
(`label_gap.py`: 69.6 / 67.6 / 63.0% over all; lettered 50.4%, numbered 48.0%). A quarter of
each batch label questions instead of half (`--label-share 0.25`) left the
look-up probe at 81.5% and `synth-instance-attr` at 30.0%; leaving the numbered format out of
the label questions (a trial outside the package, to see whether digit labels disturb the
digit answers of the counting tasks) gave `synth-count-easy` 63.5% and the probe 81.5%, with
numbered answers at chance (36.6%). None of these seed-1 weights was shipped; the run with
`--label-lr 0.001` became stage 4's defaults, run at seed 0 (the last paragraph).

**More relation questions (measured; not in the shipped weights).** Stage 5 of `drake models
pretrain` (`--relation-steps N`, `--relation-only` on stage-3 weights) goes on from stage 3
with half of every batch fresh public questions that compare pictures or relate objects (the
`multi_*`, `relation` and `where` families; three in ten from `synth-public-multi` with open
answers, the rest from `synth-public-formats` in every format), the rest drawn as stage 3
draws, with stage 3's losses and a warm-up of 50 steps. 1,500 steps of 32 from the shipped
`tiny-llava-qwen` (`drake models pretrain --model tiny-llava-qwen --relation-only
--relation-steps 1500 --cache-dir DIR`, the shipped folder copied into DIR; about 20 minutes,
two runs at once on two cores), then the calibration's settings (`learnability.py
--model-cache DIR --test 200`): 10 of 38 tasks gain 15 points or more (shipped: 8), 11 gain 10
(9), the mean gain is +10.0 points (+8.7), 18 end higher (mean difference +1.3, sd 4.6).
`synth-pair-statement` goes from 53.5 to 69.5% and joins the tasks at +15 with
`synth-query-reference` (63.5 to 68.0%); `synth-triple-style` 46.5 to 55.0%, `synth-transition`
49.0 to 56.0%, `synth-bar-chart` 32.5 to 40.0%; `synth-dish-misleading` falls from 27.0 to
19.5% and `synth-count-arith`'s token F1 from 31.5 to 25.0. `synth-answerable` ends at 99.5%,
past the 95% headroom. That is seed 0. Seeds 1 and 2 of the stage (`--seed 1|2`) give
`synth-pair-statement` 49.5 and 59.5% (over seeds 0 to 2: 59.5 ± 10.0), `synth-triple-style`
63.5 and 54.5% (57.7 ± 5.1), `synth-relation-query` 49.5 and 51.5% (shipped 57.5),
`synth-quad-statement` 45.0 and 48.5% (54.0), and `synth-answerable` 99.0 and 97.0%. Three
earlier trials of the recipe outside the package (seeds 0 to 2, measured on 14 relation tasks)
gave `synth-pair-statement` 70.0 ± 3.3%; with a warm-up of 100 steps (stage 3's), two seeds of
the stage gave 50.5 and 52.5% on it and, on seed 0, 8 tasks at +15 and a mean gain of +9.5. So
fresh comparison questions can teach what one client task composes, but not reliably: the gain
changes from run to run more than with the warm-up, it is one or two tasks of the 22 that issue
#13 still needs, it costs `synth-relation-query` and `synth-quad-statement` a few points, and it
breaks the headroom of `synth-answerable`; the stage is not a default.

**Training every weight on more data does not learn the tasks either (measured).** With every
weight trained (the vision tower, the projector and the language model, besides the LoRA), five
times the calibration's training samples and nearly four times its steps (`python
benchmarks/learnability.py --full --lr 0.0005 --steps 900 --every 300 --train-size 3000 --test
200`), 14 of the tasks under 15 points at the calibration were trained on the shipped
`tiny-llava-qwen`. One gains 15 points: `synth-phrase-for-image` (59.0%, chance 25; 31.0% at
step 600). `synth-bar-chart` reaches 52.0% at step 300 and ends at 43.0% (chance 31.2). The
other twelve end within 6 points of chance: `synth-triple-style` 50.5, `-pair-count` 48.0,
`-edit-direction` 52.5, `-transition` 50.0, `-spatial` 44.5 and `-pair-statement` 50.5 (chance
50); `-idiom-image` 28.0, `-odd-relation` 25.0, `-story-next` 19.0, `-motion` 29.5 and
`-diagram` 23.5 (chance 25); `-dish-name` 16.5 (chance 20). The mean gain is +2.7 points. On
the five True/False tasks the mean training loss of the last 20 steps is within 0.013 of the
first 20's (0.344 to 0.360): the model does not fit even its own training samples. So neither the LoRA's size nor
the client's budget keeps these tasks at chance; what they compose (comparing pictures,
relating objects, reading a sequence) is missing from the pretrained models, and only
pretraining can add it.

**Multi-picture questions lose the pictures at the answer (measured).** `python
benchmarks/picture_gap.py` fits linear probes (on 450 of 600 samples of a task, scored on the
other 150) at three points of the shipped models. On `synth-triple-style` ("All three images are
drawn in the noise style", "The three images are drawn in the same style"):

- **Seen.** A picture's projected image tokens, averaged, name its background 99.8% of the time
  on `tiny-llava-qwen` (100.0% on `tiny-llava-llama`), whether it holds a given shape 97.7%
  (baseline 77.1) and a given colour 93.7% (baseline 76.9).
- **Placed.** From the first decoder layer on, an image token's hidden state says which picture
  it belongs to 92-93% of the time on qwen (chance 33.3), 85-91% on llama.
- **Gathered.** The answer position carries each picture's background 45-62% of the time on
  qwen's last layer, 71-78% on llama's, and the answer 50.7% and 60.7% (baseline 54.7).

So the models see every picture and know which is which, but the answer position reads them
only in part and does not compare them. A LoRA does not close the gap with more data: 2,000
steps on 3,000 samples (`python benchmarks/learnability.py --tasks synth-triple-style --steps
2000 --every 500 --test 200 --train-size 3000`) end at 50.5%. `synth-quality-pair` stays at
50.5% even at its largest quality gap (`--degradation 1.0`), though stage 2's one-picture
quality question is answered every time. Teaching the answer position to read pictures one by
one, and to compare them, is pretraining's next step for the multi-picture twins.

**Picture questions teach the answer position to read pictures (measured; not in the shipped
weights).** `python benchmarks/picture_drill.py --save DIR` continues the shipped
`tiny-llava-qwen` with stage 3's recipe for 1,200 steps of 32 (19 minutes with two other runs
on two cores): half of every batch is stage 3's own draws, half are picture questions
about one picture's background or look, found by its number ("Tell me the kind of background in
picture 2.") or by what it shows ("Tell me the number of the picture that looks grainy."), with
stage 3's pointer from the answer position to that picture's nine image tokens. None is a
client task's question. Scored as the calibration scores (`python benchmarks/learnability.py
--model-cache DIR --test 200 --tasks ...`), with the pointer (seeds 0 and 1) and without it
(`--no-pointer`, seed 0):

| task | chance | shipped | seed 0 | seed 1 | no pointer |
|---|---|---|---|---|---|
| `synth-triple-style` | 50.0 | 46.5 | **74.5** | **79.5** | 70.5 |
| `synth-quality-triple` | 33.3 | 38.5 | 43.0 | 50.5 | 37.0 |
| `synth-quality-pair` | 50.0 | 50.0 | 52.5 | 51.5 | 52.5 |
| `synth-pair-statement` | 50.0 | 53.5 | 56.5 | 55.0 | 52.0 |
| `synth-idiom-image` | 25.0 | 25.0 | 23.0 | 24.0 | 22.0 |
| `synth-state` | 25.0 | 78.0 | 78.5 | 80.0 | 95.0 |
| `synth-answerable` | 50.0 | 90.0 | 99.5 | 98.5 | 98.5 |
| `synth-count-easy` | 33.3 | 78.0 | 66.5 | 77.0 | 69.0 |
| `synth-quad-colour` | 50.0 | 77.0 | 69.5 | 75.5 | 85.5 |
| `synth-colour-count` | 25.0 | 47.0 | 42.5 | 47.5 | 40.5 |

`synth-triple-style`, at chance on every earlier weight, gains 25 to 30 points, and
`picture_gap.py` shows why: at the answer position each picture's background is now read
63-81% (seed 0) and 71-87% (seed 1) of the time on the last layer, against 45-62% on the
shipped weights (63-71% without the pointer). The questions do most of the work and the pointer
adds to it. The comparisons of photo quality move little, and `synth-answerable` passes the 95%
headroom on every run. Over the whole
calibration (seed 0; `python benchmarks/learnability.py --model-cache DIR --test 200 --jobs 2`),
10 of 38 tasks gain 15 points or more (shipped: 8; `synth-triple-style` and
`synth-query-reference`, 68.5, join them), but the mean gain stays +8.7: the counting tasks lose
(`synth-count-easy` 66.5 from 78.0, `synth-count-choice` 32.5 from 42.0, `synth-quad-colour`
69.5 from 77.0). So the drill is not in the shipped weights; it needs the counting questions
kept in its regular half and a headroom knob for `synth-answerable` first.

**Picture and relation questions together, and stage 6 (measured; not in the shipped
weights).** With `--pictures 11 --comparisons 10`, the drill gives 10 of every 32 samples to
stage 5's relation questions (the multi-picture and relation families of the public split,
without a pointer) and keeps 11 of stage 3's draws. On the 18 tasks it can move (seeds 0 and 1,
`learnability.py --model-cache DIR --test 200 --tasks ...`), the comparisons of photo quality
move at last: `synth-quality-triple` 53.0 and 54.0 (chance 33.3; shipped 38.5, picture
questions alone 43.0 and 50.5) and `synth-quality-pair` 60.5 and 53.5 (chance 50), while
`synth-triple-style` reaches 62.5 and 85.5 and `synth-pair-statement` stays at 54.0 and 52.0.
The counting losses remain (`synth-count-easy` 75.5 and 64.0, shipped 78.0), and
`synth-answerable` ends at 96.0 and 90.5; a higher closeness (a grey box over another object
more often) does not lower it (96.5 at 0.8, 93.0 at 1.0). Stage 6 of `drake models pretrain`
(`--picture-steps N`, `--picture-only` on stage-3 weights) is this recipe inside the package,
its own questions drawn by index so that a stopped run resumes to the same bytes: half picture
questions with the pointer on the asked picture, half relation questions, 0.65 of every batch.
From the shipped weights, `drake models pretrain --model all --picture-only --picture-steps 1200
--cache-dir DIR` took 29 minutes for both families at once on two cores (with two other runs
for its first half); held-out public exact match moved from 0.66 to 0.65 (qwen) and 0.63 to
0.60 (llama), the counting family from 0.50 to 0.36 on qwen. The whole calibration on the stage's qwen
(seed 0; `learnability.py --model-cache DIR --test 200 --jobs 2`) does not keep the drills'
gains: 7 of 38 tasks at +15 or more (shipped: 8), mean gain +8.6 (+8.7). `synth-triple-style`
ends at 53.5, `synth-quality-triple` 44.0, `synth-quality-pair` 56.0 and
`synth-pair-statement` 61.0; `synth-quad-colour` 86.0 and `synth-answerable` 98.5 (past the
95% headroom) gain; `synth-relation-query` (45.0 from 57.5), `synth-count-easy` (66.0 from
78.0), `synth-spatial` (45.0 from 54.0) and `synth-common-concept` (39.5 from 47.0, below +15)
lose. Yet `picture_gap.py` finds the stage's qwen reading each picture's background at the
answer position as well as the drills did (64-92% on the last layer; drill seed 0: 63-81%):
reading the pictures is not yet comparing them. On `tiny-llava-llama` the stage moves neither multi-picture twin (`synth-triple-style`
51.0, shipped 52.0; `synth-quality-triple` 42.0, shipped 46.0), though `picture_gap.py` finds
its answer position reading each picture's background a little more often (73-84% on the last
layer, shipped 71-78%). As with stage 5, one run's gain on a multi-picture twin does not
predict the next run's: a second run of the stage on qwen (seed 1; 6 tasks) reaches 77.0 on
`synth-triple-style`, 44.5 on `synth-quality-triple`, 53.0 on `synth-pair-statement` and
79.5 on `synth-count-easy`, and `synth-answerable` 85.0. Picture questions that compare two
numbered pictures ("Tell me if picture 1 and picture 3 look alike.", yes or no, the pointer on
both; `picture_drill.py --compare`, seed 0, 6 tasks) give 82.5, 44.0, 59.5 and 84.0 on the
same four, and 94.0 on `synth-answerable`. Both together (`--pictures 11 --comparisons 10
--compare`, seeds 0 and 1, the 18 tasks): `synth-triple-style` 59.5 and 68.0,
`synth-quality-triple` 51.5 and 52.0, `synth-quality-pair` 51.5 and 54.0,
`synth-pair-statement` 48.0 and 64.0, `synth-count-easy` 71.5 and 69.5, and `synth-state`
97.5 and 98.0, past the headroom; 6 and 8 of the 18 gain 15 points or more (mean gain +13.9
and +17.1), against 7 and 7 without `--compare` and 5 (+13.4) on the shipped weights. The
drill's own comparison questions stay at chance after it: "same background" 52.5 and 46.7%,
"same look" 41.5 and 50.0% (yes or no; `picture_drill.py` now scores them). Of everything
tried on the multi-picture twins, only `synth-quality-triple` at +15 or more holds on every
drill run with relation questions (four of four; stage 6's two runs, 44.0 and 44.5, do not
reach it). The stage is not in the shipped weights: one
seed's full calibration does not beat them, and the seeds disagree by more than the gains.

**Stage 4 in the shipped weights (measured).** Stage 4 with the value read-out, at stage 3's
learning rate, is now part of `drake models pretrain`'s defaults (`--label-steps 2000
--label-lr 0.001 --label-value-weight 1`, seed 0), and the shipped weights went through it
(`drake models pretrain --model all --label-only --cache-dir DIR` from the stage-3 folders; 29
minutes, both families at once on two cores). Against the stage-3 weights: held-out public
exact match, mean over families, 0.66 to 0.63 (qwen) and 0.63 to 0.62 (llama).
`public_formats.py`: `tiny-llava-qwen` answers lettered options 55.4% (stage 3: 36.8, chance
37.2), numbered 53.6% (37.8, chance 37.9), choice lists 62.5% (57.1), open questions 58.7%
(63.6) and verdicts 49.7% (51.2, chance 50); `tiny-llava-llama` 50.2% lettered, 43.4%
numbered, 51.6% verdicts. `label_gap.py --samples 10000` (pointer / read-out / answer over the
1,385 held-out look-ups): qwen 75.5 / 74.0 / 73.1% (colour answers 77.5, shape 72.9), llama
70.2 / 66.8 / 64.1% (58.8 and 48.6); the `tags` and `where` questions, whose options are
several words long, stay at chance in both (the value read-out names an option's first word
only). The look-up probe reaches 94.0% with qwen's LoRA (stage 3: 82.5%; issue #13 asks 90).
The calibration on them, before the dishes' redesign (the last paragraph): 10 of 38 tasks gain
15 points or more (stage 3: 8), 12 gain 10 (9), and the mean gain is +8.7 points on both; 17 tasks end higher, mean difference 0.0 points, sd 8.5. It
rises where a task's answer is one look-up and a label away: `synth-instance-attr` 28.5 to
67.0%, `synth-quality-triple` 38.5 to 51.0%, `synth-shape-facts` 34.5 to 41.5%; the counting
and relation tasks lose, `synth-count-easy` 78.0 to 62.0%, `synth-colour-count` 47.0 to
40.0%, `synth-common-concept` 47.0 to 37.0%, `synth-relation-query` 57.5 to 50.5%,
`synth-quad-statement` 54.0 to 46.5%. `synth-answerable` reached 97.5% at its old knobs
(closeness 0.5, degradation 0.6), 97.5% at closeness 1.0 alone and 99.0% with three to six
objects; it now has a box over another object in every answerable photo and milder
degradations (closeness 1.0, degradation 0.3): 91.0% (88.0% with the LoRA's seed 1).
`synth-state` stays under the headroom (82.0%). The same recipe at seed 1 (above) gave 10 of
38 and +10.4 with other tasks moving, so single tasks move by up to ten points between
pretraining seeds.

**Dishes that name their look, and the knobs swept again (measured).** WCVQA's dish names are
knowledge a foundation model brings from its pretraining, and the tiny models have none of it.
A name the picture does not spell out was not learnt at the calibration's budget
(`synth-dish-name` 24.0%, chance 20) nor at four times it (`learnability.py --tasks
synth-dish-name --steps 960 --every 480 --train-size 2400`: 22.5% with the LoRA, with
`--train-vision`, and with every weight trained, `--full --lr 0.0005`; the training loss stays
at chance, about 0.81). The dishes now name their look: each has one large main part in its
region's shape (Northland a circle, Southland a square, Eastland a hexagon, Westland a star,
Midland a heart) whose colour is the first word of its name ("cyan snow tower"); a region's
four dishes differ in that colour, and so do the five options of every question; the side
parts are small. A name is then one look-up (the main part's colour) and a label (its option's
id) away, as in `synth-instance-attr`; the context lines and the distractor rules are as
before. At the calibration's settings `synth-dish-name` reaches 73.0%, `synth-dish-context`
77.0% and `synth-dish-misleading` 72.5% (from 24.0, 18.5 and 19.5; the LoRA's seed 1, `--seed
1`: 76.5, 74.5 and 79.5); on `tiny-llava-llama`
(`--model tiny-llava-llama`), whose colour look-up is weaker (`label_gap.py` above), 19.0,
36.0 and 35.5%. `synth-dish-region` stays at 23.5%: a region's name is still a fact the
picture does not spell out (the main part's shape tells it only through a mapping the LoRA
must learn; at four times the budget, `--steps 960 --every 240 --train-size 2400`, 24.5% with
the training loss flat at 0.81). Asking the style the dish is drawn in instead (a trial outside
the package; drake-synth's design allows "which region or domain") was not learnt either:
24.5% on qwen and 26.0% on llama, the loss flat again, though the models name a picture's
background in the open form; stage 4 supervised the label step on objects' attributes only.
`synth-common-concept` now has closeness 0.3: 49.0% (37.0 at 0.6, 55.5 at 0.0). The other
tasks under +15 were swept one at a time at the calibration's settings, and none reached +15. Closeness 0.0 (with one or two objects per picture where the task draws a
range) gives `synth-pair-statement` 56.5%, `-quad-statement` 46.5, `-pair-count` 48.5,
`-triple-style` 50.5, `-transition` 60.0, `-pair-relation` 59.0, `-spatial` 53.0,
`-figurative-tf` 50.5, `-relation-query` 54.0, `-concept-query` 55.5 and `-query-reference`
63.5 (chance 50); `-idiom-image` 22.0, `-metaphor-image` 22.5, `-common-relation` 20.0,
`-odd-relation` 32.0, `-motion` 24.0, `-story-next` 26.0 and `-diagram` 25.0 (chance 25);
`-bar-chart` with three bars 43.0 (chance 33.5). `synth-edit-direction` with two objects gives
49.5, and `synth-count-choice` without clutter and with counts 1 to 5 (`--count 1 5`) 38.0
(chance 32.5). So what the tasks still at chance need is what pretraining has not given:
reading positions and sequences, comparing pictures, and names (figurative or arbitrary) the
picture does not spell out. At these designs and knobs 14 of 38 tasks gained 15 points or
more, 15 gained 10, and the mean gain was +13.2 points (before: 10, 12 and +8.7).

**Items at the size the tower reads, and fewer cloth counts (measured).** The vision tower was
pretrained on shapes in the cells of a 3 x 3 grid, at a small or a large shape's radius (0.075
and 0.14 of the side). `synth-query-reference` drew its two garments to fill the picture
(radius 0.24), and per claim (`learnability.py --tasks synth-query-reference --by changed`, the
calibration's settings) the LoRA learnt the descriptions that claim a colour (90.0% of those
that claim only a colour) but not the others: those that claim only a shape, a fill or both
stayed at 37.5% (chance 50). The garments now have a large shape's radius; the descriptions
and their true/false rules are as before. Then the descriptions without a colour reach 65.6%
(a shape alone 68.4%, a fill alone 61.5%), and the task 76.5% (from 61.5; the LoRA's seed 1,
`--seed 1`, 78.0%; `tiny-llava-llama` 68.0%). `synth-quad-colour` keeps its garments that fill
the picture: its statements are about their colour (72.5% at the large shape's radius, 76.0%
as it is). `synth-colour-count` counts one to four objects of a named colour across its three
pictures (the `count` knob was 1 to 6): 59.0% (40.0 before; `--seed 1` and `--seed 2` give
58.0 and 52.0, and at counts 1 to 5 52.0, 39.5 and 44.5). Tried outside the package and left
out, as none reached 15 points over chance: the Bongard-HOI twins' two shapes in neighbouring
cells of the grid, at the two radii (`synth-common-relation` 22.5%, `-odd-relation` 22.5,
`-relation-query` 51.0); `synth-count-choice` on the 3 x 3 grid whenever its objects fit (its
4 x 4 grid draws smaller shapes): 38.3% at its knobs and 41.7% with counts 1 to 5 (chance
32.5; 300 held-out samples). With the same 300, per family or kind, `synth-bar-chart` reads
no bar's value (26.7%, chance 25) and `synth-transition` learns no kind of edit (54.3 to 64.0%,
chance 50). The table above is measured at these designs and knobs: 15 of 38 tasks gain 15
points or more, 15 gain 10, and the mean gain is +14.1 points. The knowledge-sharing table
below, and the quickstart's numbers in the README, are measured on them too.

**Image tokens do not say where they are (measured; the trials are not in the shipped
weights).** A picture reaches the language model as nine image tokens, one per cell of the
scene grid in reading order, and pretraining's vision heads read every cell with the same
weights, so nothing asks a token to carry its cell. `python benchmarks/position_gap.py` fits a
linear probe for a token's cell (one of nine) on 400 samples of a task: on `synth-spatial` the
projected tokens tell it 13.0% of the time on `tiny-llava-qwen` (11.6% for the tokens that hold
an object; chance 11.1) and 12.1% on `tiny-llava-llama`, and after the language model's layers
37-43% (qwen) and 42-50% (llama), from the attention pattern alone. A position look-up is then
learnt slowly: `learnability.py --tasks probe-where-lookup` ("Is the red star at the top
left?", Yes/No) reaches 61.5% at the calibration's budget (the colour look-up 94.0%) and 89.5%
with four times the steps and samples at a quarter of the LoRA's rate (`--steps 960 --every 240
--train-size 2400 --lr 0.0005`); at the LoRA's rate (0.002) it peaks at 79.0% and falls back to
57.0%. Two trials from the shipped `tiny-llava-qwen`, each scored with the calibration's
settings. (1) Each token's cell added to its projected embedding as words (the embeddings of
its row and column words, "top" and "left", scaled to the token's norm; a patch outside the
package): under the LoRA alone it moves neither the look-up (59.0%) nor `synth-spatial`
(47.5%; 44.5% with every weight trained, `--full --lr 0.0005 --steps 900 --train-size 3000`).
Followed by stage 5 (`drake models pretrain --model tiny-llava-qwen --relation-only
--relation-steps 1500`, 18 minutes on one core), `synth-common-relation` reaches 54.0% (the
LoRA's seed 1: 56.5; shipped 22.5, chance 25), the only task of the 38 that gains 10 points or
more, while the lettered and numbered tasks lose their label step (`synth-instance-attr` 67.0
to 25.5%, the three dish-name twins 73-77 to 23-30%, `synth-shape-facts` 41.5 to 26.5): 9 of
38 tasks gain 15 points or more. (2) Stage 5 alone, the same command: the look-up reaches
87.0%, but `synth-common-relation` stays at 26.5% and `synth-spatial` at 51.5%; over the 38 tasks 15 gain 15 points or more (as shipped), the mean
gain is +13.5 points (shipped +14.1), `synth-state` (98.5%) and `synth-answerable` (97.5%) pass
the 95% headroom, and the dish-name twins fall to 36.0-42.5%.
So the relation questions teach the position look-up through the attention pattern, and only
tokens that carry their cell let a LoRA learn a relation shared by pictures; neither moves the
two-object relations (`synth-spatial`, `-pair-relation` 58.0 and 59.5, `-relation-query` 52.0 and
50.0, `-odd-relation` 22.5 in both trials). The next pretraining should give the tower's tokens their
cell (a Swin with absolute position embeddings, and the cell's words among stage 2's grounding
targets) and then re-learn the label step on them, from stage 2 on.

**Tokens that carry their cell do not teach the relations (measured; not in the shipped
weights).** The tower of that proposal, tried from the shipped weights (a script outside the
package): the shipped tower gets Swin's absolute position embeddings (zeros at first) and
stage 1's heads one more, each feature's cell, and trains 1,500 steps of 32 on stage 1's
targets at lr 0.0005 (6 minutes; on 1,500 held-out pictures the cell is read 99.2% of the time,
shape 93.8% and fill 93.2%). Then stage 4 (`drake models pretrain --model tiny-llava-qwen
--label-only`, 2,000 steps, 24 minutes) with two more grounding targets for every image token,
empty cells too: its row and column words ("top", "left"). As a control, the same stage 4 runs
again on the shipped weights, without the tower change. `position_gap.py` on the trial's
`synth-spatial`: the projected tokens tell their cell 98.3% of the time (shipped 13.0%), and
90-94% after the language model's layers. Yet at the calibration's settings (`learnability.py
--model-cache DIR --test 200`) the trial and the control end alike: 14 of 38 tasks gain 15
points or more in both (shipped 15; `synth-quality-triple` falls to 41.5% in both), the mean
gain is +16.7 and +16.6 points (shipped +14.1), and the position look-up
(`--tasks probe-where-lookup`) reaches 65.5% on the trial and 73.5% on the control (shipped
61.5). The two-object relations stay where they were: `synth-spatial` 52.5% on the trial and
57.0% on the control, `-pair-relation` 57.5 and 59.0, `-relation-query` 52.0 and 49.5,
`-odd-relation` 23.0 and 22.5, `-common-relation` 23.0 and 23.5. The second stage 4 lifts the
label-step tasks (the dish-name twins 87-95%, `synth-dish-misleading` 89.5 and 93.0 from 72.5),
and `synth-state` (97.5 and 99.5) and, on the trial, `synth-answerable` (99.0) pass the 95%
headroom. A longer run with every weight trained does not fit the relations either: 16,000
samples (27 times the calibration's) and 4,000 steps (`learnability.py --tasks synth-pair-count
synth-spatial --full --lr 0.0005 --steps 4000 --every 1000 --train-size 16000 --test 200`, 23
minutes) end at 48.0% and 53.0% (chance 50), the training loss from 0.351 to 0.344 and 0.353 to
0.349. The skills are bound to the words that taught them: `python benchmarks/public_formats.py`
(held-out `synth-public-formats`, greedy exact match) finds `where` asked as that task asks it
("In which part of the image is the pink square?", answered in a word) right 21.9% of the time
on the shipped weights, 25.0% on the control and 28.1% on the trial, while `synth-public-open`'s
wording of the same question ("Tell me where the pink heart sits.") is answered on pretraining's
held-out questions (0.93 shipped, 1.00 on the trial). Verdicts ("Is the proposed answer
right?") are at chance on the shipped weights in every family, 49.7% of 473 (`size` 37.5%,
though its choice form is 100%), and 63.0% and 63.8% after the second stage 4. So the facts a
relation compares (where each object is, how many there are) can be put in the tokens, but a
question worded otherwise, or a client task that composes them into a new question, is not
learnt from its own samples: composition across wordings is what the tiny models lack, and
what the next pretraining should teach.

**Neither more verdicts nor a larger language model moves the tasks (measured; not in the
shipped weights).** Two trials toward that, each a change outside the package. (1) *Verdicts of
every family.* Stage 4 again on the shipped weights, as the last paragraph's control, but with
the label questions' verdicts drawn from every family and from one to four pictures (the control
draws them from the one-picture look-ups): 62% of the label questions are verdicts (125 of the
first 200; a third in the control), about 20,000 in the 2,000 steps. `public_formats.py` then
finds the verdicts right 50.9% of the time (control 63.0%, shipped 49.7%; chance 50): `size` is
judged right 54.2% of the time though its choice form is answered every time. At the
calibration's settings 14 of 38 tasks gain 15 points or more (control 14, shipped 15) and the
mean gain is +17.0 points (control +16.6); the True/False tasks stay within 4 points of chance
(`synth-pair-statement` 53.0%, `-quad-statement` 49.0, `-figurative-tf` 49.5, `-quality-pair`
51.5, `-triple-style` 50.5), and `synth-state` (97.0) and `synth-answerable` (98.5) pass the 95%
headroom. (2) *A larger language model.* `tiny-llava-qwen` at hidden size 256, six layers, 8
heads (2 for keys and values) and an MLP of 768 (6.48 million parameters in all; the language
model 4.3 times the shipped one's) against the shipped shape, both trained by stage 2 alone on
the shipped tower, 3,000 steps of fresh samples (`drake models pretrain --model tiny-llava-qwen
--reuse-vision --fresh-samples --steps 3000 --lookup-steps 0 --label-steps 0`; 95 and 30
minutes on one core). From step 300 on, the larger model's loss on the same batches stays
within 0.15 of the shipped shape's (2.06 and 2.02 at the end). On 2,200 held-out public
questions (`synth-public-open` and `-multi`, greedy exact match) it scores 47.1% over the
families against 51.1%: better at `where` (41.2 against 28.4) and `count` (38.6 against 30.1),
worse at `fill`, `shape` and `quality`, and alike on the comparisons (`multi_more` 87.6 and 89.4,
`multi_same` 54.6 and 52.4, `multi_which` 26.2 and 25.7, `relation` 23.9 and 22.5).
`public_formats.py` gives 41.7, 45.8, 37.2, 41.2 and 46.5% in the open, choice, lettered,
numbered and verdict forms, against 50.0, 50.1, 36.8, 41.8 and 46.7. So twenty thousand verdicts
do not teach the tiny model to judge an answer it finds, and at a quarter of stage 2's budget
four times the language model learns the comparisons and the verdicts no faster. A trial at the
full budget needs a GPU or several sessions: the larger model's stage 2 alone would take about
six hours on one core. Per family, a client learns a verdict only when the model already brings
the value to the answer. Each family's public verdicts alone, as a client task (600 training and
200 held-out `synth-public-formats` verdicts of that family, the calibration's LoRA and budget,
scored by option likelihood; a script outside the package): on the shipped weights the verdicts
on an object the question names reach 87-97% (`colour` 96.5, `size` 93.0, `shape` 90.0, `fill`
89.5, `state` 87.0), while `background` (45.5), `quality` (51.5), `where` (50.5), `count` (46.0),
`multi_more` (57.5), `multi_same` (51.8) and `multi_count` (40.0) stay at chance. After a second
stage 4 `background` is learnt on every weights tried (81.0% on the control, 83.0 with the
verdicts of every family, 88.5 on a third trial of stage 4 that also asks every image token for
its picture's background and quality words), and `quality` on two of them (78.0 and 77.5; 55.5
with the verdicts of every family, 67.5 at step 160). `where` stays at chance on all four
weights (47.5-51.0%) and `count` within 9 points of it (46.0-59.0%). Those are what the
True/False tasks still at chance judge (where objects are, how many there are, how pictures
compare): the next pretraining has to bring positions, counts and picture comparisons to the
answer position, and practising the verdict does not.

**Verdicts follow once the worked-out value is read out before the last layer (measured; not
in the shipped weights).** The last paragraph's next step, tried from the shipped
`tiny-llava-qwen` in four trials of stage 5 (`drake models pretrain --model tiny-llava-qwen
--relation-only --relation-steps 1500`: 1,500 steps of 32, about 20 minutes on one core) with a
patch outside the package. A control runs the same stage without the patch's losses. Per
family, each model is scored as in the last paragraph, with 900 training and 300 held-out
`synth-public-formats` questions of that family (771 and 253 for `relation`, which falls back
to `where` when no two objects share a row or column). (1) *Pointers and cell read-outs.* Half
of each step's samples are public `relation` and `where` questions in every format. On them
four free heads of the second layer point from the answer position to the image tokens of the
objects the question names (two heads per object, `-log` of the attention). Each head's own
output, read through the final norm and the tied head, names its object's row or column word
("top", "centre", "bottom"; "left", "centre", "right"). On 161 held-out public `relation`
questions the heads put 0.98-1.00 of their attention on their object. The row heads name the
row 83.2 and 88.2% of the time, the column heads the column 38.5 and 46.6% (control 30-38%,
chance 33). Greedy answers are right 50.9% of the time (control 32.3%, chance 25). (2) *The
same on a tower that knows its cells* (the tower of *Tokens that carry their cell*, remade:
1,500 steps, the cell read 99.2% of the time): the read-outs reach 89.4-96.3% and the answers
67.1%. (3) *A pointer to the proposed answer.* Trial (1)'s weights go through the stage again
on `relation` questions alone (open, choice-list and verdict forms). One more head, in the last
layer, points from the answer position to the proposed side word and names it. (4) *The
worked-out side, read out.* Trial (3)'s weights go through the stage a third time with one more
loss: at the answer position, the hidden state after the second of the three layers, read
through the final norm and the tied head, names the side ("left", "right", "over", "under").
Asked with a choice list, `relation` reaches 88.5% on (1) (control 58.5), 96.4% on (2), 97.2%
on (3) and 94.1% on (4); the last three score 85.0, 99.2 and 100.0% before the LoRA trains.
Asked as verdicts, the same questions stay at chance on (1)-(3): 47.8, 54.9 and 62.8% (control
53.0). On (3) the untrained score is 50.6%, though the stage trained on such verdicts. On (4)
they are judged right **100.0%** of the time, before the LoRA and after it. `where`'s verdicts
(control 66.3%; 55.0, 52.7 and 54.7 on (1)-(3)) reach 74.0% on (4). So a verdict on a value
the model works out needs that value at the answer position one layer before the last, where
the last layer can set it against the proposed word. The object attributes already get there,
which is why their verdicts are learnt. The client twins hardly move (`learnability.py
--model-cache DIR --test 200`; control, then (1)-(4); (4) went through the stage three times,
the control once):

- `synth-spatial` 53.5, 54.0, 49.0, 50.0 and 56.5%;
- `-pair-relation` 59.5, 54.5, 57.5, 57.0 and 55.5;
- `-relation-query` 51.5, 50.0, 49.5, 52.5 and 54.0;
- `-odd-relation` 23.0, 22.5, 21.5, 22.5 and 22.5;
- `-common-relation` 22.5, 25.5, 28.0, 26.0 and 31.5;
- `-quad-statement` 51.5, 54.5, 52.0, 51.5 and 56.0;
- the position look-up (`--tasks probe-where-lookup`) 74.0, 69.5, 74.0, 88.5 and 83.5.

Their captions name sides in other words ("above", "to the left of"). Their relations join
objects the question does not name by colour and shape ("the small solid shape"), and they
span several pictures. No public family asks either. Over the whole calibration (4) keeps 15
of 38 tasks at 15 points or more (as shipped; mean gain +13.3 points, shipped +14.1, `--jobs 2`).
Six two-option tasks gain 5 points or more over the shipped weights: `synth-pair-statement`
65.5% (shipped 49.5), `-quad-statement` 56.0 (46.5), `-spatial` 56.5 (48.0), `-transition` 63.5
(55.0), `-quality-pair` 50.5 (45.5) and `-answerable` 99.5 (91.0), which passes the 95%
headroom; `synth-count-easy` reaches 75.0 (62.0). The lettered and numbered tasks lose their
label step, as in stage 5's trials: `synth-instance-attr` 36.5% (67.0), and the dish-name twins
42.5-52.0% (72.5-77.0).
A next pretraining would put this read-out on every family's worked-out value, with label
questions kept in the mix.

**Every family's worked-out value, read out: the learnt tasks rise, the others do not (measured;
not in the shipped weights).** The last paragraph's next step, in three more trials of stage 5
(the same command and patch, with more added). Of every ten questions in a step's question half,
three are fresh label questions of stage 4 and seven are `synth-public-formats` questions of
every family and format. On each of those, the read-out of trial (4) names the question's open
answer, the value it works out (a colour, a count, a side, "yes" or "no", a picture's number).
Stage 4's label and value losses join on every lettered or numbered question, and the pointers
of trials (1) and (3) stay. (5) starts from trial (4)'s weights, (6) from the shipped weights.
(7) starts from (5)'s and also asks the public `relation` questions in two more wordings, "Where
is the A relative to the B?" and "Is the A above (below, to the left of, to the right of) the
B?" (answered "yes" or "no"); three in ten of its question half are `relation` questions in the
three wordings. On 2,000 held-out `synth-public-formats` questions the read-out names the value
for most one-picture families on (5), (6) and (7): colour 88.6-89.5%, `exists` 86.8-88.6, `size`
95.1-97.1, `state` 88.1-94.1, `background` 100.0, `relation` 95.7 and 98.9 on (5) and (7) (on
(7), in its own wordings) but 26.9 on (6). The shipped weights score 6.5-36.9% (this read-out
was never trained on them). Counts and the families of several pictures stay low: `count`
27.2-38.0%, `multi_*` 41.3-63.6, `tags` 24.1-32.8. Over the whole calibration (`learnability.py
--model-cache DIR --test 200`, `--jobs 1` for (5) and (6) and 2 for (7)), (5), (6) and (7) each
lift 14 of 38 tasks 15 points or more (shipped 15), and the mean gain rises to +15.2, +17.5 and
+16.5 points (shipped +14.1). The gains fall on tasks that were learnt already. On (6) the
stage-4 questions restore the label step and lift it: `synth-dish-name` 87.5% (73.0),
`-dish-context` 87.5 (77.0), `-dish-misleading` 89.5 (72.5), `-quad-colour` 84.0 (76.0),
`-shape-facts` 53.5 (41.5). (7) reaches `synth-instance-attr` 83.5 (67.0). (5) reaches
`synth-count-easy` 84.5 (62.0) and `-common-concept` 62.0 (49.0). `synth-quality-triple` falls
below the bar on all three: 43.5, 35.5 and 40.5% (51.0; with the LoRA's seed 1, `--seed 1`, (6)
37.5 against 44.5). `synth-answerable` passes the 95% headroom on all three (98.5-99.0). The new
wordings bring `synth-spatial` closest: 59.5% on (7), 68.5 after 160 of the 240 steps, and 66.5
with `--seed 1` (shipped 48.0, and 53.0 with `--seed 1`); `-pair-statement` 62.5 (49.5) and
`-transition` 62.5 (55.0). The other 20 tasks under the bar stay within 10 points of chance on
all three. The values they need are comparisons across pictures, changes from frame to frame and
figurative names. The `multi_*` families do ask for comparisons across pictures, and their
read-outs stay near 50%: the model does not hold such values yet. No public family asks for the
other two. With the LoRA at half the learning rate (`--lr 0.001`), (7) lifts `synth-spatial` to
72.0%, and 15 of 38 tasks gain 15 points or more (mean +17.8; it loses `synth-quality-triple`,
41.5%); on the shipped weights at that rate, 15 as well (mean +14.9).

**A glossary of the twin world's facts lifts the dish's region; a plain word for each figure does
not lift the figurative tasks (measured; not in the shipped weights).** Four more trials of stage 5,
each 1,500 steps with the last paragraph's losses. (8) and (9) start from (6) and (7). They add a
public family that asks, in every format, which plain word fits the figurative pattern a scene
shows: one word of its own for each of the thirteen patterns of the figurative tasks ("crowded",
"single", "matching", "warm", "stack", ...). Two in ten of the question half ask it, and two in ten
ask `relation` in (7)'s wordings. The read-out after layer 1 names the word for 72.7% and 77.9% of
77 held-out questions. Under the calibration's LoRA the figurative tasks stay near chance all the
same: `synth-idiom-image` 19.5 and 22.0%, `-metaphor-image` 25.5 and 25.0, `-phrase-for-image` 29.5
and 32.5, `-figurative-tf` 54.5 and 45.0. (10) and (11) start from (8) and (9), keep the pattern
questions and put a glossary in place of the `relation` questions, one in ten of the question half
each. One question names a pattern's idiom, metaphor, simile or phrase and asks for its plain word.
The other asks which region serves its dishes on a given shape. The picture beside them is random
and no help: a language model knows idioms and cuisines from text. `synth-dish-region`, at chance on
every earlier set of weights, reaches 83.5% and 95.5% (shipped 23.5, chance 20); (11) breaks the 95%
headroom. The figurative tasks stay within 10 points of chance (35.0% at most). Over the whole
calibration (`learnability.py --model-cache DIR --test 200`), (10) and (11) each lift 16 of 38 tasks
15 points or more (shipped 15), and the mean gain is +19.3 and +20.4 points (shipped +14.1). Both
break the headroom elsewhere too: `synth-answerable` 99.0 and 99.5%, `synth-state` 96.0 and 98.5.
`synth-pair-statement` passes on (11) (65.5; shipped 49.5), and `synth-quality-triple` only on (10)
(49.5; 42.0 on (11)). So a fact that the picture does not spell out is learnt once pretraining
states it. A phrase that the client must first translate and then compare with the picture is not,
even when pretraining reads out both halves. The other 18 tasks under the bar on (11) are the
counts, bars and labels of one picture, `synth-spatial` (57.5%), and the comparisons across pictures
and frames of the last paragraph.
"""


def folder_card(spec: BenchmarkSpec, manifest: dict[str, Any]) -> str:
    parts = [
        _yaml_header(spec, manifest),
        f"# {spec.name} {spec.version}",
        spec.description,
        f"Built by the DRAKE suite (builder {manifest['builder_version']}, seed "
        f"{manifest['seed']}); every shard's sha256 is in `manifest.json`; check the folder with "
        f"`drake verify <folder>`.",
        f"Source: {spec.source_note}.",
        "## Fields",
        "`id, task, images, prompt, answer, choices, answer_type, label, domain, meta` "
        "(see `drake/schema.py`). Each prompt holds one `<image>` per image.",
        "## Tasks",
        task_table(spec, manifest),
    ]
    if manifest.get("sources"):
        parts += ["## Source rows",
                  "Every source row is kept, dropped by a rule (`cap`) or rejected with a reason; "
                  f"the rejected ones are listed in `{manifest['rejected']['file']}`.",
                  counts_table(manifest)]
    if spec.clients:
        parts += [f"## Clients (model mix `{spec.default_mix}`)", client_table(spec)]
    if spec.unseen_tasks:
        parts += ["## Unseen tasks", ", ".join(spec.unseen_tasks)]
    if spec.scenarios:
        parts += ["## Scenarios", "\n".join(
            f"- `{s.name}`: {s.partition}, {s.order}, {s.rounds} rounds"
            + (f", {s.rounds_per_task} per task" if s.rounds_per_task else "")
            + (f", {json.dumps(dict(s.params), sort_keys=True)}" if s.params else "")
            for s in spec.scenarios)]
    if spec.citation:
        parts += ["## Citation", spec.citation]
    return "\n\n".join(parts) + "\n"


PROJECT_PROSE_HEAD = """\
# DRAKE — dataset card

DRAKE is a benchmark for personalized federated learning (PFL) of multi-modal foundation models.
It has **40 client tasks from 19 multi-modal datasets**, arranged as **10 clients x 4 tasks**, and
**7 unseen tasks** for generalisation. It was released with the FedMosaic paper, together with
HFLB, a re-split of FedDAT's benchmark. This suite builds both from their released sources.
It also builds the classification and generation setups of pFedMMA, TAP and FediLoRA, and
**drake-synth**, a procedural twin of DRAKE that needs no network.

Everything below the headings marked *generated* is rendered from the registry
(`drake/catalog/`) by `python -m drake.card > DATASET_CARD.md`, and a test checks that this
file is up to date. The YAML header above is the Hub card of a built DRAKE folder: one `configs`
entry per task, so `datasets.load_dataset(<folder or repo>, "<task>")` loads one task.

## How a benchmark is built

`drake build --benchmark NAME --out DIR` writes `DIR/NAME/` (`drake build --out ./data` builds
DRAKE):

- `tasks/<task>/<split>-NNNNN-of-NNNNN.parquet`: samples in the schema below. Each task is stored
  once.
- `manifest.json`: the spec, the builder and package versions, the seed, row and image counts per
  task and split, the sha256 of every shard and of the card, and a digest of itself. It holds
  no clocks and no paths, so the same seed gives a byte-identical manifest.
- `README.md`: a Hub dataset card with one `configs` entry per task.
  `datasets.load_dataset("DIR/NAME")` loads all tasks; `load_dataset("DIR/NAME", "<task>")`
  loads one.
- `partitions/<scenario>.parquet`: who gets which sample, in which round (see *Streams*).
- `rejected.jsonl` (real data only): one JSON object per source row that was refused, with the
  task, split, source id, reason and the file it came from.

Builds are atomic: they write to `.NAME.partial` and rename at the end. They are resumable:
journalled shards whose hash still matches are skipped. One build at a time writes a folder: a
second one fails at once and names the first (its pid and command). `drake verify DIR/NAME`
re-hashes every shard and re-counts its rows, checks the manifest's digest, spec fingerprint,
row total and card, regenerates one drake-synth shard from the stated seed, and reports any file
the manifest does not name; for real data it also checks the accounting below and
`rejected.jsonl`. Source files are read confined to their folder or archive (no `..`, absolute
paths or links) and capped in size (64 MiB an image, 512 MiB an annotation file).

**Real sources.** DRAKE and HFLB are read from the released Hub dataset repos `SNUMPR/DRAKE` and
`SNUMPR/HFLB`, one `<Dataset>.tar` per source dataset. Only the tars of the requested tasks are
downloaded (`hf_hub_download`, one file at a time; `--tasks` narrows a build), into the Hugging
Face cache (`--cache-dir`, default `$HF_HOME/hub`), at `--revision` if given. The tars are read
in place, never unpacked. `--source-dir DIR` reads `DIR/<Dataset>.tar` or an unpacked
`DIR/<Dataset>/` instead. With `HF_HUB_OFFLINE=1` only the cache is read; with no network and
no cache the build stops within seconds and names the offline alternatives (drake-synth,
`--source-dir`, a pre-filled `HF_HOME`).

**Accounting.** For every task split, the manifest's `sources` records
`source_rows = kept + dropped (by rule) + rejected (by reason)`. The only rule is `cap` (at most
10,000 train and 2,000 test rows per task, a seeded random subset kept in source order). A row
is rejected, never repaired, when a field is missing, its `<image>` count differs from its image
list (`image-token-mismatch`), an image is absent or does not decode (`unreadable-image`), a
multiple-choice answer is not among the options parsed from the prompt (`choice-not-found`), or the
answer is empty. `--strict` turns any rejection into an error naming the file, sample id and
reason. A task split that keeps no row, or under 90% of the rows its spec expects, stops the
build before anything is written, naming the task and where its rows went; `--allow-short`
builds it anyway and lists it in the manifest's `shortfalls`. Ids never cost a row: the released files repeat ids (VSR, AQUA, HFLB COCOQA,
Bongard-OpenWorld) or have none (HFLB Abstract), and the reference code never reads them, so a
repeated id gets `~2`, `~3`, ... on its later rows and a missing one `row-<index>`; `meta` keeps
the released id and the row index. A human turn with no `<image>` at all (HFLB VizWiz-Original)
gets one per image at its start (`meta.image_tokens_added`).

**Samples.** The prompt is the released human turn, unchanged but for the `<image>` tokens
above; the answer is the gpt turn.
The choices are parsed from the prompt (`drake/adapters/choices.py`): `Choice list:[...]` (also
`Choice List: [...]`, `|`-separated lists, quoted options), a bare `[...]` line, lettered
`A. ... B. ...` options (the choices are the letters when the answer is a letter), `Image A:`
multi-image options, and World Cuisines' numbered answer ids. A list written as a Python literal
(`['red', 'blue']`, nested `[['no', 'yes']]` in HFLB Abstract) gives its strings; COMICS'
`A: text| B: text` gives the letters; commas inside options are kept where the prompt tells them
from separators (IRFL-3 joins with `,` and its phrases hold `, `; numbers such as `1,000`) and
where they spell the gold answer. Another option that holds `, ` in a `, `-joined list
(VizWiz-Original, Bongard-OpenWorld captions, TQA) cannot be told from two and stays split.
An answer that matches an option only up to letter case takes the option's spelling (the
released spelling is kept in `meta`).
Images keep their released bytes. `meta` holds the source id, file, subset and image paths.

**Prebuilt folders.** `drake download --benchmark NAME --out DIR` fetches a built folder from
the Hub dataset repo `drake-pfl/NAME` (`--repo` for another; pin `--revision` to a commit for
identical bytes), checks every file against the manifest's sha256 and moves it into place only
if all match. `drake push DIR --repo ID` verifies a folder and uploads it with its card.

**Splits.** Real tasks keep the released train/test files. drake-synth draws train and test
independently: sample *i* of a split depends only on (seed, task, split, i).

**Streams.** In the *dynamic* (task-incremental) order, a client meets its 4 tasks in the order
listed below, with 5 rounds per task (20 rounds). In the *static* order, all of a client's
samples are shuffled into 20 round chunks.

## Fields

| field | type | meaning |
|---|---|---|
| id | string | unique within the benchmark (`<task>-<split>-<source id>` for real data) |
| task | string | task id |
| images | list of Image | zero or more images (PNG bytes for generated data); for an `image` sample the last one is the target |
| prompt | string | text prompt, exactly one `<image>` per image (an `image` sample's target has none) |
| answer | string | gold answer; one of `choices` for multiple choice; empty for an `image` sample |
| choices | list of string | options; empty when open-ended |
| answer_type | string | multiple_choice, open_ended, classification, captioning or image (reconstruction, scored by MSE) |
| label | int | class id for classification, else -1 |
| domain | string | visual domain (may be empty) |
| meta | string | JSON object with source details |
"""

PROJECT_PROSE_TAIL = """\
## Known quirks of the released DRAKE data and scenarios

- **Tar layout and image paths.** Each `<Dataset>.tar` unpacks to `<Dataset>/` (images,
  `train/dataset-<subset>.json`, `test/dataset-<subset>.json`); the reference code unpacks it
  inside a `dataset/` folder, and the records' image paths are relative to that code's root
  (`dataset/<Dataset>/...`). The adapter resolves a path as written, without the `dataset/`
  prefix, from the `<Dataset>/` folder on, or under `<Dataset>/`.
- **Bongard-HOI subset ids** are ambiguous: the released task list names 0 the positive/negative
  query (7 images: 3 positive, 3 negative, 1 query), 1 the common-action choice (6 images) and 2
  the odd-action image (4 images), while the public generation scripts write the common-action
  set to `dataset-0.json` and the odd-action set to `dataset-2.json`. The released scenarios,
  which produced the paper's numbers, open `dataset-<id>.json` literally, and so does the
  suite by default (`--subsets released`): clients train on the data of the paper's runs, even
  where a file's content is another task of the task list. `--subsets by-content` instead gives
  each Bongard-HOI task the candidate subset (0, 1 or 2) whose train records all carry the
  task's image count (7, 6 and 4 for tasks 0, 1 and 2; the declared id wins when it fits). The
  file actually read is recorded in the manifest (`sources.<task>.origin.subset`) and in every
  sample's `meta.subset`.
- **Unseen-task groups.** Sec. A.18 of the paper calls DreamSim and ImageCoDe new task types
  and RecipeQA and HQ-Edit new visual domains; the released scenarios group them the other
  way round (`DRAKE_unseen_newtasktype`: the two RecipeQA tasks, Mantis contrastive caption 1
  and HQ-Edit; `DRAKE_unseen_newvisualdomain`: DreamSim, Mantis contrastive caption 0 and
  ImageCoDe). The suite follows the release (`unseen-task` and `unseen-domain` above).
- **Renumbered subsets.** Later scenario scripts of the authors copy or subsample subset files
  under new ids (e.g. `dataset-30.json`, `dataset-40.json`). Only the ids of the released task
  lists are read; other files in a tar are ignored.
- **Two-digit HFLB ids.** HFLB's GQA tasks are subsets 10-13, 20-23 and 30-33 of one dataset
  (`GQA-21` is `GQA/…/dataset-21.json`), not datasets `GQA-1`.., which a split at the first
  dash would suggest. The tar names of HFLB follow DRAKE's one-tar-per-dataset convention;
  `--source-dir` reads an unpacked copy if the repo differs.
- **Sizes.** The release caps tasks at 10k train / 2k test, then subsamples some tests to about
  1k and some trains to 4k-8k. The suite applies the caps again and keeps what the files hold.
- **Option wording varies** (`Choice list:[...]`, `Choice List: [...]`, `|` separators,
  lettered options, `Image A:` options, answer ids). The reference evaluation parses them with
  prompt-specific heuristics; the suite parses them once at build time and stores `choices`.
- **Client numbering.** The released scenario files number the clients differently from the
  paper's Tab. 23. The table above gives the Tab. 23 number of each released client. The suite
  follows the released files.
- **Model mix.** The paper's heterogeneous setup puts Tab. 23 clients 1–4 on Llama-3.2-1B. The
  released `DRAKE_hetero_llava_llama_1B_3B` puts released clients 0, 1, 8 and 9 on 1B, which
  are Tab. 23 clients 1, 5, 3 and 4. So Tab. 23 client 5 is 1B and client 2 is 3B in the release,
  the reverse of the paper. The count (4 small, 6 large) matches. The suite follows the release.
- **Task order.** Within a client, the released order differs from Tab. 23. The dynamic stream
  uses the released order.
- **Multiple-choice scoring** in the reference code parses options from the prompt wording. The
  suite scores with `evaluators.match_choice`, which documents its rules. Unparseable outputs
  count as wrong.
- **Public alignment set.** FedMosaic aligns the PQ-LoRA `A`/`B` of different architectures on
  "a subset of the models' pre-training data"; the public code takes 5,000 shuffled samples of
  LLaVA-1.5's `llava_v1_5_mix665k`, whose images are spread over several image sets and are
  not on the Hub as one dataset. DRAKE and HFLB declare `llava-recap-558k-public` instead:
  LLaVA's stage-1 pre-training images (LCS-558K) with their ReCap captions, from
  `lmms-lab/LLaVA-ReCap-558K`. Only the first of its 26 parquet shards is downloaded (about
  550 MB, some 21,000 rows); a seeded 99/1 split of it, then a seeded 5,000 train rows (200
  test rows). It belongs to no client and no unseen task. Heterogeneous FedMosaic on a build
  without it is an error, never a silent run with unaligned `A`/`B`.

## drake-synth

drake-synth mirrors DRAKE client by client. Each twin task sits at the client position of the
real task it mirrors (`twin of`). It keeps that task's number of images, the placement of its
`<image>` tokens and its answer format (choice-list style, True/False, letters, Image A–D,
answer ids 1–5, open-ended). The pixels and semantics are synthetic: PIL scenes of shapes with
colours, sizes, fills and positions, on several visual domains. One domain is held out for the
unseen-domain tasks. Relation, reasoning and VQA twins share primitives within their subgroup,
so task similarity is real. The tiny models `tiny-llava-llama` (Llama, hidden 128, 4 layers)
and `tiny-llava-qwen` (Qwen2, hidden 160, 3 layers) stand in for the 1B and 3B LLaVA models.
Both read pictures through one Swin vision tower whose last stage is the scenes' 3 x 3 grid
(9 image tokens per picture) and put the question's text before the pictures. They are
pretrained in two stages on the public split only (`synth-public-open`, `synth-public-multi`,
`synth-public-formats`: generic questions about colours, shapes, places, counts, quality, bars
and tags that no client task asks, the last in the client tasks' answer formats): the tower on
what the generator drew, then projector and language model on the answers, with image tokens
grounded in the words that name their cell's object. The suite ships the result (`drake/models/weights/`, sha256-pinned);
`drake models pretrain` rebuilds it. drake-synth is an engineering stand-in: numbers on it show
that a method runs and how it compares at small scale. They are not DRAKE results.

How much signal a drake-synth task carries at this scale is measured, not assumed: the table
*drake-synth learnability (measured)* above trains a fresh LoRA on one task at a time and scores
held-out samples. A task that stays at chance there cannot separate methods by what they learn;
differences on it reflect answer-format learning and noise. Read method comparisons on
drake-synth against that table.

Sizes are presets (`--size tiny|small|medium|large`; default `small`).

## Licences and citation

drake-synth is generated by this suite (Apache-2.0). Each real task keeps the licence of its
source dataset (table *Sources* above): licences marked *(Hub card)* were read from the upstream
dataset card; the DRAKE and HFLB releases state none for the others, so check the upstream terms
before redistributing a build. The suite ships no real data. Cite the FedMosaic paper for DRAKE
and HFLB, and the source datasets of the tasks you use:

```bibtex
@inproceedings{seo2026colora,
  title     = {Co-LoRA: Collaborative Model Personalization on Heterogeneous Multi-Modal Clients},
  author    = {Seo, Minhyuk and Kim, Taeheon and Lee, Hankook and Choi, Jonghyun and
               Tuytelaars, Tinne},
  booktitle = {The Fourteenth International Conference on Learning Representations (ICLR)},
  year      = {2026},
  url       = {https://openreview.net/forum?id=0g5Dk4Qfh0}
}
```
"""


def sources_table() -> str:
    """One row per source dataset of DRAKE and HFLB: tar, upstream, licence, tasks."""
    from drake.catalog.drake import DRAKE_SOURCES
    from drake.registry import get_benchmark

    tasks: dict[str, list[str]] = {}
    repo: dict[str, str] = {}
    for name in ("drake", "hflb"):
        for t in get_benchmark(name).tasks:
            if "dataset" not in t.source_args:  # the public alignment set is no tar
                continue
            tasks.setdefault(t.source_args["dataset"], []).append(t.id)
            repo[t.source_args["dataset"]] = t.source_args["repo"]
    rows = ["| dataset | file | upstream | licence | tasks |", "|---|---|---|---|---|"]
    for dataset, (upstream, licence) in DRAKE_SOURCES.items():
        rows.append(f"| {dataset} | {repo[dataset]} `{dataset}.tar` | {upstream} | {licence} | "
                    f"{', '.join(tasks[dataset])} |")
    return "\n".join(rows)


def project_card() -> str:
    """The project's DATASET_CARD.md: prose plus tables rendered from the registry."""
    from drake.catalog.drake import TAB23_CLIENT
    from drake.registry import get_benchmark, list_benchmarks

    drake_spec = get_benchmark("drake")
    synth = get_benchmark("drake-synth")
    hflb = get_benchmark("hflb")
    tab23 = ["| released client | Tab. 23 client |", "|---|---|"] + [
        f"| {i} | {n} |" for i, n in enumerate(TAB23_CLIENT)]
    mixes = ["| model mix | models (client 0..9) |", "|---|---|"] + [
        f"| {k} | {', '.join(m.split('/')[-1] for m in v)} |"
        for k, v in drake_spec.model_mixes.items()]
    others = ["| benchmark | protocol | tasks | source |", "|---|---|---|---|"] + [
        f"| {b.name} | {b.protocol} | {', '.join(t.id for t in b.tasks)} | {b.source_note} |"
        for b in list_benchmarks() if b.name not in ("drake", "hflb", "drake-synth")]
    header = _yaml_header(drake_spec, None, pretty_name="DRAKE", extra=(
        "license_details: each task keeps the licence of its source dataset (see Sources)",
        "language:", "- en", "size_categories:", "- 100K<n<1M", "tags:",
        "- federated-learning", "- personalization", "- multi-image", "- benchmark"))
    parts = [
        header, PROJECT_PROSE_HEAD,
        "## DRAKE tasks (generated)",
        "Client = released client index; caps are the maximum rows kept per split.",
        source_task_table(drake_spec),
        "## DRAKE clients, released hetero Llama 1B/3B scenario (generated)",
        client_table(drake_spec), "\n".join(tab23),
        "## DRAKE model mixes (generated)", "\n".join(mixes),
        "## HFLB (generated)", source_task_table(hflb), client_table(hflb),
        "## Sources (generated)", sources_table(),
        "## drake-synth tasks (generated)", task_table(synth),
        "## drake-synth clients (generated)", client_table(synth),
        "## drake-synth learnability (measured)", calibration_table(synth), SYNTH_FORMATS_PROSE,
        "## Knowledge sharing on drake-synth (measured)", transfer_table(synth), TRANSFER_PROSE,
        "## synth-cls on tiny-clip (measured)", clip_calibration_table(),
        "## Other benchmarks (generated)", "\n".join(others),
        PROJECT_PROSE_TAIL,
    ]
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(project_card())
