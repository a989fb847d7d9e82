"""The local runtime end to end on drake-synth (tiny size, untrained tiny models)."""

import json
import shutil
from abc import abstractmethod
from pathlib import Path

import pytest
import torch

from baselines.base import Method, Payload, register
from drake.build import build
from drake.cli import main
from drake.errors import DrakeError
from drake.registry import get_benchmark
from drake.runtime import LocalRuntime, RunConfig
from drake.runtime.local import ClientFailed, Hook


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("d"), seed=1)


def config(data, out, method="fedavg", **kw):
    base = dict(data=str(data), scenario="dynamic", method=method, out=str(out), seed=0,
                rounds=3, local_steps=2, batch_size=2, eval_per_task=1, pretrained=False,
                mc_scoring="loglik")
    base.update(kw)
    return RunConfig(**base)


def comparable(results):
    out = dict(results)
    for key in ("created_at",):
        out.pop(key)
    out["cost"] = {k: v for k, v in results["cost"].items()
                   if k not in ("wall_time_s", "peak_rss_mb")}
    return out


@pytest.fixture(scope="module")
def unbroken(data, tmp_path_factory):
    return LocalRuntime(config(data, tmp_path_factory.mktemp("r") / "run")).run()


def test_results_file_is_complete(unbroken):
    from leaderboard.run_result import RunResult

    RunResult.model_validate(unbroken)
    assert unbroken["curves"]["rounds"] == [1, 2, 3]
    assert len(unbroken["models_per_client"]) == 10
    assert unbroken["models_per_client"][0] == "tiny-llava-llama"
    assert unbroken["models_per_client"][2] == "tiny-llava-qwen"
    assert all(b > 0 for b in unbroken["cost"]["comm_bytes_up_per_round"][1:])
    point = unbroken["curves"]["scores"][-1]
    assert len(point) == 10 and all(len(c) == 40 for c in point)


def test_killed_run_resumes_to_the_same_results(data, tmp_path, unbroken):
    out = tmp_path / "run"
    with pytest.raises(DrakeError, match="stopped after round 0"):
        LocalRuntime(config(data, out)).run(_stop_after=0)
    assert (out / "checkpoint" / "state.safetensors").exists()
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1
    resumed = LocalRuntime(config(data, out)).run()
    assert comparable(resumed) == comparable(unbroken)
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 3


def test_sft_uploads_nothing_and_differs_from_fedavg(data, tmp_path, unbroken):
    res = LocalRuntime(config(data, tmp_path / "sft", method="sft")).run()
    assert res["cost"]["comm_bytes_up_per_round"] == [0, 0, 0]
    assert res["curves"]["scores"] != unbroken["curves"]["scores"]


@register
class Flaky(Method):
    """Raises on client 3: for the client-error tests."""

    name = "test-flaky"

    def local_train(self, client):
        if client.id == 3:
            raise RuntimeError("boom")
        return Payload(meta={"loss": self.train_adapter(client, "local", client.steps)})

    def aggregate(self, uploads, clients, round):
        return {}


def test_client_error_stops_by_default_and_skips_on_request(data, tmp_path):
    with pytest.raises(ClientFailed, match="client 3 raised RuntimeError"):
        LocalRuntime(config(data, tmp_path / "a", method="test-flaky", rounds=1)).run()
    res = LocalRuntime(config(data, tmp_path / "b", method="test-flaky", rounds=1,
                              on_client_error="skip")).run()
    errors = json.loads((tmp_path / "b" / "errors.json").read_text())["client_errors"]
    assert [(e["client"], e["round"]) for e in errors] == [(3, 0)]
    assert res["metrics"]["self_a_last"] >= 0


