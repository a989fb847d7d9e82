"""Federated runtimes that run :mod:`baselines` methods on built benchmarks."""

from drake.runtime.local import LocalRuntime, RunConfig

__all__ = ["LocalRuntime", "RunConfig"]
