"""The Flower runtime: the local runtime's round loop, with every client in a Flower ClientApp.

The server is a :class:`FlowerRuntime`, a :class:`~drake.runtime.local.LocalRuntime` whose
client turns travel as Flower messages (the message API: ``ServerApp`` / ``ClientApp``). Client
sampling, aggregation (the method's ``aggregate``, so personalised messages and per-client
server state stay on the server), evaluation plans, hooks, metrics and results are the local
runtime's own code; only these cross the wire:

* ``train``: the client's pending message (one ``ArrayRecord`` per adapter, its metadata as
  JSON) goes out; the client trains exactly as :meth:`LocalRuntime.client_train` does and
  replies with its upload and its example count (``MetricRecord`` ``num-examples``);
* ``evaluate.predict``: the ids of the samples to answer (and their options), plus the message
  to deliver first when the method is scored after aggregation; the client replies with its
  answers, and the server scores them;
* ``train.post_fl``: the post-FL stage of methods that have one.

A client's record (its adapters, optimiser state and the method's per-client tensors) lives in
its node's ``context.state`` and never leaves it. Every random draw is a function of (seed,
round, client), as in the local runtime, so both give the same numbers for the same seed.

Which node serves which client is asked once (``query.handshake``): a SuperNode started with
``--node-config "client-ids='0,3'"`` serves those clients; one with ``partition-id=K
num-partitions=N`` (as simulation starts them) serves clients K, K+N, K+2N, ... of the build's
saved partition. ``data=PATH`` and ``model-cache=PATH`` in the node config point a node at its
own copy of the build and model cache.

A client that raises replies with its full traceback (the :func:`report_errors` mod); the server
logs it and stops, or skips the client under ``on_client_error="skip"``: never swallowed.

Ways to run (each needs ``pip install 'drake-pfl[flower]'``):

* simulation on one machine: :func:`run_simulation` (``drake eval --runtime flower``), with no
  SuperLink and no dependency installation;
* deployment: a SuperLink and SuperNodes on several machines, and the app folder
  :func:`write_app` makes (``drake eval --runtime flower --superlink NAME``); see the README.

A Flower run does not resume after a crash: Flower keeps ``context.state`` only for the run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from baselines.base import Payload
from drake.errors import DrakeError
from drake.runtime.client import ClientRecord
from drake.runtime.local import (
    Hook,
    LocalRuntime,
    RunConfig,
    RunState,
    record_from_flat,
    record_to_flat,
    sample_clients,
)

try:
    from flwr.app import (
        ArrayRecord,
        ConfigRecord,
        Context,
        Error,
        Message,
        MessageType,
        MetricRecord,
        RecordDict,
    )
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
except ImportError as exc:  # pragma: no cover - exercised only without flwr
    raise DrakeError("the Flower runtime needs flwr; install it with pip install "
                     "'drake-pfl[flower]', or run with --runtime local") from exc

log = logging.getLogger(__name__)

#: The error code a client's reply carries when the method raised (its reason: the traceback).
CLIENT_RAISED = 1001
#: The ConfigRecord every drake message and reply carries.
KEY = "drake"
#: Message types beyond Flower's plain ``train``.
PREDICT, POST_FL, HANDSHAKE = "evaluate.predict", "train.post_fl", "query.handshake"
#: The dtypes ``ArrayRecord`` cannot hold travel as same-width integers.
_VIEWS = {torch.bfloat16: torch.int16}


class ClientRaised(DrakeError):
    """A client's reply says that it raised; ``traceback`` is the client's own."""

    def __init__(self, message: str, traceback_text: str) -> None:
        super().__init__(message)
        self.traceback = traceback_text


# --- payloads on the wire ----------------------------------------------------------------------
def _arrays(state: Mapping[str, torch.Tensor]) -> tuple[ArrayRecord, dict[str, str]]:
    out, views = {}, {}
    for key, value in state.items():
        value = value.detach().contiguous()
        if value.dtype in _VIEWS:
            views[key] = str(value.dtype).removeprefix("torch.")
            value = value.view(_VIEWS[value.dtype])
        out[key] = value
    return ArrayRecord(out), views


def _tensors(record: ArrayRecord, views: Mapping[str, str]) -> dict[str, torch.Tensor]:
    state = dict(record.to_torch_state_dict())
    for key, dtype in views.items():
        state[key] = state[key].view(getattr(torch, dtype))
    return state


def payload_records(payload: Payload, prefix: str) -> dict[str, Any]:
    """A :class:`Payload` as records: ``<prefix>/<adapter>`` ArrayRecords and a ConfigRecord
    ``<prefix>`` with the metadata (JSON) and the adapter names."""
    records: dict[str, Any] = {}
    views = {}
    for adapter, state in payload.tensors.items():
        records[f"{prefix}/{adapter}"], views[adapter] = _arrays(state)
    records[prefix] = ConfigRecord({"meta": json.dumps(payload.meta, sort_keys=True),
                                    "views": json.dumps(views, sort_keys=True),
                                    "adapters": json.dumps(list(payload.tensors))})
    return records


def message_records(message: Payload | None) -> dict[str, Any]:
    """A client's pending message as the records of a request (none when there is none)."""
    return payload_records(message, "message") if message is not None else {}


