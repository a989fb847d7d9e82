"""The benchmark registry: name -> :class:`~drake.specs.BenchmarkSpec`.

Every benchmark in the mission is declared in ``drake/catalog/``; this module is the one place
that names them. Synthetic benchmarks take a ``size`` preset (``drake.catalog.synth.SIZES``).
"""

from __future__ import annotations

from collections.abc import Callable

from drake.catalog import drake as _drake
from drake.catalog import others as _others
from drake.catalog import synth as _synth
from drake.errors import UnknownNameError
from drake.specs import BenchmarkSpec

SYNTHETIC = ("drake-synth", "synth-cls", "synth-caption", "tap-synth")


def _real() -> dict[str, Callable[[], BenchmarkSpec]]:
    table: dict[str, Callable[[], BenchmarkSpec]] = {
        "drake": _drake.drake_benchmark,
        "hflb": _drake.hflb_benchmark,
        "domainnet": _others.domainnet_benchmark,
        "office-caltech10": _others.office_benchmark,
        "tap": _others.tap_benchmark,
        "fedilora": _others.fedilora_benchmark,
    }
    for spec in (*_others.clip_benchmarks(), *_others.cifar_benchmarks()):
        table[spec.name] = (lambda s=spec: s)
    return table


_SYNTH: dict[str, Callable[[str], BenchmarkSpec]] = {
    "drake-synth": _synth.drake_synth_benchmark,
    "synth-cls": _synth.synth_cls_benchmark,
    "synth-caption": _synth.synth_caption_benchmark,
    "tap-synth": _synth.tap_synth_benchmark,
}


def benchmark_names() -> list[str]:
    """All registered benchmark names, real first, in declaration order."""
    return [*_real(), *_SYNTH]


def get_benchmark(name: str, size: str | None = None) -> BenchmarkSpec:
    """Look a benchmark up by name.

    Parameters
    ----------
    name : str
        A registered name (``drake benchmarks`` lists them).
    size : str, optional
        Size preset of a synthetic benchmark (tiny, small, medium, large); rejected for real
        benchmarks, whose sizes come from their sources.
    """
    if name in _SYNTH:
        preset = size or _synth.DEFAULT_SIZE
        if preset not in _synth.SIZES:
            raise UnknownNameError(
                f"unknown size {preset!r} for {name}; choose one of {sorted(_synth.SIZES)}"
            )
        return _SYNTH[name](preset)
    real = _real()
    if name in real:
        if size is not None:
            raise UnknownNameError(f"--size applies to synthetic benchmarks only, not {name}")
        return real[name]()
    raise UnknownNameError(
        f"unknown benchmark {name!r}; `drake benchmarks` lists the known ones: "
        f"{', '.join(benchmark_names())}"
    )


def list_benchmarks() -> list[BenchmarkSpec]:
    """Every registered benchmark, synthetic ones at their default size."""
    return [get_benchmark(n) for n in benchmark_names()]
