"""The README's picture of `drake report`: a small real run, reported, and its page's first screen.

Builds a tiny drake-synth, runs two methods with two seeds each on its dynamic scenario
(2 rounds, 2 local steps, 4 test samples per task, multiple choice by option likelihood; the
shipped tiny models), writes ``drake report`` of the four runs, and screenshots the report
page in headless Chromium (``/usr/bin/chromium``) into ``benchmarks/report_page.png`` as a
256-colour PNG. Finished runs in ``--out`` are reused, so a second call only redraws. It
prints the time of each step (about 4 minutes per run on two busy cores).

    python benchmarks/report_page.py [--out runs/report-page] [--methods sft fedavg]
        [--seeds 0 1] [--png benchmarks/report_page.png]

``--page PAGE`` screenshots a report page that exists instead (the README's picture is the
quickstart's: ``--page ./drake-quickstart/report/index.html``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
CHROMIUM = Path("/usr/bin/chromium")
EVAL = ["--scenario", "dynamic", "--rounds", "2", "--local-steps", "2", "--eval-per-task", "4",
        "--mc-scoring", "loglik"]


def drake(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "drake.cli", *args], check=True)


def screenshot(page: Path, png: Path, size: tuple[int, int] = (1280, 1300)) -> None:
    """The page's first screen, reduced to 256 colours (the README's image stays small)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "page.png"
        subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", "--disable-background-networking", "--hide-scrollbars",
                        f"--user-data-dir={Path(tmp) / 'profile'}",
                        f"--window-size={size[0]},{size[1]}", f"--screenshot={raw}",
                        page.as_uri()], check=True, capture_output=True)
        with Image.open(raw) as image:
            image.convert("RGB").quantize(256).save(png, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/report-page")
    parser.add_argument("--methods", nargs="+", default=["sft", "fedavg"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--png", default=str(HERE / "report_page.png"))
    parser.add_argument("--page", default=None,
                        help="screenshot this report page instead of making one")
    args = parser.parse_args()
    if args.page:
        screenshot(Path(args.page), Path(args.png))
        print(f"wrote {args.png} ({Path(args.png).stat().st_size / 1024:.0f} kB)")
        return
    out = Path(args.out)
    start = time.perf_counter()
    if not (out / "data" / "drake-synth" / "manifest.json").exists():
        drake("build", "--benchmark", "drake-synth", "--size", "tiny", "--out", str(out / "data"))
        print(f"built tiny drake-synth in {time.perf_counter() - start:.0f} s")
    runs = []
    for method in args.methods:
        for seed in args.seeds:
            run = out / "runs" / f"{method}-s{seed}"
            runs.append(run)
            if (run / "results.json").exists():
                continue
            began = time.perf_counter()
            drake("eval", "--method", method, "--data", str(out / "data" / "drake-synth"),
                  *EVAL, "--seed", str(seed), "--out", str(run))
            print(f"{method} seed {seed}: {time.perf_counter() - began:.0f} s")
    began = time.perf_counter()
    drake("report", *map(str, runs), "--out", str(out / "report"))
    print(f"report: {time.perf_counter() - began:.1f} s")
    screenshot(out / "report" / "index.html", Path(args.png))
    print(f"wrote {args.png} ({Path(args.png).stat().st_size / 1024:.0f} kB) in "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