def records_payload(content: RecordDict, prefix: str) -> Payload | None:
    """The :class:`Payload` :func:`payload_records` wrote under ``prefix`` (None if absent)."""
    if prefix not in content:
        return None
    head = content[prefix]
    views = json.loads(head["views"])
    return Payload({adapter: _tensors(content[f"{prefix}/{adapter}"], views[adapter])
                    for adapter in json.loads(head["adapters"])}, json.loads(head["meta"]))


# --- the server --------------------------------------------------------------------------------
class FlowerRuntime(LocalRuntime):
    """:class:`LocalRuntime` whose clients live in Flower ClientApps (see the module docstring).

    Set :attr:`grid` (the ServerApp's) before :meth:`run`. ``connect_timeout`` bounds the wait
    for SuperNodes to serve every client, ``reply_timeout`` the wait for each batch of replies
    (None: no bound).
    """

    runtime_name = "flower"

    def __init__(self, config: RunConfig, progress: Callable | None = None,
                 hooks: Sequence[Hook] = (), *, connect_timeout: float = 300.0,
                 reply_timeout: float | None = None) -> None:
        if config.fast_adapt:
            raise DrakeError("--fast-adapt averages the clients' final models, which stay on "
                             "their Flower nodes; run it on the local runtime (leave out "
                             "--runtime flower)")
        super().__init__(config, progress, hooks)
        self.grid: Grid | None = None
        self.connect_timeout = connect_timeout
        self.reply_timeout = reply_timeout
        self._nodes: dict[int, int] = {}  # client id -> node id
        self._run_json = json.dumps(asdict(config), sort_keys=True)

    # --- connection ----------------------------------------------------------------------------
    def _connect(self) -> dict[int, int]:
        """Ask every node which clients it serves until all clients are served."""
        if self._nodes:
            return self._nodes
        if self.grid is None:
            raise DrakeError("FlowerRuntime.grid is not set: run it inside a ServerApp "
                             "(drake.runtime.flower.run_simulation or server_app)")
        wanted = set(range(self.data.num_clients))
        asked: set[int] = set()
        answered = 0
        deadline = time.monotonic() + self.connect_timeout
        while True:
            new = [n for n in self.grid.get_node_ids() if n not in asked]
            if new:
                asked.update(new)
                replies = self.grid.send_and_receive(
                    [Message(RecordDict({KEY: ConfigRecord({"run": self._run_json})}),
                             dst_node_id=n, message_type=HANDSHAKE) for n in new],
                    timeout=self.connect_timeout)
                for reply in replies:
                    answered += 1
                    node = reply.metadata.src_node_id
                    if reply.has_error():
                        raise DrakeError(f"SuperNode {node} failed the handshake: "
                                         f"{reply.error.reason}")
                    for c in json.loads(reply.content[KEY]["clients"]):
                        if c in self._nodes and self._nodes[c] != node:
                            raise DrakeError(f"client {c} is served by two SuperNodes "
                                             f"({self._nodes[c]} and {node}); give each node "
                                             f"distinct --node-config client-ids")
                        if c in wanted:
                            self._nodes[c] = node
            missing = sorted(wanted - set(self._nodes))
            if not missing:
                return self._nodes
            if time.monotonic() > deadline:
                raise DrakeError(
                    f"no SuperNode serves client(s) {missing} after {self.connect_timeout:.0f} "
                    f"s ({len(asked)} node(s) asked, {answered} answered); start one with "
                    f"flower-supernode "
                    f"--node-config \"client-ids='{','.join(map(str, missing))}'\"")
            time.sleep(0.2)

    def _exchange(self, kind: str, requests: Mapping[int, dict[str, Any]], round_: int
                  ) -> dict[int, Message]:
        """Send one message per client (``{client: records}``) and return the replies by
        client; a client that gives none within ``reply_timeout`` answers with an error."""
        nodes = self._connect()
        messages = []
        for c, records in requests.items():
            head = records.setdefault(KEY, ConfigRecord({}))
            head["run"], head["client"], head["round"] = self._run_json, c, round_
            # the group id names the client: error replies, which carry no content, keep it
            messages.append(Message(RecordDict(records), dst_node_id=nodes[c],
                                    message_type=kind, group_id=f"{round_}/{c}"))
        return {int(reply.metadata.group_id.split("/")[1]): reply for reply in
                self.grid.send_and_receive(messages, timeout=self.reply_timeout)}

    def _failure(self, c: int, reply: Message | None) -> ClientRaised | None:
        """What went wrong with client ``c``'s reply (None: nothing)."""
        if reply is None:
            return ClientRaised(f"client {c} sent no reply within {self.reply_timeout} s",
                                "")
        if not reply.has_error():
            return None
        reason = reply.error.reason or ""
        last = reason.strip().splitlines()[-1] if reason.strip() else f"code {reply.error.code}"
        return ClientRaised(last, reason)

    # --- the client turns, as messages ------------------------------------------------------
    def train_round(self, r: int, records: dict[int, ClientRecord],
                    pending: dict[int, Payload], errors: list[dict[str, Any]]
                    ) -> dict[int, Payload]:
        sampled = sample_clients(self.data.num_clients, self.cfg.frac, self.cfg.seed, r,
                                 first_round_all=self.cfg.first_round_all)
        self._client_done("train", r, 0, len(sampled))
        requests = {}
        for c in sampled:
            if not self.data.streams[c].seen(r):  # no data yet: it sits the round out
                continue
            requests[c] = message_records(pending.pop(c, None))
        replies = self._exchange(MessageType.TRAIN, requests, r) if requests else {}
        uploads: dict[int, Payload] = {}
        for done, c in enumerate(sampled, 1):
            if c in requests:
                exc = self._failure(c, replies.get(c))
                if exc is not None:
                    self._client_failed(errors, r, c, exc, detail=exc.traceback)
                else:
                    uploads[c] = records_payload(replies[c].content, "upload")
            self._client_done("train", r, done, len(sampled))
        return uploads

    def predict(self, c: int, record: ClientRecord, round_: int,
                samples: Sequence[Mapping[str, Any]], *, loglik: bool = False,
                batch: int = 32) -> list[Any]:
        if not samples:
            return []
        refs = [{"id": s["id"], "choices": list(s.get("choices") or [])} for s in samples]
        records = {KEY: ConfigRecord({"samples": json.dumps(refs), "loglik": loglik,
                                      "batch": batch}),
                   **message_records(self._eval_pending.get(c))}
        reply = self._exchange(PREDICT, {c: records}, round_).get(c)
        exc = self._failure(c, reply)
        if exc is not None:
            raise DrakeError(f"client {c} failed to answer at round {round_}: {exc}\n"
                             f"the client's traceback:\n{exc.traceback}")
        return json.loads(reply.content[KEY]["predictions"])

    def post_fl(self, st: RunState) -> None:
        last = self.rounds - 1
        n = self.data.num_clients
        self._client_done("post_fl", last, 0, n)
        requests = {c: message_records(st.pending.pop(c, None)) for c in range(n)}
        replies = self._exchange(POST_FL, requests, last)
        for c in range(n):
            exc = self._failure(c, replies.get(c))
            if exc is not None:
                self._client_failed(st.errors, last, c, exc, stage="post_fl",
                                    detail=exc.traceback)
            self._client_done("post_fl", last, c + 1, n)
        st.post_fl = True

    # --- no checkpoints: client state is Flower's context.state, gone when the run ends --------
    def _save_checkpoint(self, run: RunState) -> None:
        return None

    def _load_checkpoint(self) -> RunState | None:
        if (self.out / "checkpoint").exists():
            raise DrakeError(f"{self.out} holds the checkpoint of a local run; a Flower run "
                             f"does not resume one: resume it with --runtime local, or choose "
                             f"another --out")
        return None


