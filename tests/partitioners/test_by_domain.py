"""by_domain: each domain split among its own clients (DomainNet, Office-Caltech10)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import by_domain


def assert_cover(parts, n):
    flat = np.concatenate(parts)
    assert np.array_equal(np.sort(flat), np.arange(n))


@settings(max_examples=40, deadline=None)
@given(
    domains=st.lists(
        st.sampled_from(["sketch", "clipart", "real", "quickdraw"]), min_size=20, max_size=200
    ),
    data=st.data(),
    alpha=st.floats(0.1, 50),
    seed=st.integers(0, 2**32 - 1),
)
def test_by_domain_properties(domains, data, alpha, seed):
    domains = np.array(domains)
    labels = np.array(
        data.draw(st.lists(st.integers(0, 4), min_size=len(domains), max_size=len(domains)))
    )
    values, counts = np.unique(domains, return_counts=True)
    per = data.draw(st.integers(1, max(1, min(3, int(counts.min()) // 2))))
    if per * 2 > counts.min():
        return
    try:
        parts = by_domain(domains, labels, per, alpha, seed=seed, max_retries=20)
    except ValueError as err:
        assert "Lower min_size or raise alpha" in str(err) and "by_domain, domain" in str(err)
        return
    assert len(parts) == per * len(values)
    assert_cover(parts, len(labels))
    for j, p in enumerate(parts):
        # Client j belongs to the (j // per)-th domain in sorted order.
        assert set(domains[p].tolist()) == {values[j // per]}
        assert len(p) >= 2
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)
    again = by_domain(domains, labels, per, alpha, seed=seed, max_retries=20)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_domainnet_like_numbering_and_mapping():
    rng = np.random.default_rng(0)
    names = ["real", "clipart", "sketch"]
    domains = np.repeat(names, 200)
    labels = rng.integers(0, 10, 600)
    parts = by_domain(domains, labels, {"clipart": 1, "real": 2, "sketch": 3}, 0.3, seed=1)
    owners = [set(domains[p].tolist()) for p in parts]
    assert owners == [{"clipart"}, {"real"}, {"real"}, {"sketch"}, {"sketch"}, {"sketch"}]
    assert_cover(parts, 600)


def test_by_domain_seed_changes_split():
    domains = np.repeat(["a", "b"], 100)
    labels = np.tile(np.arange(5), 40)
    a = by_domain(domains, labels, 2, 1.0, seed=0)
    b = by_domain(domains, labels, 2, 1.0, seed=1)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_integer_domains():
    parts = by_domain([1, 0, 1, 0] * 10, [0, 1] * 20, 1, 1.0, seed=0)
    assert [len(p) for p in parts] == [20, 20]


@pytest.mark.parametrize(
    ("domains", "labels", "per", "alpha", "match"),
    [
        (["a", "b"], [0, 1, 0], 1, 1.0, "domains and labels must have the same length"),
        (["a", "b"], [0, 1], 1, 0.0, "alpha must be > 0"),
        (["a", "b"], [0, -1], 1, 1.0, "labels must be non-negative"),
        (["a", "b"], [0, 1], {"a": 1}, 1.0, "clients_per_domain has no entry for domain 'b'"),
        (["a", "a", "b", "b"], [0, 1, 0, 1], 2, 1.0, "domain 'a' has 2 samples, too few"),
        (["a", "b"], [0, 1], 0, 1.0, "clients_per_domain must be >= 1"),
    ],
)
def test_by_domain_bad_input(domains, labels, per, alpha, match):
    with pytest.raises(ValueError, match=match):
        by_domain(domains, labels, per, alpha, seed=0)
