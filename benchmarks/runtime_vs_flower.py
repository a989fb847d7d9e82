"""The quickstart federation on the local runtime and on Flower: wall time and peak memory.

Builds drake-synth (small), then runs `drake eval --method fedavg` with the quickstart's
settings for --rounds rounds (default 3), once with --runtime local and once with --runtime
flower (a simulation: one SuperNode per client, Ray actors on every core), each in a fresh
process. Prints, from this one run:

* the loop's seconds per round (results.json's wall_time_s / rounds: training, messages and
  evaluation, after set-up);
* the whole command's wall time (set-up included: Ray's start and each actor's model load);
* peak RSS of the command's whole process tree (Ray's workers included), sampled every 0.2 s;

and the Flower / local ratio of each, after checking that both runs gave the same metrics.
With --deployment it also runs the federation on a SuperLink and two SuperNodes on loopback
(drake/runtime/flower_deploy.sh; each serves half the clients), its memory summed over the
SuperLink, the SuperNodes and the submitting command.

    python benchmarks/runtime_vs_flower.py [--rounds 3] [--method fedavg] [--out DIR]
                                           [--deployment]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path


def _tree_rss_mb(root: int) -> float:
    """Resident memory (MB) of process ``root`` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:  # the process ended meanwhile
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
        kb = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
        rss[int(entry)] = int(kb[0]) if kb else 0
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / 1024


def measure(cmd: list[str], also: Sequence[int] = (), env: dict[str, str] | None = None
            ) -> tuple[float, float]:
    """Run ``cmd``; return (wall seconds, peak RSS MB of its process tree and the trees of the
    processes ``also`` names)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], sum(_tree_rss_mb(pid) for pid in (proc.pid, *also)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    return wall, peak[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def deployment(data: Path, num_clients: int, work: Path):
    """Start a SuperLink and two SuperNodes on loopback with the deploy script; return the
    environment that reaches them (FLWR_HOME), their processes and the connection name."""
    script = Path(__file__).resolve().parents[1] / "drake" / "runtime" / "flower_deploy.sh"
    env = {**os.environ, "FLWR_HOME": str(work / "flwr-home"), "FLWR_TELEMETRY_ENABLED": "0",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    link = f"127.0.0.1:{_free_port()}"
    subprocess.run(["bash", str(script), "connect", "bench", link], env=env, check=True,
                   capture_output=True)
    halves = [",".join(map(str, range(k, num_clients, 2))) for k in (0, 1)]
    procs = [subprocess.Popen(["bash", str(script), *args], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
             for args in (["superlink", link],
                          *(["supernode", link, ids, str(data), str(_free_port())]
                            for ids in halves))]
    return env, procs, "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--method", default="fedavg")
    parser.add_argument("--out", default=None, help="keep the build and runs here")
    parser.add_argument("--deployment", action="store_true",
                        help="also run on a loopback SuperLink with two SuperNodes")
    args = parser.parse_args()
    from drake.build import build
    from drake.quickstart import QUICKSTART
    from drake.registry import get_benchmark

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        data = out / "data" / "drake-synth"
        if not (data / "manifest.json").exists():
            build(get_benchmark("drake-synth", size="small"), out / "data", seed=0)
        settings = QUICKSTART.eval_args()
        settings[settings.index("--rounds") + 1] = str(args.rounds)
        drake = str(Path(sys.executable).with_name("drake"))
        rows = {}
        for runtime in ("local", "flower") + (("deployment",) if args.deployment else ()):
            run = out / f"{args.method}-{runtime}"
            cmd = [drake, "eval", "--method", args.method, "--data", str(data), *settings,
                   "--runtime", "local" if runtime == "local" else "flower", "--out", str(run)]
            if runtime == "deployment":
                clients = json.loads((data / "manifest.json").read_text())["partitions"][
                    settings[settings.index("--scenario") + 1]]["clients"]
                env, procs, name = deployment(data, int(clients), out)
                try:
                    wall, peak = measure([*cmd, "--superlink", name],
                                         also=[p.pid for p in procs], env=env)
                finally:
                    for proc in procs:
                        proc.terminate()
                        proc.wait(timeout=30)
            else:
                wall, peak = measure(cmd)
            res = json.loads((run / "results.json").read_text())
            rows[runtime] = {"per_round_s": res["cost"]["wall_time_s"] / args.rounds,
                             "wall_s": wall, "peak_rss_mb": peak, "metrics": res["metrics"]}
        same = all(abs(rows["local"]["metrics"][k] - r["metrics"][k]) < 1e-9
                   for r in rows.values() for k in rows["local"]["metrics"])
        print(f"drake-synth small, {args.method}, quickstart settings, {args.rounds} rounds, "
              f"{os.cpu_count()} cores; same metrics on every runtime: {same}")
        print(f"{'runtime':18} {'s/round':>8} {'wall s':>8} {'peak RSS MB':>12}")
        for runtime, r in rows.items():
            print(f"{runtime:18} {r['per_round_s']:>8.1f} {r['wall_s']:>8.1f} "
                  f"{r['peak_rss_mb']:>12.0f}")
        lo = rows["local"]
        for runtime, r in rows.items():
            if runtime != "local":
                print(f"{runtime + '/local':18} {r['per_round_s'] / lo['per_round_s']:>7.2f}x "
                      f"{r['wall_s'] / lo['wall_s']:>7.2f}x "
                      f"{r['peak_rss_mb'] / lo['peak_rss_mb']:>11.2f}x")
        print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "metrics"}
                          for k, v in rows.items()}))
        if not same:
            sys.exit("the two runtimes gave different metrics")


if __name__ == "__main__":
    main()
