"""The Flower runtime: the same numbers as the local runtime, client failures with their
tracebacks, and a SuperLink with two SuperNodes on loopback."""

import json
import logging
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")

from drake.build import build  # noqa: E402
from drake.errors import DrakeError  # noqa: E402
from drake.registry import get_benchmark  # noqa: E402
from drake.runtime import LocalRuntime, RunConfig  # noqa: E402
from drake.runtime.flower import (  # noqa: E402
    run_deployment,
    run_simulation,
    served_clients,
    simulate,
)
from drake.runtime.local import ClientFailed  # noqa: E402
from drake.scenarios import add_scenario  # noqa: E402
from drake.specs import ScenarioSpec  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def data(micro_synth):
    """drake-synth cut to clients 0-3 (tests/conftest.py): both LLaVA families, client 3 the
    broken one, and four clients instead of ten to train and score in every run."""
    return micro_synth


@pytest.fixture(scope="module")
def two_clients(tmp_path_factory):
    """synth-cls (tiny-clip) cut iid over two clients: one per SuperNode."""
    root = build(get_benchmark("synth-cls", size="tiny"), tmp_path_factory.mktemp("c"), seed=1)
    add_scenario(root, ScenarioSpec("two", "iid", params={"num_clients": 2}), seed=1)
    return root


def config(data, out, method="fedavg", **kw):
    base = dict(data=str(data), scenario="dynamic", method=method, out=str(out), seed=0,
                rounds=2, local_steps=2, batch_size=2, eval_per_task=1, pretrained=False,
                mc_scoring="loglik")
    base.update(kw)
    return RunConfig(**base)


def same_numbers(a, b):
    assert a["metrics"] == pytest.approx(b["metrics"], abs=1e-9)
    assert a["curves"]["rounds"] == b["curves"]["rounds"]
    for pa, pb in zip(a["curves"]["scores"], b["curves"]["scores"], strict=True):
        for ca, cb in zip(pa, pb, strict=True):
            assert ca == pytest.approx(cb, abs=1e-9)
    assert a["cost"]["comm_bytes_up_per_round"] == b["cost"]["comm_bytes_up_per_round"]
    assert a["cost"]["comm_bytes_down_per_round"] == b["cost"]["comm_bytes_down_per_round"]
    assert a.get("diagnostics") == b.get("diagnostics")


