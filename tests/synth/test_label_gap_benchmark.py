"""benchmarks/label_gap.py: the label chain's links, read in stage 4's forward pass."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("label_gap")


def test_chain_hand_computed(bench) -> None:
    # the head attends most to option 1 (the gold) but its output names option 0's label
    assert bench.chain([0.1, 0.6, 0.3], [2.0, 1.0, 0.5], 1) == {
        "mass": 0.6, "pointer": 1.0, "readout": 0.0}
    assert bench.chain([0.5, 0.2], [0.0, 3.0], 1) == {"mass": 0.2, "pointer": 0.0, "readout": 1.0}


def test_questions_are_held_out_lettered_lookups(bench) -> None:
    from drake.models.label_pretrain import named_cells
    from drake.models.pretrain import LOOKUP_FAMILIES, public_samples

    questions = bench.label_questions(200, 0)
    assert questions and questions == bench.label_questions(200, 0)
    drawn = public_samples("synth-public-formats", "test", 200, 0)
    ids = [s["id"] for s in drawn]
    assert [s["id"] for s in questions] == [i for i in ids if i in {q["id"] for q in questions}]
    for sample in questions:
        meta = json.loads(sample["meta"])
        assert meta["format"] in ("letter", "id") and meta["family"] in LOOKUP_FAMILIES
        assert named_cells(sample, formats=True)


def test_measure_reconciles_with_greedy_answers(bench) -> None:
    from drake.models import load_model

    bundle = load_model("tiny-llava-qwen")
    attention = bundle.model.config._attn_implementation
    samples = bench.label_questions(200, 0)[:10]
    links = bench.read_heads(bundle, samples)
    assert len(links) == len(samples)
    for link in links:
        assert link is not None and 0.0 <= link["mass"] <= 1.0 and link["options"] >= 2
    held = bench.read_heads(bundle, samples[:3], states=True)
    for link, sample, plain in zip(held, samples, links):
        assert {k: link[k] for k in plain} == plain  # the states change nothing else
        assert link["answer_state"].shape == (160,)  # tiny-llava-qwen's width
        assert len(link["option_states"]) == len(link["option_texts"]) == link["options"]
        gold_line = f"\n{sample['answer']}. {link['option_texts'][link['gold']]}\n"
        assert gold_line in sample["prompt"] + "\n", (gold_line, sample["prompt"])
    result = bench.measure(bundle, samples)
    families = result["families"]
    assert result["unlabelled"] == 0
    assert sum(r["questions"] for f, r in families.items() if f != "all") == len(samples)
    answers = bundle.generate(samples, max_new_tokens=3, batch_size=32)
    right = sum(a.strip() == s["answer"] for a, s in zip(answers, samples))
    assert families["all"]["answer"] == pytest.approx(right / len(samples))
    assert families["all"]["pointer"] == pytest.approx(
        sum(link["pointer"] for link in links) / len(links))
    assert bundle.model.config._attn_implementation == attention  # restored after reading
    assert not any(p.requires_grad for p in bundle.model.parameters())
    assert "| all | 10 |" in bench.table(result)


def test_main_writes_the_table_and_json(bench, tmp_path, capsys) -> None:
    out = tmp_path / "gap.json"
    assert bench.main(["--samples", "120", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["label_head"] == [2, 0] and result["model"] == "tiny-llava-qwen"
    questions = len(bench.label_questions(120, 0))
    assert result["families"]["all"]["questions"] + result["unlabelled"] == questions
    assert f"{questions} held-out lettered or numbered" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--samples", "0"])
    with pytest.raises(SystemExit):
        bench.main(["--model", "tiny-clip"])
    assert "has no label head" in capsys.readouterr().err


def test_value_probes_read_separable_values(bench) -> None:
    import torch

    texts = ["red", "blue", "green", "pink"]
    rng = torch.Generator().manual_seed(0)
    samples, links = [], []
    for i in range(60):  # one family with the values written plainly in the states
        options = [texts[(i + k) % 4] for k in range(3)]
        gold = i % 3
        state = {t: torch.nn.functional.one_hot(torch.tensor(j), 4).float() * 5 for j, t in
                 enumerate(texts)}
        samples.append({"meta": json.dumps({"family": "colour"})})
        links.append({"answer_state": state[options[gold]] + 0.1 * torch.randn(4, generator=rng),
                      "gold": gold, "option_texts": options,
                      "option_states": [state[t] for t in options]})
    samples += [{"meta": json.dumps({"family": "shape"})}] * 10  # under min_questions: skipped
    links += [links[0]] * 10
    samples.append({"meta": json.dumps({"family": "colour"})})
    links.append(None)  # no gold line: left out
    probes = bench.value_probes(samples, links)
    assert set(probes) == {"colour"}
    assert probes["colour"]["questions"] == 60 and probes["colour"]["values"] == 4
    assert probes["colour"]["answer"] == 1.0 and probes["colour"]["options"] == 1.0
    noise = [dict(link, answer_state=torch.randn(4, generator=rng)) for link in links[:60]]
    assert bench.value_probes(samples[:60], noise)["colour"]["answer"] < 0.6
