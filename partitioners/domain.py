"""Feature-skew split: each domain split among its own clients (DomainNet, Office-Caltech10)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._common import group_by_client
from ._validate import check_alpha, check_int, check_labels, check_same_length, check_seed
from .dirichlet import dirichlet_client_of

__all__ = ["by_domain", "by_domain_train_test"]


def by_domain(
    domains: np.ndarray,
    labels: np.ndarray,
    clients_per_domain: int | Mapping[object, int],
    alpha: float,
    *,
    seed: int,
    min_size: int = 2,
    balance: bool = True,
    max_retries: int = 100,
) -> list[np.ndarray]:
    """Give every domain its own clients and split it among them by a label Dirichlet.

    This is the DomainNet / Office-Caltech10 protocol of pFedMMA (after FedBN):
    clients never share a domain, and inside a domain the label skew follows the
    per-class Dirichlet rule of :func:`partitioners.dirichlet` (with its capping
    rule when ``balance``, and redraws until every client of the domain has
    ``min_size`` samples; pFedMMA uses 2). The paper uses 1 or 2 clients per
    domain; the released script 5 per domain for DomainNet.

    Client numbering: domains are taken in sorted order (``np.unique`` order of the
    domain values), and the clients of the ``j``-th domain are numbered after all
    clients of domains ``0..j-1``. With 6 DomainNet domains and 5 clients each,
    clients 0-4 hold the first domain in sorted order ("clipart"), 5-9 the next,
    and so on. All domains draw from one ``np.random.default_rng(seed)``, in that
    order.

    Parameters
    ----------
    domains : array-like, shape (n,)
        Domain of every sample (strings or integers, sortable).
    labels : array-like of int, shape (n,)
        Class id of every sample.
    clients_per_domain : int or mapping
        Clients per domain: one number for all, or ``{domain: count}`` covering
        every domain.
    alpha : float
        Dirichlet concentration, > 0 (pFedMMA: 0.3).
    seed : int
        Seed of the generator.
    min_size : int, default 2
        Smallest client size within each domain.
    balance : bool, default True
        Apply the capping rule of :func:`partitioners.dirichlet` within each domain.
    max_retries : int, default 100
        Full redraws per domain before giving up.

    Returns
    -------
    list of numpy.ndarray
        One ascending int64 index array per client, numbered as above, covering
        ``range(n)`` exactly once.

    Raises
    ------
    ValueError
        For mismatched lengths, bad labels or alpha, a domain with more clients than
        its samples allow, a mapping that misses a domain, or when a domain's
        draw cannot meet ``min_size``.

    Examples
    --------
    >>> import numpy as np
    >>> domains = np.array(["sketch"] * 20 + ["clipart"] * 20)
    >>> labels = np.tile(np.arange(4), 10)
    >>> parts = by_domain(domains, labels, 2, 0.5, seed=0)
    >>> [sorted(set(domains[p].tolist())) for p in parts]
    [['clipart'], ['clipart'], ['sketch'], ['sketch']]
    """
    return _by_domain(domains, labels, clients_per_domain, alpha, seed=seed, min_size=min_size,
                      balance=balance, max_retries=max_retries)


def by_domain_train_test(
    domains: np.ndarray,
    labels: np.ndarray,
    test_domains: np.ndarray,
    test_labels: np.ndarray,
    clients_per_domain: int | Mapping[object, int],
    alpha: float,
    *,
    seed: int,
    min_size: int = 2,
    test_min_size: int = 1,
    balance: bool = True,
    max_retries: int = 100,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """:func:`by_domain` with each domain's test samples cut by the same per-class client
    proportions as its training samples (pFedMMA's ``data_utils.py`` for DomainNet and
    Office-Caltech10): a client's test set follows its own label skew. Every client needs
    ``test_min_size`` test samples too. Returns ``(train_parts, test_parts)``, clients
    numbered as :func:`by_domain` numbers them.
    """
    return _by_domain(domains, labels, clients_per_domain, alpha, seed=seed, min_size=min_size,
                      balance=balance, max_retries=max_retries, test_domains=test_domains,
                      test_labels=test_labels, test_min_size=test_min_size)


def _by_domain(domains, labels, clients_per_domain, alpha, *, seed, min_size, balance,
               max_retries, test_domains=None, test_labels=None, test_min_size=0):
    labels = check_labels(labels)
    dom = np.asarray(domains)
    if dom.ndim != 1:
        raise ValueError(f"domains must be one-dimensional, got shape {dom.shape}")
    check_same_length(dom, labels, "domains", "labels")
    paired = test_labels is not None
    if paired:
        test_labels = check_labels(test_labels)
        test_dom = np.asarray(test_domains)
        check_same_length(test_dom, test_labels, "test_domains", "test_labels")
        test_min_size = check_int(test_min_size, "test_min_size", minimum=0)
    alpha_arr = check_alpha(alpha)
    seed = check_seed(seed)
    min_size = check_int(min_size, "min_size", minimum=0)
    max_retries = check_int(max_retries, "max_retries", minimum=1)
    try:
        domain_values, domain_index = np.unique(dom, return_inverse=True)
    except TypeError:
        raise ValueError("domains must all be of one sortable type (all str or all int)") from None
    if paired:
        extra = sorted(set(test_dom.tolist()) - set(domain_values.tolist()))
        if extra:
            raise ValueError(f"test domains {extra[:5]} have no training sample")

    counts: list[int] = []
    for value in domain_values.tolist():
        if isinstance(clients_per_domain, Mapping):
            if value not in clients_per_domain:
                raise ValueError(f"clients_per_domain has no entry for domain {value!r}")
            counts.append(
                check_int(clients_per_domain[value], f"clients_per_domain[{value!r}]", minimum=1)
            )
        else:
            counts.append(check_int(clients_per_domain, "clients_per_domain", minimum=1))

    rng = np.random.default_rng(seed)
    client_of = np.empty(labels.shape[0], dtype=np.int64)
    test_of = np.empty(test_labels.shape[0], dtype=np.int64) if paired else None
    offset = 0
    for j, value in enumerate(domain_values.tolist()):
        idx = np.flatnonzero(domain_index == j)
        k = counts[j]
        if k * max(min_size, 1) > idx.shape[0]:
            raise ValueError(
                f"domain {value!r} has {idx.shape[0]} samples, too few for "
                f"clients_per_domain={k} with min_size={min_size}; lower either"
            )
        extra = {}
        if paired:
            t_idx = np.flatnonzero(test_dom == value)
            extra = {"test_labels": test_labels[t_idx], "test_min_size": test_min_size}
        local = dirichlet_client_of(
            labels[idx],
            k,
            alpha_arr,
            rng,
            min_size=min_size,
            balance=bool(balance),
            max_retries=max_retries,
            context=f"by_domain, domain {value!r}",
            **extra,
        )
        if paired:
            local, local_test = local
            test_of[t_idx] = offset + local_test
        client_of[idx] = offset + local
        offset += k
    if paired:
        return group_by_client(client_of, offset), group_by_client(test_of, offset)
    return group_by_client(client_of, offset)
