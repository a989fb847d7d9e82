"""The `drake` command line. Library errors become one clear line and a non-zero exit code."""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from drake import __version__
from drake.errors import DrakeError
from drake.presets import PRESET_FIELDS, PRESET_NAMES, Preset, resolve_preset

log = logging.getLogger("drake")

# Subcommands contributed by other packages through an `add_cli(subparsers)` function. A plugin
# is imported only when its command runs (or for --help), so that e.g. `drake build` never waits
# for torch to load and fails fast without network.
PLUGINS = {"setup-metrics": ("evaluators.cli", "set up WordNet for METEOR (offline)"),
           "leaderboard": ("leaderboard.cli", "validate, submit, show and render the leaderboard"),
           "models": ("drake.models.cli", "list the model zoo; pretrain the tiny models")}


def key_values(option: str, items: list[str], example: str) -> dict[str, Any]:
    """``KEY=VALUE`` arguments of ``option``: a value is a JSON number, ``true``, ``false``,
    ``null``, list or object when it reads as one, and the text itself otherwise (``flat``,
    ``columnwise``). A value opening a list or object must be valid JSON."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{option} {item!r} must be KEY=VALUE, e.g. {example}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError as err:
            if value.lstrip()[:1] in "[{":
                raise ValueError(f"{option} {key}={value!r} is not valid JSON ({err.msg}); "
                                 f"write a list as [8,4,2] and an object as {{\"k\": 1}}"
                                 ) from None
            out[key] = value
    return out


def _progress(desc: str, unit: str = "shard"):
    from tqdm.auto import tqdm

    def wrap(iterable, total):
        return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                    disable=None)

    return wrap


def cmd_build(args: argparse.Namespace) -> int:
    from drake.build import build, restrict_spec
    from drake.registry import get_benchmark

    if args.num_proc < 1:
        raise ValueError(f"--num-proc must be >= 1, got {args.num_proc}")
    spec = get_benchmark(args.benchmark, size=args.size)
    if args.tasks:
        spec = restrict_spec(spec, [t.strip() for item in args.tasks for t in item.split(",")
                                    if t.strip()])
    folder = build(spec, Path(args.out), seed=args.seed, num_proc=args.num_proc,
                   image_size=args.image_size, overwrite=args.overwrite,
                   progress=_progress(f"building {spec.name}"), source_dir=args.source_dir,
                   revision=args.revision, cache_dir=args.cache_dir, strict=args.strict,
                   allow_short=args.allow_short, subsets=args.subsets, convert_progress=_progress(f"reading {spec.name} sources", unit="split"))
    manifest = json.loads((folder / "manifest.json").read_text())
    rejected = ""
    if manifest.get("rejected") is not None:
        rejected = (f"; {manifest['rejected']['rows']} source rows rejected (listed in "
                    f"{folder / manifest['rejected']['file']})")
    print(f"built {spec.name} {spec.version} into {folder}: {manifest['total_rows']} samples in "
          f"{len(manifest['tasks'])} tasks (seed {args.seed}){rejected}; check it with `drake "
          f"verify {folder}`")
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    from drake.hub import download

    folder = download(args.benchmark, Path(args.out), repo=args.repo, revision=args.revision,
                      cache_dir=args.cache_dir, overwrite=args.overwrite,
                      progress=_progress(f"downloading {args.benchmark}", unit="file"))
    manifest = json.loads((folder / "manifest.json").read_text())
    print(f"downloaded {manifest['benchmark']} {manifest['version']} into {folder}: "
          f"{manifest['total_rows']} samples, every file matches its manifest sha256")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from drake.hub import push

    info = push(Path(args.dir), args.repo, revision=args.revision, private=args.private)
    url = getattr(info, "commit_url", None) or args.repo
    print(f"pushed {args.dir} to the Hub dataset repo {args.repo}: {url}; load it with "
          f"datasets.load_dataset({args.repo!r})")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from drake.layout import require_build, verified_summary
    from drake.verify import load_manifest, verify

    report = verify(require_build(Path(args.dir), "drake verify"))
    if report.ok:
        print(f"ok: {verified_summary(report, load_manifest(Path(args.dir)))}")
        return 0
    for problem in report.problems:
        print(f"FAIL {problem}", file=sys.stderr)
    print(f"{len(report.problems)} problem(s) in {args.dir}", file=sys.stderr)
    return 1


def cmd_info(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from drake.layout import require_build, sample_summary
    from drake.verify import load_manifest

    manifest = load_manifest(require_build(Path(args.dir), "drake info"))
    spec = manifest["spec"]
    console = Console(markup=False)  # a manifest is data: "[/x]" in it is text, not markup
    console.print(Text.assemble((manifest["benchmark"], "bold"),
                                f" {manifest['version']} — {spec.get('description', '')} (seed "
                                f"{manifest['seed']}, {sample_summary(manifest)})"))
    groups = {t["id"]: t for t in spec["tasks"]}
    table = Table("task", "group", "answer type", "train", "test", "images", "img/sample")
    for task, splits in manifest["tasks"].items():
        rows = sum(s["rows"] for s in splits.values())
        images = sum(s["images"] for s in splits.values())
        table.add_row(task, groups.get(task, {}).get("subgroup", ""),
                      groups.get(task, {}).get("answer_type", ""),
                      str(splits.get("train", {}).get("rows", 0)),
                      str(splits.get("test", {}).get("rows", 0)), str(images),
                      f"{images / rows:.2f}" if rows else "-")
    console.print(table)
    if spec["clients"]:
        models = spec["model_mixes"].get(spec["default_mix"], [""] * len(spec["clients"]))
        clients = Table("client", f"model ({spec['default_mix']})", "tasks")
        for client, model in zip(spec["clients"], models):
            clients.add_row(str(client["id"]), model, ", ".join(client["tasks"]))
        console.print(clients)
    if spec["unseen_tasks"]:
        console.print("unseen tasks: " + ", ".join(spec["unseen_tasks"]))
    if manifest.get("partitions"):
        console.print("scenarios: " + ", ".join(sorted(manifest["partitions"])))
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    from drake.registry import get_benchmark
    from drake.scenarios import add_scenario, spec_from_manifest
    from drake.specs import ScenarioSpec
    from drake.verify import load_manifest

    root = Path(args.dir)
    if args.rule:
        params = key_values("--param", args.param, "alpha=0.1")
        scenario = ScenarioSpec(args.scenario, args.rule, order=args.order, rounds=args.rounds,
                                rounds_per_task=args.rounds_per_task, params=params)
    else:
        spec = spec_from_manifest(load_manifest(root), get_benchmark)
        scenario = spec.scenario(args.scenario)
    entry = add_scenario(root, scenario, seed=args.seed, replace=args.replace)
    counts = ", ".join(f"{k}: {v['assigned']}/{v['total']} assigned" for k, v in
                       entry["counts"].items())
    print(f"wrote {root / entry['file']} ({entry['clients']} clients; {counts})")
    return 0


def cmd_benchmarks(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from drake.registry import list_benchmarks

    table = Table("benchmark", "version", "protocol", "tasks", "clients", "rows (declared)",
                  "source")
    for spec in list_benchmarks():
        declared = sum(sum(t.caps.values()) for t in spec.tasks)
        table.add_row(spec.name, spec.version, spec.protocol, str(len(spec.tasks)),
                      str(len(spec.clients)) if spec.clients else "-",
                      str(declared) if declared else "from source",
                      ("offline: " if spec.offline else "") + spec.source_note)
    Console(width=160).print(table)
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from baselines import get_method, method_names

    table = Table("method", "adapters", "steps vs SFT", "about")
    for name in method_names():
        cls = get_method(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        table.add_row(name, ", ".join(cls().adapters()), f"{cls.compute_ratio:g}", doc)
    Console(width=160).print(table)
    return 0


def _count_or_all(text: str) -> int | str:
    """``--eval-per-task``: a count, or ``all`` for every test sample."""
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count or 'all', got {text!r}") from None


def _built_benchmark(root: Path) -> str:
    """The registered name of the benchmark built in ``root`` (its manifest's)."""
    manifest = root / "manifest.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["benchmark"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DrakeError(f"{manifest}: cannot read the built benchmark's name ({exc}); "
                         f"check the build with `drake verify {root}`") from exc


