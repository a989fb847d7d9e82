"""The README's claims a new user acts on: its commands parse and do what the text says."""

import json
import re
import shlex
from pathlib import Path

from drake.cli import make_parser
from drake.layout import eval_build
from drake.quickstart import QUICKSTART

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def section(title: str) -> str:
    return README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def commands(text: str, name: str) -> list[list[str]]:
    """Every `.venv/bin/drake NAME ...` line of the text's bash blocks, as argv after `drake`."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words[:2] == [".venv/bin/drake", name]:
                    found.append(words[1:])
    return found


def test_the_methods_the_readme_lists_are_those_drake_methods_lists():
    from baselines import get_method, method_names

    shipped = [n for n in method_names()  # not those other tests register
               if get_method(n).__module__.startswith("baselines.")]
    listed = re.findall(r"`([a-z0-9][a-z0-9-]*)`", section("Methods").split(". Parameter averaging")[0])
    assert sorted(set(listed)) == sorted(shipped)


def test_the_quickstart_sample_counts_are_those_of_the_build():
    from drake.registry import get_benchmark

    size = make_parser().parse_args(["quickstart"]).size
    caps = {"train": 0, "test": 0}
    for task in get_benchmark("drake-synth", size=size).tasks:
        for split, n in task.caps.items():
            caps[split] += n
    claim = re.search(r"builds a small drake-synth \(([\d,]+) samples: ([\d,]+) train, "
                      r"([\d,]+) test", section("Quickstart"))
    assert claim, "the quickstart's first step no longer states its sample counts"
    total, train, test = (int(x.replace(",", "")) for x in claim.groups())
    assert (total, train, test) == (caps["train"] + caps["test"], caps["train"], caps["test"])


def test_the_eval_commands_repeat_the_quickstart_settings(tmp_path, monkeypatch):
    """The command given for right after the quickstart runs on its build, scored alike."""
    runs = commands(section("Quickstart"), "eval")
    assert len(runs) == 2
    parser = make_parser(["eval"])
    for argv in runs:
        args = parser.parse_args(argv)
        assert (args.scenario, args.rounds, args.compute_budget, args.eval_per_task,
                args.eval_every, args.mc_scoring) == (
            QUICKSTART.scenario, QUICKSTART.rounds, QUICKSTART.compute_budget,
            QUICKSTART.eval_per_task, QUICKSTART.eval_every, QUICKSTART.mc_scoring), argv
        assert args.local_steps is None and args.model_cache is None and not args.untrained
    after = parser.parse_args(runs[0])
    # the quickstart's layout: OUT/data/drake-synth (tests/runtime/test_quickstart.py builds it)
    out = Path(make_parser(["quickstart"]).parse_args(["quickstart"]).out)
    build_dir = tmp_path / out / "data" / "drake-synth"
    build_dir.mkdir(parents=True)
    (build_dir / "manifest.json").write_text(json.dumps({"benchmark": "drake-synth"}))
    monkeypatch.chdir(tmp_path)
    assert eval_build(Path(after.data), after.benchmark).resolve() == build_dir.resolve()


def test_the_readme_says_where_the_quickstart_pretrained_models_are():
    out = Path(make_parser(["quickstart"]).parse_args(["quickstart"]).out)
    assert f"`--model-cache ./{out / 'models'}`" in section("Quickstart")
    assert "--model-cache DIR" in section("Commands")


def test_the_report_section_s_command_parses_and_its_picture_is_small():
    text = section("Seeing results: `drake report`")
    (argv,) = commands(text, "report")
    args = make_parser(["report"]).parse_args(argv)
    assert args.runs == ["./drake-quickstart/runs"] and args.out == "./drake-quickstart/report"
    picture = re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", text).group(1)
    path = Path(__file__).resolve().parents[2] / picture
    assert path.is_file() and path.stat().st_size < 200_000
    assert "python benchmarks/report_page.py" in text