# --- the client --------------------------------------------------------------------------------
#: Client engines by (run config, node's data, node's model cache): the frozen models, data and
#: method configuration, built once per process (a Ray actor may serve several nodes; a
#: deployment SuperNode may start a process per message). Per-client state is never here.
_ENGINES: dict[tuple[str, str, str], LocalRuntime] = {}


def _engine(run_json: str, node_config: Mapping[str, Any]) -> LocalRuntime:
    fields = json.loads(run_json)
    if node_config.get("data"):
        fields["data"] = str(node_config["data"])
    if node_config.get("model-cache"):
        fields["model_cache"] = str(node_config["model-cache"])
    key = (run_json, fields["data"], str(fields.get("model_cache")))
    if key not in _ENGINES:
        threads = int(os.environ.get("DRAKE_CLIENT_THREADS", "1"))
        torch.set_num_threads(threads)  # a node is one worker: one thread, as the tests run
        _ENGINES.clear()  # one run at a time per process
        _ENGINES[key] = LocalRuntime(RunConfig(**fields))
    return _ENGINES[key]


def served_clients(node_config: Mapping[str, Any], num_clients: int) -> list[int]:
    """The clients a node serves: ``client-ids`` ("0,3,5"), else ``partition-id`` K of
    ``num-partitions`` N (clients K, K+N, ...), else all of them (a single node)."""
    if "client-ids" in node_config:
        text = str(node_config["client-ids"])
        try:
            ids = [int(x) for x in text.replace(" ", "").split(",") if x]
        except ValueError:
            raise DrakeError(f"node config client-ids={text!r}: give client ids separated by "
                             f"commas, e.g. client-ids='0,3'") from None
        bad = [c for c in ids if not 0 <= c < num_clients]
        if bad:
            raise DrakeError(f"node config client-ids names client(s) {bad}; the run has "
                             f"clients 0..{num_clients - 1}")
        return ids
    if "partition-id" in node_config:
        k, n = int(node_config["partition-id"]), int(node_config.get("num-partitions", 1))
        if not 0 <= k < n:
            raise DrakeError(f"node config partition-id={k} is not in 0..{n - 1} "
                             f"(num-partitions={n})")
        return list(range(k, num_clients, n))
    return list(range(num_clients))