@pytest.fixture
def broken_method(monkeypatch):
    """test-broken-client, registered here and in every client process."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
        str(HERE), os.environ.get("PYTHONPATH", "")])))
    monkeypatch.setenv("DRAKE_METHOD_MODULES", "flower_methods")
    return "test-broken-client"


@pytest.mark.slow
def test_simulation_gives_the_local_numbers(data, tmp_path, broken_method, caplog):
    """Hetero drake-synth (two LLaVA families, four clients), every client in its own
    ClientApp: fedavg, ditto and fedmosaic give the local runtime's numbers, and a client that
    raises is skipped on request with its traceback in errors.json and the server log. One
    simulated federation serves the four runs one after the other (Ray starts once)."""
    caplog.set_level(logging.ERROR, logger="drake.runtime")
    runs = [("fedavg", {}, {}), ("ditto", {}, {}), ("fedmosaic", {"align_samples": 8}, {}),
            (broken_method, {}, {"on_client_error": "skip"})]
    configs = {}
    for method, hparams, extra in runs:
        kw = {"method_hparams": hparams, "eval_every": 2, **extra}  # one evaluation, at the end
        configs[method] = (config(data, tmp_path / f"{method}-local", method, **kw),
                           config(data, tmp_path / f"{method}-flower", method, **kw))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flower = dict(zip(configs, simulate([f for _, f in configs.values()], cpus=2)))
    # Ray's FutureWarning on GPU-less actors is answered (drake opts in to its next default)
    assert not [w for w in caught if "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO" in str(w.message)]
    for method, (local_cfg, _) in configs.items():
        if method == broken_method:
            continue
        local = LocalRuntime(local_cfg).run()
        assert len(set(flower[method]["models_per_client"])) == 2  # the hetero mix
        same_numbers(flower[method], local)
        assert flower[method]["software"]["runtime"] == "flower"
        assert local["software"]["runtime"] == "local" and flower[method]["software"]["flwr"]
        # the run folder holds what a local run's does, but no checkpoint to resume from
        assert (tmp_path / f"{method}-flower" / "metrics.jsonl").read_text() == \
            (tmp_path / f"{method}-local" / "metrics.jsonl").read_text()
        assert not (tmp_path / f"{method}-flower" / "checkpoint").exists()
    errors = json.loads((tmp_path / f"{broken_method}-flower" / "errors.json").read_text())
    errors = errors["client_errors"]
    assert [(e["client"], e["round"]) for e in errors] == [(3, 0), (3, 1)]
    assert all("Traceback (most recent call last)" in e["traceback"]
               and "client 3 has a broken adapter" in e["traceback"] for e in errors)
    assert "client 3 has a broken adapter" in caplog.text
    assert flower[broken_method]["metrics"]["self_a_last"] >= 0


@pytest.mark.slow
def test_a_failing_client_stops_the_run_with_its_traceback(data, tmp_path, broken_method,
                                                           caplog):
    caplog.set_level(logging.ERROR, logger="drake.runtime")
    with pytest.raises(ClientFailed) as info:
        run_simulation(config(data, tmp_path / "stop", broken_method, rounds=1), cpus=2)
    text = str(info.value)
    assert "client 3 raised" in text and "--on-client-error skip" in text
    # the client's own traceback, from the process it ran in, in the error and the server log
    for where in (text, caplog.text):
        assert "Traceback (most recent call last)" in where
        assert "flower_methods.py" in where and "client 3 has a broken adapter" in where


def test_nodes_serve_the_clients_their_config_names():
    assert served_clients({"client-ids": "0, 3"}, 10) == [0, 3]
    assert served_clients({"partition-id": 1, "num-partitions": 3}, 8) == [1, 4, 7]
    assert served_clients({}, 3) == [0, 1, 2]
    with pytest.raises(DrakeError, match="client-ids names client"):
        served_clients({"client-ids": "0,12"}, 10)
    with pytest.raises(DrakeError, match="separated by commas"):
        served_clients({"client-ids": "a;b"}, 10)
    with pytest.raises(DrakeError, match="partition-id=3 is not in 0..2"):
        served_clients({"partition-id": 3, "num-partitions": 3}, 10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_supernodes_on_loopback_give_the_local_numbers(two_clients, tmp_path):
    """A SuperLink and two SuperNodes (one client each) started by the documented script,
    2 rounds of fedavg submitted through flwr run: the local runtime's numbers."""
    script = Path(__file__).resolve().parents[2] / "drake" / "runtime" / "flower_deploy.sh"
    bin_dir = Path(sys.executable).parent
    home = tmp_path / "flwr-home"
    link, nodes = _free_port(), [_free_port(), _free_port()]
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(["bash", str(script), "connect", "loopback", f"127.0.0.1:{link}"],
                   env=env, check=True, capture_output=True)
    assert 'insecure = true' in (home / "config.toml").read_text()
    logs, procs = [], []

    def start(*args):
        log = open(tmp_path / f"{args[0]}-{len(logs)}.log", "w")  # noqa: SIM115
        logs.append(log)
        procs.append(subprocess.Popen(["bash", str(script), *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT))

    start("superlink", f"127.0.0.1:{link}")
    try:
        for k, port in enumerate(nodes):
            start("supernode", f"127.0.0.1:{link}", str(k), str(two_clients), str(port))
        cfg = config(two_clients, tmp_path / "deployed", scenario="two", rounds=2,
                     eval_per_task=8, eval_every=2)
        old = {k: os.environ.get(k) for k in ("FLWR_HOME", "FLWR_TELEMETRY_ENABLED")}
        os.environ.update(FLWR_HOME=str(home), FLWR_TELEMETRY_ENABLED="0")
        try:
            deployed = run_deployment(cfg, "loopback", flwr=str(bin_dir / "flwr"))
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in logs:
            log.close()
    local = LocalRuntime(config(two_clients, tmp_path / "local", scenario="two", rounds=2,
                                eval_per_task=8, eval_every=2)).run()
    assert deployed["models_per_client"] == local["models_per_client"]
    assert deployed["models_per_client"] == ["tiny-clip", "tiny-clip"]
    same_numbers(deployed, local)
    assert deployed["software"]["runtime"] == "flower"
    assert (tmp_path / "deployed" / "flower-app" / "pyproject.toml").exists()


def test_payloads_and_client_records_survive_the_wire():
    """Messages as ArrayRecords (bfloat16 included) and a client's record in context.state,
    optimiser state and method tensors included, come back bit for bit."""
    import torch
    from flwr.app import Context, RecordDict

    from baselines.base import Payload
    from drake.runtime.client import ClientRecord
    from drake.runtime.flower import (
        _load_record,
        _slot,
        _store_record,
        payload_records,
        records_payload,
    )

    msg = Payload({"global": {"a.weight": torch.randn(3, 2),
                              "b": torch.randn(4, dtype=torch.bfloat16)},
                   "personal": {}}, {"round": 2, "note": "x"})
    back = records_payload(RecordDict(payload_records(msg, "message")), "message")
    assert back.meta == msg.meta and set(back.tensors) == {"global", "personal"}
    for key, value in msg.tensors["global"].items():
        assert back.tensors["global"][key].dtype == value.dtype
        assert torch.equal(back.tensors["global"][key], value)
    assert records_payload(RecordDict({}), "message") is None

    class Engine:
        @staticmethod
        def fresh_record(c):
            return ClientRecord(adapters={"local": {"w": torch.zeros(2)}})

    record = ClientRecord(
        adapters={"local": {"w": torch.tensor([1.5, -2.0])}},
        optim={"local": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.ones(2)}},
                         "param_groups": [{"lr": 0.002, "betas": [0.9, 0.999],
                                           "params": [0]}]}},
        state={"grad_avg": torch.arange(3.0)})
    context = Context(run_id=1, node_id=7, node_config={}, state=RecordDict(), run_config={})
    slot = _slot('{"a": 1}', 4)
    assert slot != _slot('{"a": 2}', 4)  # another run's records are never this one's
    assert torch.equal(_load_record(Engine, context, 4, slot).adapters["local"]["w"],
                       torch.zeros(2))
    _store_record(context, slot, record)
    again = _load_record(Engine, context, 4, slot)
    assert torch.equal(again.adapters["local"]["w"], record.adapters["local"]["w"])
    assert torch.equal(again.state["grad_avg"], record.state["grad_avg"])
    step = again.optim["local"]["state"][0]
    assert torch.equal(step["step"], torch.tensor(3.0))
    assert torch.equal(step["exp_avg"], torch.ones(2))
    assert again.optim["local"]["param_groups"] == record.optim["local"]["param_groups"]