def describe_preset(preset: Preset, settings: dict[str, Any]) -> str:
    """The lines ``drake eval`` prints for a non-default preset: the resolved values, the
    source and each departure."""
    values = ", ".join(f"{k} {'all' if v is None and k == 'eval_per_task' else v}"
                       for k, v in settings.items() if v is not None or k == "eval_per_task")
    lines = [f"preset {preset.name} ({preset.source}): {values}"]
    lines += [f"  departs from the paper: {d}" for d in preset.departures]
    return "\n".join(lines)


def cmd_eval(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from baselines import get_method
    from drake.layout import eval_build
    from drake.runtime import LocalRuntime, RunConfig
    from drake.runtime.progress import RoundProgress
    from drake.runtime.results import settings_caption

    get_method(args.method)  # fail fast on an unknown name
    if args.runtime == "local" and (args.supernodes or args.superlink):
        raise DrakeError("--supernodes and --superlink are Flower's: add --runtime flower")
    hparams = key_values("--hp", args.hp, "lam=0.01")
    given = {name: getattr(args, name) for name in PRESET_FIELDS
             if getattr(args, name) is not None}
    if given.get("eval_per_task") == "all":  # every test sample
        given["eval_per_task"] = None
    if args.dry_run:
        return _eval_dry_run(args, hparams, given)
    root = eval_build(Path(args.data), args.benchmark)
    settings, preset = _settings(args, _built_benchmark(root), given)
    if args.preset != "cpu":
        print(describe_preset(preset, settings), file=sys.stderr, flush=True)
    out = args.out or str(Path("runs") / f"{root.name}-{args.scenario}-{args.method}-s{args.seed}")
    cfg = RunConfig(data=str(root), scenario=args.scenario, method=args.method, out=out,
                    seed=args.seed, local_steps=args.local_steps,
                    mc_scoring=args.mc_scoring, model_mix=args.model_mix,
                    model=args.model,
                    pretrained=not args.untrained, model_cache=args.model_cache,
                    on_client_error=args.on_client_error, method_hparams=hparams,
                    eval_initial=args.eval_initial, eval_tasks=args.eval_tasks,
                    fast_adapt=args.fast_adapt, fast_adapt_every=args.fast_adapt_every,
                    preset=args.preset, **settings)
    if sys.stderr.isatty():  # a rounds bar; tqdm draws nothing elsewhere, so lines there
        progress, hooks = _progress_rounds(f"{args.method} rounds"), []
        keepalive = contextlib.nullcontext()
    else:
        lines = RoundProgress(lambda line: print(line, file=sys.stderr, flush=True),
                              f"{args.method} ")
        progress, hooks, keepalive = None, [lines], lines.keepalive()
    with keepalive:  # set-up included (FedMosaic aligns for a minute); lines only after 10 s
        if args.runtime == "flower":
            from drake.runtime import flower

            results = (flower.run_deployment(cfg, args.superlink) if args.superlink else
                       flower.run_simulation(cfg, progress=progress, hooks=hooks,
                                             supernodes=args.supernodes))
        else:
            results = LocalRuntime(cfg, progress=progress, hooks=hooks).run()
    # results.json, then the plan's other views (the global model, a multi-task run's tasks)
    files = [Path(out) / "results.json"] + sorted(
        f for f in Path(out).glob("results-*.json") if f.is_file())
    views = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    heads = {"self_a_last": "Self A_last", "self_a_auc": "Self A_AUC",
             "others_a_last": "Others A_last", "others_a_auc": "Others A_AUC",
             "google_bleu": "GBLEU", "bertscore_f1": "BERTScore", "rougeLsum": "ROUGE-Lsum",
             "meteor": "METEOR", "bleu": "BLEU"}
    tables: dict[tuple[str, ...], Table] = {}
    # several views share their scenario's prefix ("quantity-skew-"): the title holds it once
    wheres = [res["scenario"]["name"] for res in views]
    shared = os.path.commonprefix(wheres) if len(views) > 1 else ""
    shared = shared[: shared.rfind("-") + 1]
    for res, where in zip(views, wheres):
        m = res["metrics"]
        names = (("self_a_last", "self_a_auc", "others_a_last", "others_a_auc")
                 if res["protocol"] == "self_others" else tuple(m))
        where = where[len(shared):]
        if names not in tables:
            scope = f" / {shared.rstrip('-')}" if shared else ""
            title = (f"{res['benchmark']['name']}{scope if len(views) > 1 else ' / ' + where} "
                     f"(seed {args.seed}, protocol {res['protocol']}; {settings_caption(res)})")
            table = tables[names] = Table("method", title=title)
            if len(views) > 1:  # the view's name in full: it says which model on which rows
                table.add_column("view", no_wrap=True)
            for k in names:
                table.add_column(heads.get(k, k))
        tables[names].add_row(args.method, *([where] if len(views) > 1 else []),
                              *(f"{m[k]:.2f}" for k in names))
    for table in tables.values():
        Console().print(table)
    if args.eval_initial and results["protocol"] == "self_others":
        first = json.loads((Path(out) / "metrics.jsonl").read_text().splitlines()[0])
        print(f"before training: Self {first['self']:.2f}, Others {first['others']:.2f}")
    print("results: " + ", ".join(str(f) for f in files))
    return 0


def _settings(args: argparse.Namespace, benchmark: str, given: dict[str, Any]
              ) -> tuple[dict[str, Any], Preset]:
    """The run settings of `drake eval` on ``benchmark``: the explicit ones over the preset's,
    and explicit --local-steps over a preset's local epochs."""
    settings, preset = resolve_preset(args.preset, benchmark, given,
                                      getattr(args, "scenario", None))
    if args.local_steps is not None and "local_epochs" not in given:
        settings["local_epochs"] = None
    return settings, preset


def _eval_dry_run(args: argparse.Namespace, hparams: dict[str, Any],
                  given: dict[str, Any]) -> int:
    """`drake eval --dry-run`: the resolved protocol, the public set from the Hub cache and the
    method's set-up on tiny stand-in models (:mod:`drake.runtime.dryrun`)."""
    from drake.models.zoo import DEFAULT_MODEL
    from drake.registry import get_benchmark
    from drake.runtime.dryrun import dry_run
    from drake.runtime.local import make_method

    if not args.benchmark:
        raise DrakeError("--dry-run needs --benchmark NAME (a registered benchmark, "
                         "`drake benchmarks`); it reads no build")
    spec = get_benchmark(args.benchmark)
    settings, preset = _settings(args, spec.name, given)
    print(describe_preset(preset, settings), flush=True)
    # as the runtime picks them: the benchmark's mixes, else the protocol's default model
    mixes = dict(spec.model_mixes) or {"default": (DEFAULT_MODEL[spec.protocol],)}
    mix = args.model_mix or spec.default_mix or "default"
    if args.model:
        mix, mixes[args.model] = args.model, (args.model,)
    if mix not in mixes:
        raise DrakeError(f"benchmark {spec.name} has no model mix {mix!r}; known: "
                         f"{sorted(mixes)}")
    scenario = {s.name: s for s in spec.scenarios}.get(args.scenario)
    if scenario is None:
        raise DrakeError(f"benchmark {spec.name} has no scenario {args.scenario!r}; known: "
                         f"{', '.join(s.name for s in spec.scenarios)}")
    # the declared clients, else the scenario's count (a build would tell the rest)
    n_clients = len(spec.clients) or int(scenario.params.get("num_clients") or 0)
    if not n_clients:
        raise DrakeError(f"scenario {scenario.name} of {spec.name} does not say how many "
                         f"clients it has; dry-run a scenario with num_clients, or build it")
    models = [mixes[mix][c % len(mixes[mix])] for c in range(n_clients)]
    method = make_method(args.method, settings["lr"], hparams)
    dry_run(method, spec, scen=scenario, models=models, mix=mix, settings=settings,
            seed=args.seed, hub_cache=Path(args.cache_dir) if args.cache_dir else None,
            model_cache=Path(args.model_cache) if args.model_cache else None,
            say=lambda line: print(line, flush=True))
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from drake.card import calibration_summary
    from drake.quickstart import QUICKSTART, quickstart
    from drake.runtime.results import settings_caption

    def say(line: str) -> None:
        print(line, flush=True)

    results = quickstart(Path(args.out), methods=args.methods, size=args.size,
                         rounds=args.rounds, seed=args.seed, mc_scoring=args.mc_scoring,
                         pretrain={} if args.pretrain else None, say=say)
    table = Table("method", "Self A_last", "Self A_AUC", "Others A_last", "Others A_AUC",
                  "up MB/round", title="drake-synth, dynamic hetero (tiny-llava-llama / -qwen); "
                  f"{settings_caption(results[0])}")
    first = Path(args.out) / "runs" / args.methods[0] / "metrics.jsonl"
    if first.exists():
        p0 = json.loads(first.read_text().splitlines()[0])
        if p0.get("initial"):
            table.add_row("(before training)", f"{p0['self']:.1f}", "", f"{p0['others']:.1f}",
                          "", "")
    for res in results:
        m = res["metrics"]
        up = res["cost"]["comm_bytes_up_per_round"]
        table.add_row(res["method"]["name"], *(f"{m[k]:.1f}" for k in (
            "self_a_last", "self_a_auc", "others_a_last", "others_a_auc")),
            f"{sum(up) / len(up) / 1e6:.3f}")
    Console().print(table)
    print(calibration_summary())
    print(f"runs, data and models are under {args.out}")
    settings = QUICKSTART.eval_args()
    settings[settings.index("--rounds") + 1] = str(args.rounds)
    settings[settings.index("--mc-scoring") + 1] = args.mc_scoring
    if args.seed:
        settings += ["--seed", str(args.seed)]
    if args.pretrain:
        settings += ["--model-cache", str(Path(args.out) / "models")]
    print(f"another method with the same settings: drake eval --method fedmosaic --data "
          f"{Path(args.out) / 'data' / 'drake-synth'} {' '.join(settings)} --eval-initial "
          f"--out {Path(args.out) / 'runs' / 'fedmosaic'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from drake.report import write_report

    summary = write_report([Path(d) for d in args.runs], Path(args.out))
    groups = sum(len(p.groups) for p in summary.panels)

    def n(count: int, what: str) -> str:
        return f"{count} {what}{'' if count == 1 else 's'}"

    print(f"report of {n(summary.n_files, 'results file')} ({n(groups, 'method configuration')} "
          f"on {n(len(summary.panels), 'scenario')}, {n(len(summary.plots), 'plot')}): "
          f"{summary.index}")
    return 0


def _progress_rounds(desc: str):
    from tqdm.auto import tqdm

    def wrap(iterable, total):
        return tqdm(iterable, total=total, desc=desc, unit="round", file=sys.stderr,
                    disable=None)

    return wrap


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (which command, what is wrong, where the help is)
    rather than the usage block followed by the message."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def make_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    from drake.quickstart import QUICKSTART

    parser = OneLineParser(
        prog="drake", description="DRAKE: build, run and score personalized federated learning "
        "benchmarks for multi-modal foundation models.")
    parser.add_argument("--version", action="version", version=f"drake {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("build", help="build a benchmark into parquet with a checksummed manifest")
    p.add_argument("--benchmark", default="drake",
                   help="registered benchmark name (default: drake, the real benchmark, which "
                   "needs the Hugging Face Hub; drake-synth builds offline)")
    p.add_argument("--out", default="./data", help="parent folder (default ./data)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    p.add_argument("--num-proc", type=int, default=1, help="parallel worker processes")
    p.add_argument("--size", default=None,
                   help="size preset of a synthetic benchmark: tiny, small (default), medium, "
                   "large")
    p.add_argument("--image-size", type=int, default=64, help="side of generated images")
    p.add_argument("--overwrite", action="store_true", help="replace an existing build")
    p.add_argument("--tasks", action="append", default=[], metavar="ID[,ID...]",
                   help="build only these tasks of the benchmark (repeatable or comma-separated)")
    p.add_argument("--source-dir", default=None,
                   help="real benchmarks: read the source files from this folder (e.g. "
                   "DIR/<Dataset>.tar or DIR/<Dataset>/ for DRAKE) instead of the Hub")
    p.add_argument("--revision", default=None,
                   help="real benchmarks: branch, tag or commit of the source Hub repo")
    p.add_argument("--cache-dir", default=None,
                   help="real benchmarks: Hugging Face cache (default $HF_HOME/hub)")
    p.add_argument("--strict", action="store_true",
                   help="fail if any source row is rejected (default: skip it and list it in "
                   "rejected.jsonl)")
    p.add_argument("--subsets", choices=("released", "by-content"), default="released",
                   help="Bongard-HOI's ambiguous subset ids: open dataset-<id>.json as the "
                   "released scenarios do (default, the paper's data), or match each task to "
                   "the file whose records carry its image count")
    p.add_argument("--allow-short", action="store_true",
                   help="build a task split that keeps no row, or far fewer than the release "
                   "holds, instead of failing; the manifest records the shortfall")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("download", help="fetch a prebuilt benchmark folder from the Hub and "
                       "verify every file against its manifest")
    p.add_argument("--benchmark", default="drake", help="benchmark name (default: drake)")
    p.add_argument("--out", default="./data", help="parent folder (default ./data)")
    p.add_argument("--repo", default=None,
                   help="Hub dataset repo (default: drake-pfl/<benchmark>, see drake.hub)")
    p.add_argument("--revision", default=None, help="branch, tag or commit (pin a commit for "
                   "byte-identical downloads)")
    p.add_argument("--cache-dir", default=None, help="Hugging Face cache (default $HF_HOME/hub)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing folder")
    p.set_defaults(func=cmd_download)

    p = sub.add_parser("push", help="verify a built folder and publish it, with its dataset "
                       "card, to a Hub dataset repo")
    p.add_argument("dir", help="a built benchmark folder (holds manifest.json)")
    p.add_argument("--repo", required=True, help="Hub dataset repo, e.g. drake-pfl/drake")
    p.add_argument("--revision", default=None, help="branch to push to (created if needed)")
    p.add_argument("--private", action="store_true", help="create the repo as private")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("verify", help="re-hash every shard of a build against its manifest")
    p.add_argument("dir", help="a built benchmark folder (holds manifest.json)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("info", help="tasks, clients, sizes and image counts of a build")
    p.add_argument("dir", help="a built benchmark folder")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("partition", help="add a scenario (partition + stream) to a build "
                       "without rebuilding its tasks")
    p.add_argument("dir", help="a built benchmark folder")
    p.add_argument("--scenario", required=True,
                   help="a scenario the benchmark declares, or a new name with --rule")
    p.add_argument("--rule", default=None, help="partition rule for a new scenario: by_task, "
                   "iid, dirichlet, pathological, shard, by_domain, quantity_skew")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="rule parameter, e.g. --param alpha=0.1 --param num_clients=20")
    p.add_argument("--order", default="static", choices=["static", "dynamic"])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--rounds-per-task", type=int, default=None)
    p.add_argument("--seed", type=int, default=None, help="default: the build's seed")
    p.add_argument("--replace", action="store_true", help="recompute an existing scenario")
    p.set_defaults(func=cmd_partition)

    p = sub.add_parser("eval", help="run a federated method on a built benchmark scenario")
    p.add_argument("--method", required=True, help="a method name (`drake methods`)")
    p.add_argument("--data", default="./data", help="the --out folder of `drake build`, or a "
                   "built benchmark folder")
    p.add_argument("--benchmark", default=None,
                   help="benchmark folder under --data (e.g. drake-synth)")
    p.add_argument("--scenario", default="dynamic", help="a scenario of the build")
    p.add_argument("--rounds", type=int, default=None,
                   help="runtime rounds (the scenario's stream is mapped onto them)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--preset", choices=PRESET_NAMES, default="cpu",
                   help="where the budget and evaluation settings below start from: cpu (the "
                   "offline budget, default) or paper (the benchmark's published protocol; "
                   "printed with its departures); a value given explicitly wins")
    p.add_argument("--local-steps", type=int, default=None,
                   help="local steps per round (default: matched to --compute-budget; wins "
                   "over a preset's local epochs)")
    p.add_argument("--compute-budget", type=int, default=None,
                   help="SFT-equivalent local steps; each method gets its compute-matched share "
                   "(cpu preset: 20)")
    p.add_argument("--batch-size", type=int, default=None, help="(cpu preset: 4)")
    p.add_argument("--lr", type=float, default=None, help="(cpu preset: 2e-3)")
    p.add_argument("--eval-every", type=int, default=None,
                   help="rounds between evaluations; the last round is always scored (cpu "
                   "preset: 1)")
    p.add_argument("--eval-per-task", type=_count_or_all, default=None, metavar="N|all",
                   help="test samples per task at each evaluation point (cpu preset: 20)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="longest generated answer (default: the protocol's, 8 for multiple "
                   "choice, 64 for generation)")
    p.add_argument("--frac", type=float, default=None,
                   help="fraction of clients per round (cpu preset: 1)")
    p.add_argument("--first-round-all", action=argparse.BooleanOptionalAction, default=None,
                   help="every client trains in round 0, then --frac (pFedMMA's sampling; its "
                   "paper presets: on)")
    p.add_argument("--local-epochs", type=float, default=None,
                   help="local epochs per round instead of a step budget: each client takes "
                   "ceil(epochs x its rows / batch size) steps (pFedMMA's paper presets: 1)")
    p.add_argument("--mc-scoring", choices=["generate", "loglik"], default="generate")
    p.add_argument("--model-mix", default=None, help="a model mix of the benchmark")
    p.add_argument("--model", default=None, metavar="NAME",
                   help="one model for every client instead of a mix: a zoo name or Hugging "
                   "Face id (`drake models list`), e.g. clip-vit-b16 on a CLIP benchmark")
    p.add_argument("--model-cache", default=None,
                   help="model cache of the tiny models' pretrained weights, as `drake models "
                   "pretrain --cache-dir DIR` or `drake quickstart --pretrain` (OUT/models) "
                   "write it (default: your cache, else the weights shipped with drake)")
    p.add_argument("--untrained", action="store_true", help="use randomly initialised models")
    p.add_argument("--on-client-error", choices=["stop", "skip"], default="stop")
    p.add_argument("--runtime", choices=["local", "flower"], default="local",
                   help="local: every client in this process (default, the fast path); "
                   "flower: each client in a Flower ClientApp, simulated on this machine, or "
                   "on a SuperLink's SuperNodes with --superlink (needs drake-pfl[flower])")
    p.add_argument("--supernodes", type=int, default=None, metavar="N",
                   help="Flower simulation: SuperNodes to simulate (default: one per client)")
    p.add_argument("--superlink", default=None, metavar="NAME",
                   help="Flower deployment: submit the run with `flwr run` to this SuperLink "
                   "connection of $FLWR_HOME/config.toml (see the README)")
    p.add_argument("--eval-initial", action="store_true",
                   help="also score the models before training (metrics.jsonl round 0)")
    p.add_argument("--eval-unseen", action=argparse.BooleanOptionalAction, default=None,
                   help="after the last round, score every client's final model on the "
                   "benchmark's unseen tasks (unseen_a_last in results.json; paper preset on "
                   "DRAKE, HFLB and drake-synth: on; cpu preset: off)")
    p.add_argument("--fast-adapt", type=int, default=0, metavar="N",
                   help="after the last round, fine-tune each architecture's aggregated model, "
                   "and the pretrained model with fresh adapters, on every unseen task for N "
                   "iterations (FedMosaic's Fig. 5: 200) and write the curves into "
                   "results.json (fast_adaptation; local runtime)")
    p.add_argument("--fast-adapt-every", type=int, default=25, metavar="K",
                   help="score the fast-adapting models every K iterations (default 25)")
    p.add_argument("--eval-tasks", choices=["started", "all"], default="started",
                   help="tasks Self/Others average at each point: those with data arrived by "
                   "then (default, as the FedMosaic code) or all of the scenario's")
    p.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE",
                   help="method hyper-parameter, e.g. --hp lam=0.01")
    p.add_argument("--out", default=None, help="run directory (resumed if it holds a checkpoint)")
    p.add_argument("--dry-run", action="store_true",
                   help="train nothing: print the resolved protocol of --benchmark NAME, load "
                   "its public set from the Hub cache and run the method's set-up (FedMosaic's "
                   "alignment) on the tiny models standing in for the mix's")
    p.add_argument("--cache-dir", default=None,
                   help="Hub cache the dry run reads the public set from (default: your "
                   "Hugging Face cache)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("quickstart", help="offline end to end: build drake-synth, load the "
                       "pretrained tiny models, run sft/fedavg/ditto, print Self/Others")
    p.add_argument("--out", default="./drake-quickstart")
    p.add_argument("--methods", nargs="+", default=["sft", "fedavg", "ditto"])
    p.add_argument("--size", default="small")
    p.add_argument("--rounds", type=int, default=QUICKSTART.rounds)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mc-scoring", choices=["generate", "loglik"],
                   default=QUICKSTART.mc_scoring,
                   help="how multiple-choice answers are scored (loglik suits tiny models)")
    p.add_argument("--pretrain", action="store_true",
                   help="pretrain the tiny models into OUT/models instead of loading the shipped "
                   "weights (about two and three quarter hours on two cores)")
    p.set_defaults(func=cmd_quickstart)

    p = sub.add_parser("report", help="tables (mean ± std, 95%% interval over seeds), plots and "
                       "a static page from run folders of `drake eval`")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="run folders (every results*.json in each), results files, or folders "
                   "of run folders; seeds of one method and config are grouped")
    p.add_argument("--out", required=True, help="output folder (table.md, table.csv, plots/, "
                   "index.html)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("methods", help="list the federated methods")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("benchmarks", help="list the registered benchmarks")
    p.set_defaults(func=cmd_benchmarks)

    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    wanted = words[0] if words else None
    for command, (module_name, summary) in PLUGINS.items():
        if wanted is None or wanted == command:
            add = importlib.import_module(module_name).add_cli
            add(sub)
        else:
            sub.add_parser(command, help=summary, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("drake: interrupted", file=sys.stderr)
        return 130
    except (DrakeError, ValueError, OSError) as exc:
        if args.verbose:  # a user error is one line; --verbose still shows where it came from
            log.error("traceback", exc_info=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            print(f"drake: error: the disk is full ({_one_line(exc)}); free space or write "
                  f"elsewhere (--out), then run the command again: builds and runs resume "
                  f"where they stopped", file=sys.stderr)
            return 2
        print(f"drake: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except MemoryError:
        print("drake: error: out of memory; a source or build file may be damaged or hostile "
              "(`drake verify DIR` checks a build), or give the command more memory",
              file=sys.stderr)
        return 2
    except Exception as exc:  # a bug, not a user error: still one line, traceback on request
        if args.verbose:
            log.error("traceback", exc_info=True)
        if type(exc).__module__.split(".")[0] == "pyarrow":
            print(f"drake: error: a parquet or Arrow file could not be read ({_one_line(exc)}); "
                  f"check the build with `drake verify DIR`", file=sys.stderr)
            return 2
        print(f"drake: internal error: {type(exc).__name__}: {_one_line(exc)}; rerun with "
              f"--verbose for the traceback, and please report it", file=sys.stderr)
        return 3


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line (some libraries' messages span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