def test_bad_input_gives_one_line_errors(data, tmp_path, capsys):
    cases = [
        (["eval", "--method", "nope", "--data", str(data)], "unknown method 'nope'"),
        (["eval", "--method", "fedavg", "--data", str(tmp_path)], "no built benchmark"),
        (["eval", "--method", "fedavg", "--data", str(data), "--scenario", "alpha9"],
         "drake partition"),
    ]
    for argv, fragment in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0], err
    broken = shutil.copytree(data, tmp_path / "broken")
    next((broken / "tasks").rglob("*.parquet")).write_bytes(b"x")
    assert main(["eval", "--method", "fedavg", "--data", str(broken)]) == 2
    assert "fails `drake verify`" in capsys.readouterr().err
    # a model mix the benchmark does not declare (it has only the protocol default) is refused
    cls = build(get_benchmark("synth-caption", size="tiny"), tmp_path / "cap", seed=0)
    assert main(["eval", "--method", "fedavg", "--data", str(cls), "--scenario",
                 "quantity-skew", "--model-mix", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no model mix 'nope'" in err[0], err


def test_three_seeds_of_drake_eval_submit_and_rank(data, tmp_path, capsys):
    """The reproduced path of the leaderboard: real results.json files from `drake eval`."""
    board = tmp_path / "leaderboard.json"
    shutil.copy(Path(__file__).resolve().parents[2] / "leaderboard" / "leaderboard.json", board)
    runs = []
    for seed in (0, 1, 2):
        out = tmp_path / f"s{seed}"
        assert main(["eval", "--method", "fedavg", "--data", str(data.parent), "--benchmark",
                     data.name, "--rounds", "1", "--local-steps", "1", "--batch-size", "2",
                     "--eval-per-task", "1", "--untrained", "--mc-scoring", "loglik",
                     "--seed", str(seed), "--out", str(out)]) == 0
        runs.append(out)
    capsys.readouterr()
    rc = main(["leaderboard", "submit", str(runs[0]), "--seeds", str(runs[1]), str(runs[2]),
               "--leaderboard", str(board), "--data", str(data), "--submitter", "ci",
               "--link", "https://example.org/drake"])
    assert rc == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["leaderboard", "show", "--benchmark", "drake-synth", "--leaderboard",
                 str(board), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    text = json.dumps(shown)
    assert "fedavg" in text and "reproduced" in text


def test_initial_evaluation_is_logged_and_kept_out_of_the_curves(data, tmp_path, unbroken):
    out = tmp_path / "run"
    with pytest.raises(DrakeError, match="stopped after round 0"):
        LocalRuntime(config(data, out, eval_initial=True)).run(_stop_after=0)
    res = LocalRuntime(config(data, out, eval_initial=True)).run()
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [p["round"] for p in lines] == [0, 1, 2, 3]
    assert lines[0]["initial"] is True and len(lines[0]["scores"]) == 10
    # the untrained reference averages every task (like A_last), the curve's points only the
    # started ones
    assert "started" not in lines[0] and len(lines[1]["started"]["0"]) < 4
    # the extra evaluation changes neither training nor the reported curves
    assert res["curves"] == unbroken["curves"] and res["metrics"] == unbroken["metrics"]


class _Oracle(Method):
    """No model: answers a sample right exactly when ``right_task(client)`` is its task."""

    @abstractmethod
    def right_task(self, client) -> str:
        """The task whose samples ``client`` answers right."""

    def local_train(self, client):
        return Payload()

    def aggregate(self, uploads, clients, round):
        return {}

    def predict(self, client, samples, answer):
        out = []
        for s in samples:
            right = s["task"] == self.right_task(client)
            if s["choices"]:
                idx = s["choices"].index(s["answer"])
                out.append(idx if right else (idx + 1) % len(s["choices"]))
            else:
                out.append(s["answer"] if right else "")
        return out


@register
class FirstTaskOracle(_Oracle):
    """Answers a sample right exactly when it belongs to the client's first task."""

    name = "test-first-task"
    first: dict[int, str] = {}

    def right_task(self, client) -> str:
        return self.first[client.id]


@pytest.mark.parametrize("eval_tasks", ["started", "all"])
def test_self_scores_only_started_tasks_and_a_auc_is_hand_computed(data, tmp_path, eval_tasks):
    """drake-synth tiny, dynamic: 4 tasks per client, 5 of 20 stream rounds each, so with 4
    runtime rounds task k arrives in round k. Every client answers only its first task right.
    Over started tasks Self is 100/k after round k (100, 50, 33.3, 25); over all tasks it
    would be 25 throughout. Others never contains a client's first task: 0."""
    runtime = LocalRuntime(config(data, tmp_path / eval_tasks, method="test-first-task",
                                  rounds=4, local_steps=1, eval_tasks=eval_tasks))
    FirstTaskOracle.first = {c: t[0] for c, t in enumerate(runtime.data.client_tasks)}
    res = runtime.run()
    if eval_tasks == "started":
        assert res["curves"]["self"] == pytest.approx([100.0, 50.0, 100 / 3, 25.0])
        # (1/3) * ((100+50)/2 + (50+33.33)/2 + (33.33+25)/2) over rounds 1..4
        assert res["metrics"]["self_a_auc"] == pytest.approx(48.61111, abs=1e-4)
        lines = [json.loads(x) for x in (tmp_path / eval_tasks / "metrics.jsonl")
                 .read_text().splitlines()]
        assert [len(p["started"]["0"]) for p in lines] == [1, 2, 3, 4]
    else:
        assert res["curves"]["self"] == pytest.approx([25.0] * 4)
        assert res["metrics"]["self_a_auc"] == pytest.approx(25.0)
    assert res["curves"]["others"] == pytest.approx([0.0] * 4)
    assert res["scoring"]["eval_tasks"] == eval_tasks


@register
class PostFLOracle(FirstTaskOracle):
    """After federated training, its post-FL stage makes every client answer everything right."""

    name = "test-post-fl"

    def post_fl(self, client):
        if client.id == 0 and self.crash_once:
            type(self).crash_once = False
            raise RuntimeError("crash in post-FL")
        client.state["post_fl_done"] = torch.ones(1)

    def predict(self, client, samples, answer):
        if "post_fl_done" in client.state:
            return [s["choices"].index(s["answer"]) if s["choices"] else s["answer"]
                    for s in samples]
        return super().predict(client, samples, answer)


def test_post_fl_runs_once_after_the_last_round_and_gives_the_last_point(data, tmp_path):
    cfg = config(data, tmp_path / "run", method="test-post-fl", rounds=4, local_steps=1)
    first = LocalRuntime(cfg)
    FirstTaskOracle.first = {c: t[0] for c, t in enumerate(first.data.client_tasks)}
    PostFLOracle.crash_once = True
    with pytest.raises(ClientFailed, match="post-FL stage"):
        first.run()
    res = LocalRuntime(cfg).run()  # resumes after round 3: only the post-FL stage is left
    assert res["curves"]["self"] == pytest.approx([100.0, 50.0, 100 / 3, 100.0])
    assert res["curves"]["others"][-1] == pytest.approx(100.0)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text()
             .splitlines()]
    assert [p["round"] for p in lines] == [1, 2, 3, 4] and lines[-1]["post_fl"] is True
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())
    assert state["post_fl"] is True and state["round"] == 3


class CountRounds(Hook):
    def __init__(self):
        self.seen = []

    def on_round_end(self, runtime, st, r):
        self.seen.append((r, len(st.history)))


def test_extra_hooks_see_every_round_after_the_built_in_ones(data, tmp_path):
    hook = CountRounds()
    LocalRuntime(config(data, tmp_path / "h", method="sft", rounds=2, local_steps=1,
                        eval_every=2), hooks=[hook]).run()
    assert hook.seen == [(0, 0), (1, 1)]


def test_tasks_are_scored_by_the_metric_their_spec_lists(data, tmp_path):
    runtime = LocalRuntime(config(data, tmp_path / "m", method="sft", rounds=1))
    open_task = next(t for t, m in runtime.task_metrics.items() if m == ("token_f1",))
    mc_task = next(t for t, m in runtime.task_metrics.items() if m == ("accuracy",))
    samples = [{"answer": "two red circles", "choices": []}, {"answer": "one", "choices": []}]
    preds = ["two red squares", "one"]
    assert runtime._score(open_task, samples, preds) == pytest.approx((200 / 3 + 100) / 2)
    runtime.task_metrics[open_task] = ("exact_match",)
    assert runtime._score(open_task, samples, preds) == pytest.approx(50.0)
    mc = [{"answer": "b", "choices": ["a", "b"]}, {"answer": "a", "choices": ["a", "b"]}]
    assert runtime._score(mc_task, mc, [1, None]) == pytest.approx(50.0)
    from evaluators import MetricInputError

    with pytest.raises(MetricInputError, match="not an option index"):
        runtime._score(mc_task, mc, [1, 5])


def test_a_changed_or_truncated_checkpoint_is_refused_and_a_cut_save_recovers(data, tmp_path,
                                                                              unbroken):
    out = tmp_path / "run"
    with pytest.raises(DrakeError, match="stopped after round 0"):
        LocalRuntime(config(data, out)).run(_stop_after=0)
    ckpt = out / "checkpoint"
    pristine = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    state = json.loads(pristine["state.json"])
    (ckpt / "state.json").write_text(json.dumps({**state, "round": 1}, sort_keys=True))
    with pytest.raises(DrakeError, match="damaged or was changed.*state.json"):
        LocalRuntime(config(data, out)).run()
    (ckpt / "state.json").write_bytes(pristine["state.json"])
    (ckpt / "state.safetensors").write_bytes(pristine["state.safetensors"][:100])
    with pytest.raises(DrakeError, match="damaged or was changed.*state.safetensors"):
        LocalRuntime(config(data, out)).run()
    # a save cut between its two renames leaves only checkpoint.old: the run resumes from it
    (ckpt / "state.safetensors").write_bytes(pristine["state.safetensors"])
    ckpt.rename(out / "checkpoint.old")
    resumed = LocalRuntime(config(data, out)).run()
    assert comparable(resumed) == comparable(unbroken)


def test_arguments_out_of_range_and_unknown_hyper_parameters_are_refused(data, tmp_path,
                                                                         capsys):
    for flag, value, fragment in [("--rounds", "0", "rounds must be >= 1"),
                                  ("--rounds", "-2", "rounds must be >= 1"),
                                  ("--eval-per-task", "0", "eval_per_task must be >= 1"),
                                  ("--lr", "0", "lr must be > 0"),
                                  ("--hp", "muu=0.5", "no hyper-parameter 'muu'; its --hp keys "
                                   "are: mu")]:
        out = tmp_path / f"o{flag}{value}"
        argv = ["eval", "--method", "fedprox", "--data", str(data), "--untrained", flag, value,
                "--out", str(out)]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0], err
        assert not (out / "config.json").exists()  # nothing left to block a corrected rerun