def _slot(run_json: str, c: int) -> str:
    """Where client ``c``'s record of the run ``run_json`` lives in ``context.state`` (runs
    one after the other in a simulation never see each other's records)."""
    return f"drake/{hashlib.sha256(run_json.encode()).hexdigest()[:16]}/client/{c}"


def _load_record(engine: LocalRuntime, context: Context, c: int, slot: str) -> ClientRecord:
    if slot not in context.state:
        return engine.fresh_record(c)
    head = context.state[f"{slot}/meta"]
    flat = _tensors(context.state[slot], json.loads(head["views"]))
    return record_from_flat(engine.fresh_record(c), "", flat, json.loads(head["optim"]))


def _store_record(context: Context, slot: str, record: ClientRecord) -> None:
    flat: dict[str, torch.Tensor] = {}
    optim = record_to_flat(record, "", flat)
    context.state[slot], views = _arrays(flat)
    context.state[f"{slot}/meta"] = ConfigRecord({"optim": json.dumps(optim, sort_keys=True),
                                                  "views": json.dumps(views, sort_keys=True)})


def _reply(msg: Message, c: int, records: Mapping[str, Any] | None = None,
           **fields: Any) -> Message:
    return Message(RecordDict({**(records or {}), KEY: ConfigRecord({"client": c, **fields})}),
                   reply_to=msg)


def report_errors(msg: Message, context: Context, call_next) -> Message:
    """ClientApp mod: a handler's exception becomes an error reply with the full traceback,
    which the server logs (Flower alone would report only the exception's text)."""
    try:
        return call_next(msg, context)
    except Exception:
        client = ""
        if msg.has_content() and KEY in msg.content and "client" in msg.content[KEY]:
            client = f"client {msg.content[KEY]['client']}: "
        return Message(Error(code=CLIENT_RAISED, reason=client + traceback.format_exc()),
                       reply_to=msg)


client_app = ClientApp(mods=[report_errors])


@client_app.query("handshake")
def _handshake(msg: Message, context: Context) -> Message:
    engine = _engine(msg.content[KEY]["run"], context.node_config)
    clients = served_clients(context.node_config, engine.data.num_clients)
    return Message(RecordDict({KEY: ConfigRecord({"clients": json.dumps(clients)})}),
                   reply_to=msg)