def test_cli_flower_flags_fail_fast(data, capsys):
    from drake.cli import main

    argv = ["eval", "--method", "fedavg", "--data", str(data), "--untrained"]
    assert main([*argv, "--supernodes", "2"]) == 2
    assert "add --runtime flower" in capsys.readouterr().err
    assert main([*argv, "--runtime", "flower", "--supernodes", "5", "--out",
                 str(data.parent / "never")]) == 2
    assert "--supernodes must be in 1..4" in capsys.readouterr().err  # one node per client


def test_a_connect_timeout_names_the_missing_clients_and_the_silent_nodes(data, tmp_path,
                                                                          monkeypatch):
    """Nodes that never answer the handshake (here a grid that returns no reply) end the wait
    after ``connect_timeout`` with the clients nobody serves and how many nodes were silent."""
    from drake.runtime.flower import FlowerRuntime

    # outside a ServerApp flwr cannot stamp a message with its run; the grid never reads it
    monkeypatch.setattr("drake.runtime.flower.Message", lambda *args, **kwargs: (args, kwargs))

    class SilentGrid:
        def get_node_ids(self):
            return [11, 12]

        def send_and_receive(self, messages, timeout):
            assert len(messages) == 2 and timeout == pytest.approx(0.3)
            return []

    runtime = FlowerRuntime(config(data, tmp_path / "t"), connect_timeout=0.3)
    runtime.grid = SilentGrid()
    with pytest.raises(DrakeError, match=r"client\(s\) \[0, 1, 2, 3\] after 0 s "
                                         r"\(2 node\(s\) asked, 0 answered\).*"
                                         r"client-ids='0,1,2,3'"):
        runtime._connect()
