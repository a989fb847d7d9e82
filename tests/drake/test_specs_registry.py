import pytest

from drake.catalog.drake import DRAKE_CLIENTS, TAB23_CLIENT
from drake.errors import SchemaError, UnknownNameError
from drake.registry import benchmark_names, get_benchmark
from drake.specs import BenchmarkSpec, ClientSpec, TaskSpec


def test_drake_has_40_client_tasks_and_7_unseen():
    spec = get_benchmark("drake")
    assert len(spec.clients) == 10 and all(len(c.tasks) == 4 for c in spec.clients)
    client_tasks = [t for c in spec.clients for t in c.tasks]
    assert len(set(client_tasks)) == 40
    assert len(spec.unseen_tasks) == 7 and not set(spec.unseen_tasks) & set(client_tasks)
    assert spec.clients[0].tasks == ("Fashion200K-0", "MagicBrush-0", "VISION-0", "FashionIQ-0")
    assert spec.clients[6].tasks[1] == "iconqa-2"
    assert spec.task("iconqa-2").answer_type == "open_ended"
    assert spec.task("iconqa-3").metrics == ("token_f1",)
    # 19 source datasets behind the 40 client tasks.
    assert len({spec.task(t).source_args["dataset"] for t in client_tasks}) == 19


def test_drake_model_mixes_follow_the_released_scenarios():
    spec = get_benchmark("drake")
    hetero = spec.models()
    small = [i for i, m in enumerate(hetero) if m.endswith("1B_vl")]
    assert small == [0, 1, 8, 9] and hetero.count("thkim0305/llama3.2_3B_vl") == 6
    assert spec.models("hetero-llama-1b-3b-8b")[6] == "thkim0305/llama3.1_8B_vl"
    assert set(spec.models("homo-qwen-3b")) == {"thkim0305/qwen2.5_3B_vl"}
    # DRAKE_hetero_llava_llama_3B_qwen_1_5B: Qwen-1.5B on released clients 0, 1, 2 and 4
    q15 = [i for i, m in enumerate(spec.models("hetero-llama-3b-qwen-1.5b")) if "qwen" in m]
    assert q15 == [0, 1, 2, 4]
    both = spec.models("hetero-llama-3b-qwen-1.5b-3b")
    assert [i for i, m in enumerate(both) if m.endswith("qwen2.5_3B_vl")] == [3, 5, 7]
    assert len(spec.model_mixes) == 12
    with pytest.raises(UnknownNameError, match="no model mix"):
        spec.models("nope")


def test_tab23_mapping_is_a_permutation():
    assert sorted(TAB23_CLIENT) == list(range(1, 11)) and len(DRAKE_CLIENTS) == 10


def test_hflb_is_9_by_4():
    spec = get_benchmark("hflb")
    assert len(spec.clients) == 9 and all(len(c.tasks) == 4 for c in spec.clients)
    assert spec.clients[2].tasks == ("GQA-30", "GQA-31", "GQA-32", "GQA-33")


def test_every_mission_benchmark_is_registered():
    names = set(benchmark_names())
    expected = {"drake", "hflb", "domainnet", "office-caltech10", "cifar10-dir", "cifar100-dir",
                "tap", "fedilora", "drake-synth", "synth-cls", "synth-caption"}
    expected |= {f"clip-base2novel/{d}" for d in
                 ("oxford_pets", "flowers102", "dtd", "caltech101", "food101", "sun397", "ucf101")}
    assert expected <= names
    for name in names:
        spec = get_benchmark(name)
        assert spec.name == name and spec.version and len(spec.fingerprint()) == 64


def test_unknown_names_are_clear():
    with pytest.raises(UnknownNameError, match="drake benchmarks"):
        get_benchmark("drak")
    with pytest.raises(UnknownNameError, match="synthetic benchmarks only"):
        get_benchmark("drake", size="tiny")
    with pytest.raises(UnknownNameError, match="unknown size"):
        get_benchmark("drake-synth", size="huge")


def test_spec_validation():
    t = TaskSpec("a", "synth", "g", "multiple_choice", ("accuracy",), "d")
    with pytest.raises(SchemaError, match="unknown tasks"):
        BenchmarkSpec("b", "1", "d", "self_others", (t,), clients=(ClientSpec(0, ("z",)),))
    with pytest.raises(SchemaError, match="repeat"):
        BenchmarkSpec("b", "1", "d", "self_others", (t, t))
    with pytest.raises(SchemaError, match="protocol"):
        BenchmarkSpec("b", "1", "d", "bogus", (t,))
    with pytest.raises(SchemaError, match="answer_type"):
        TaskSpec("a", "synth", "g", "mcq", ("accuracy",), "d")
    with pytest.raises(SchemaError, match="without '/'"):
        TaskSpec("a/b", "synth", "g", "multiple_choice", ("accuracy",), "d")


def test_a_scenario_protocol_is_checked_and_left_out_of_the_dict_when_empty():
    from drake.specs import ScenarioSpec

    assert "protocol" not in ScenarioSpec("s", "iid").to_dict()
    assert ScenarioSpec("s", "iid", protocol="base_novel").to_dict()["protocol"] == "base_novel"
    with pytest.raises(SchemaError, match="protocol 'bogus'"):
        ScenarioSpec("s", "iid", protocol="bogus")


def test_expected_counts_are_checked_and_left_out_of_the_spec_when_unset():
    from dataclasses import replace

    from drake.errors import SchemaError
    from drake.registry import get_benchmark

    task = get_benchmark("drake").task("VSR-0")
    assert "expected" not in task.to_dict()
    assert replace(task, expected={"test": 1000}).to_dict()["expected"] == {"test": 1000}
    for bad in ({"val": 3}, {"test": 0}, {"train": 2.5}, {"train": True}):
        with pytest.raises(SchemaError, match="expected counts"):
            replace(task, expected=bad)