def _turn(msg: Message, context: Context
          ) -> tuple[LocalRuntime, int, int, Payload | None, str]:
    head = msg.content[KEY]
    engine = _engine(head["run"], context.node_config)
    c = int(head["client"])
    if c not in served_clients(context.node_config, engine.data.num_clients):
        raise DrakeError(f"this SuperNode does not serve client {c} (node config "
                         f"{dict(context.node_config)})")
    return (engine, c, int(head["round"]), records_payload(msg.content, "message"),
            _slot(head["run"], c))


@client_app.train()
def _train(msg: Message, context: Context) -> Message:
    engine, c, r, message, slot = _turn(msg, context)
    record, upload = engine.client_train(c, r, _load_record(engine, context, c, slot), message)
    _store_record(context, slot, record)  # only after success: a failed turn changes nothing
    records = payload_records(upload, "upload")
    records["metrics"] = MetricRecord({"num-examples": len(engine.data.streams[c].seen(r))})
    return _reply(msg, c, records)


@client_app.evaluate("predict")
def _predict(msg: Message, context: Context) -> Message:
    engine, c, r, message, slot = _turn(msg, context)
    head = msg.content[KEY]
    refs = json.loads(head["samples"])
    samples = [{**sample, "choices": ref["choices"]} for ref, sample in
               zip(refs, engine.data.lookup([ref["id"] for ref in refs]))]
    preds = engine.client_predict(c, _load_record(engine, context, c, slot), r, samples,
                                  loglik=bool(head["loglik"]), batch=int(head["batch"]),
                                  message=message)
    return _reply(msg, c, predictions=json.dumps(preds))


@client_app.train("post_fl")
def _post_fl(msg: Message, context: Context) -> Message:
    engine, c, _, message, slot = _turn(msg, context)
    record = engine.client_post_fl(c, _load_record(engine, context, c, slot), message)
    _store_record(context, slot, record)
    return _reply(msg, c)


# --- ways to run -------------------------------------------------------------------------------
def _serve(runtime: FlowerRuntime, grid: Grid) -> dict[str, Any]:
    runtime.grid = grid
    try:
        return runtime.run()
    finally:
        runtime.grid = None


#: The deployment ServerApp: reads the RunConfig JSON file named by the run config key
#: ``drake-config`` (what ``drake eval --runtime flower --superlink`` passes).
server_app = ServerApp()


@server_app.main()
def _server_main(grid: Grid, context: Context) -> None:
    path = Path(str(context.run_config.get("drake-config", "")))
    if not path.is_file():
        raise DrakeError(f"run config drake-config={str(path)!r} names no RunConfig JSON file; "
                         f"start runs with drake eval --runtime flower --superlink NAME")
    _serve(FlowerRuntime(RunConfig(**json.loads(path.read_text(encoding="utf-8")))), grid)


def run_simulation(config: RunConfig, *, progress: Callable | None = None,
                   hooks: Sequence[Hook] = (), supernodes: int | None = None,
                   cpus: int | None = None, cpus_per_client: float = 1.0) -> dict[str, Any]:
    """Run ``config`` as a Flower simulation on this machine (Ray; no SuperLink, nothing
    installed at run time) and return its results, as :meth:`LocalRuntime.run` does.

    ``supernodes`` defaults to one per client (node K serves clients K, K+N, ...); ``cpus``
    is what Ray may use (default: all), ``cpus_per_client`` what each ClientApp takes, so
    ``cpus / cpus_per_client`` clients train at once.
    """
    return simulate([config], progress=progress, hooks=hooks, supernodes=supernodes,
                    cpus=cpus, cpus_per_client=cpus_per_client)[0]


