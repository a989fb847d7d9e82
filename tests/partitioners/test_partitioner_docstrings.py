"""The examples in the partitioners' docstrings run and print what they say."""

import doctest
import importlib

import pytest

MODULES = [
    "partitioners.base_novel",
    "partitioners.dirichlet",
    "partitioners.dirichlet_hierarchical",
    "partitioners.domain",
    "partitioners.iid",
    "partitioners.manifest",
    "partitioners.missing",
    "partitioners.pathological",
    "partitioners.quantity",
    "partitioners.shard",
    "partitioners.stream",
    "partitioners.task",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0


def test_flower_docstring_example():
    pytest.importorskip("flwr_datasets")
    result = doctest.testmod(importlib.import_module("partitioners.flower"))
    assert result.attempted > 0 and result.failed == 0


def test_public_api_is_documented():
    import partitioners

    for name in partitioners.__all__:
        if name == "FunctionPartitioner":
            continue
        obj = getattr(partitioners, name)
        assert obj.__doc__ and len(obj.__doc__) > 40, name
