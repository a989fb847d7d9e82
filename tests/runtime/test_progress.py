"""The runtime's progress lines: per client within a round (throttled), per round with its time,
and the hook events a real run sends."""

from types import SimpleNamespace

import pytest

from drake.build import build
from drake.registry import get_benchmark
from drake.runtime import LocalRuntime, RunConfig
from drake.runtime.local import RunState
from drake.runtime.progress import RoundProgress


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_within_and_at_the_end_of_rounds():
    clock, said = FakeClock(), []
    hook = RoundProgress(said.append, "sft ", every=10, clock=clock)
    runtime = SimpleNamespace(rounds=4)
    st = RunState({}, {})
    for c in range(1, 11):  # scoring the untrained models: 2 s per client
        clock.now += 2
        hook.on_client_end(runtime, "initial", 0, c, 10)
    for r in range(2):
        for c in range(1, 11):
            clock.now += 3
            hook.on_client_end(runtime, "train", r, c, 10)
        if r == 1:  # an evaluation round: 4 s per client
            for c in range(1, 11):
                clock.now += 4
                hook.on_client_end(runtime, "eval", r, c, 10)
            st.history.append({"round": 2, "self": 37.125, "others": 36.6})
        hook.on_round_end(runtime, st, r)
    assert said == [
        "sft before training: scoring, 5/10 clients (10 s elapsed)",
        "sft before training: scoring, 10/10 clients (20 s elapsed)",
        "sft round 1/4: training, 4/10 clients (32 s elapsed)",
        "sft round 1/4: training, 8/10 clients (44 s elapsed)",
        "sft round 1/4 done in 30 s (50 s elapsed)",
        "sft round 2/4: training, 4/10 clients (1 min 02 s elapsed)",
        "sft round 2/4: training, 8/10 clients (1 min 14 s elapsed)",
        "sft round 2/4: scoring, 1/10 clients (1 min 24 s elapsed)",
        "sft round 2/4: scoring, 4/10 clients (1 min 36 s elapsed)",
        "sft round 2/4: scoring, 7/10 clients (1 min 48 s elapsed)",
        "sft round 2/4: scoring, 10/10 clients (2 min 00 s elapsed)",
        "sft round 2/4 done in 1 min 10 s: Self 37.1, Others 36.6 (2 min 00 s elapsed)",
    ]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("d"), seed=1)


def test_a_run_reports_every_client_of_every_stage(data, tmp_path):
    """With no interval, a line per client: the runtime sends each stage's events in order."""
    said = []
    cfg = RunConfig(data=str(data), scenario="dynamic", method="fedavg", out=str(tmp_path / "r"),
                    rounds=2, local_steps=1, batch_size=2, eval_per_task=1, eval_every=2,
                    pretrained=False, mc_scoring="loglik", eval_initial=True)
    LocalRuntime(cfg, hooks=[RoundProgress(said.append, every=0)]).run()
    stages = [line.split(" (")[0] for line in said]
    initial = [f"before training: scoring, {c}/10 clients" for c in range(11)]
    train = [f"round {{r}}/2: training, {c}/10 clients" for c in range(11)]
    score = [f"round 2/2: scoring, {c}/10 clients" for c in range(11)]
    assert stages[:11] == initial  # 0/10 as each stage starts, then after each client
    assert stages[11:22] == [s.format(r=1) for s in train]
    assert stages[22].startswith("round 1/2 done in ")
    assert stages[23:34] == [s.format(r=2) for s in train]
    assert stages[34:45] == score
    assert stages[45].startswith("round 2/2 done in ") and ": Self " in stages[45]
    assert len(stages) == 46


def test_keepalive_repeats_the_status_while_one_step_takes_long():
    """A client slower than the interval still gets lines: the status, with its elapsed time."""
    import threading

    said, beat = [], threading.Event()

    def say(line):
        said.append(line)
        if len(said) >= 3:
            beat.set()

    hook = RoundProgress(say, "sft ", every=0.02)
    hook.on_client_end(SimpleNamespace(rounds=4), "eval", 1, 3, 10)
    with hook.keepalive():
        assert beat.wait(30)  # the block's one step: waits for the keepalive thread's lines
    after = len(said)
    assert all(line.startswith("sft round 2/4: scoring, 3/10 clients (") for line in said)
    threading.Event().wait(0.1)
    assert len(said) == after  # the thread stopped with the block


def test_status_says_set_up_then_rounds_and_rounds_time_from_their_training():
    said = []
    hook = RoundProgress(said.append, "ditto ", every=10, clock=FakeClock())
    assert hook.status() == "ditto setting up the build, the models and the method (0 s elapsed)"
    st = RunState({}, {})
    hook.lines.clock.now = 40.0  # set-up took 40 s; the round's time starts with its training
    hook.on_client_end(SimpleNamespace(rounds=2), "train", 0, 0, 10)
    hook.lines.clock.now = 52.0
    hook.on_round_end(SimpleNamespace(rounds=2), st, 0)
    assert said[-1] == "ditto round 1/2 done in 12 s (52 s elapsed)"
    assert hook.status() == "ditto round 2/2: training (52 s elapsed)"
    hook.on_round_end(SimpleNamespace(rounds=2), st, 1)
    assert hook.status() == "ditto finishing (52 s elapsed)"