def test_the_git_hash_is_read_when_the_run_starts(data, tmp_path, monkeypatch):
    """A commit made while a run goes on must not relabel the code the run imported: the
    runtime reads HEAD when it is built, and results carry that value."""
    from types import SimpleNamespace

    from drake.runtime import results

    heads = iter(["a" * 40, "b" * 40])
    monkeypatch.setattr(results.subprocess, "run", lambda *a, **k: SimpleNamespace(
        returncode=0, stdout=next(heads)))
    results._git_hash.cache_clear()
    try:
        LocalRuntime(config(data, tmp_path / "r"))  # reads "a…"
        assert results._git_hash() == "a" * 40  # a later read (at the results) still says "a…"
    finally:
        results._git_hash.cache_clear()


@register
class UnseenOracle(_Oracle):
    """Client c answers right exactly the samples of unseen task ``c % 7``."""

    name = "test-unseen-oracle"
    unseen: list[str] = []

    def right_task(self, client) -> str:
        return self.unseen[client.id % len(self.unseen)]


def test_unseen_tasks_are_scored_after_the_last_round_by_hand(data, tmp_path):
    spec = get_benchmark("drake-synth", size="tiny")
    UnseenOracle.unseen = list(spec.unseen_tasks)
    assert len(UnseenOracle.unseen) == 7
    res = LocalRuntime(config(data, tmp_path / "u", method="test-unseen-oracle",
                              eval_unseen=True)).run()
    # client c scores 100 on unseen task c % 7 and 0 on the six others
    expected = [{t: (100.0 if i == c % 7 else 0.0) for i, t in enumerate(spec.unseen_tasks)}
                for c in range(10)]
    assert res["unseen"] == expected
    assert res["metrics"]["unseen_a_last"] == pytest.approx(100 / 7)
    # the clients' own tasks are untouched by it, and the file validates
    from leaderboard.run_result import RunResult

    RunResult.model_validate(res)
    assert set(res["metrics"]) == {"self_a_last", "self_a_auc", "others_a_last",
                                   "others_a_auc", "unseen_a_last"}
    # the run itself is the same with or without it
    plain = LocalRuntime(config(data, tmp_path / "p", method="test-unseen-oracle")).run()
    assert "unseen" not in plain and plain["curves"] == res["curves"]
    assert plain["metrics"] == {k: v for k, v in res["metrics"].items() if k != "unseen_a_last"}


def test_unseen_scoring_needs_unseen_tasks(data, tmp_path):
    from drake.build import restrict_spec

    spec = restrict_spec(get_benchmark("drake-synth", size="tiny"),
                         ["synth-spatial", "synth-quad-colour", "synth-dish-name"])
    folder = build(spec, tmp_path / "s", seed=3)
    with pytest.raises(DrakeError, match="holds no unseen tasks of drake-synth"):
        LocalRuntime(config(folder, tmp_path / "v", scenario="static", eval_unseen=True))