def simulate(configs: Sequence[RunConfig], *, progress: Callable | None = None,
             hooks: Sequence[Hook] = (), supernodes: int | None = None,
             cpus: int | None = None, cpus_per_client: float = 1.0) -> list[dict[str, Any]]:
    """:func:`run_simulation` of several runs one after the other on one simulated federation
    (Ray and the ClientApps start once; each run's client records are its own). The runs must
    have the same number of clients."""
    from flwr.simulation import run_simulation as flower_simulation

    runtimes = [FlowerRuntime(c, progress, hooks) for c in configs]  # bad configs fail here
    clients = {rt.data.num_clients for rt in runtimes}
    if len(clients) != 1:
        raise DrakeError(f"runs on one simulated federation need one client count, got "
                         f"{sorted(clients)}")
    n = clients.pop()
    nodes = supernodes or n
    if not 1 <= nodes <= n:
        raise DrakeError(f"--supernodes must be in 1..{n} (one client per node at most), "
                         f"got {nodes}")
    outcome: dict[str, Any] = {"results": []}
    app = ServerApp()

    @app.main()
    def _main(grid: Grid, context: Context) -> None:
        try:
            for runtime in runtimes:
                outcome["results"].append(_serve(runtime, grid))
        except BaseException as exc:  # re-raised below, in the caller's thread
            outcome["error"] = exc

    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    # The ClientApps train on the CPU and ask Ray for no GPU. Ray still rewrites such actors'
    # visible-device variables today, warns that it will stop, and takes 0 here as the opt-in
    # to that coming default: the runs are the same under both, and the warning goes.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    flower_simulation(app, client_app, num_supernodes=nodes, backend_config={
        "client_resources": {"num_cpus": cpus_per_client, "num_gpus": 0.0},
        "init_args": {"num_cpus": cpus or os.cpu_count() or 1}})
    if "error" in outcome:
        raise outcome["error"]
    if len(outcome["results"]) != len(runtimes):
        raise DrakeError("the Flower simulation ended without running the server (see the "
                         "Flower log above)")
    return outcome["results"]


APP_PYPROJECT = """\
# A Flower App that runs drake's ServerApp and ClientApp (written by drake eval --runtime
# flower --superlink). The components come from the installed drake-pfl: install
# drake-pfl[flower] (and any DRAKE_METHOD_MODULES) on the SuperLink's and every SuperNode's
# machine.
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "drake-flower-app"
version = "{version}"
description = "DRAKE federated runs on Flower"
license = "Apache-2.0"
dependencies = ["drake-pfl[flower]"]

[tool.flwr.app]
publisher = "drake"

[tool.flwr.app.components]
serverapp = "drake.runtime.flower:server_app"
clientapp = "drake.runtime.flower:client_app"

[tool.flwr.app.config]
drake-config = ""
"""


def write_app(folder: Path) -> Path:
    """Write the Flower App folder (a ``pyproject.toml``) that ``flwr run`` submits."""
    from drake import __version__

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(APP_PYPROJECT.format(version=__version__),
                                           encoding="utf-8")
    return folder


def run_deployment(config: RunConfig, superlink: str, *, flwr: str | None = None
                   ) -> dict[str, Any]:
    """Submit ``config`` to a running SuperLink with ``flwr run`` and return its results.

    ``superlink`` is a connection of ``$FLWR_HOME/config.toml`` (address, TLS certificates).
    The ServerApp runs on the SuperLink's machine and writes ``config.out`` there: run this
    where that folder is readable (the SuperLink's machine, or a shared disk). SuperNodes
    must already serve every client (``--node-config "client-ids='...'"``).
    """
    out = Path(config.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "config.json"
    text = json.dumps(asdict(config), indent=2, sort_keys=True) + "\n"
    if config_path.exists() and json.loads(config_path.read_text()) != asdict(config):
        raise DrakeError(f"{out} holds a run with another config; choose a new --out or "
                         f"delete it")
    config_path.write_text(text)
    results = out / "results.json"
    results.unlink(missing_ok=True)  # a Flower run starts over: no stale results read back
    exe = flwr or shutil.which("flwr") or str(Path(sys.executable).with_name("flwr"))
    app = write_app(out / "flower-app")
    cmd = [exe, "run", str(app), superlink, "--run-config",
           f"drake-config={json.dumps(str(config_path))}", "--stream"]
    log.info("submitting: %s", " ".join(cmd))
    done = subprocess.run(cmd, check=False)
    if done.returncode != 0:
        raise DrakeError(f"flwr run exited with {done.returncode} (command: {' '.join(cmd)}); "
                         f"is the SuperLink {superlink!r} of $FLWR_HOME/config.toml running?")
    if not results.exists():
        raise DrakeError(f"the Flower run wrote no {results}: its ServerApp failed (the log "
                         f"above, or `flwr log RUN_ID {superlink}`, says why)")
    return json.loads(results.read_text(encoding="utf-8"))
