"""How the train pool is split over devices: pure functions of (labels, parameters, rng) returning index arrays.

- SUBSET and NORMAL: DoFed-SPP (Ching, Chang, Kuo, Wang; IEEE TSC 2023) §6.1,
  set sizes |train| = 500·C/𝒦, |target_l| = 10·C/𝒦, |target_ul| = 190·C/𝒦.
- Dirichlet with a labelled/unlabelled split: UM-pFSSL (Shi, Chen, Zhang;
  TNSE 2023) §V, per class p_c ~ Dir_K(α), per client (μ, 1−μ) ~ Dir_2(0.5).
- (IID, IID) / (IID, DIR) / (DIR, DIR): FedDure (Bai et al., AAAI 2024) §4.1.
- Labels-at-server: FedMix (arXiv 2110.13388) §V setup, after FedMatch
  (Jeong et al., ICLR 2021).
- IID: equal random shares (the plain baseline split).

Every function draws only from the ``rng`` it is given, so a fixed seed gives
the same split. Indices are int64, sorted, into the train pool (``test``:
into the test pool). Choices where the papers are silent: docs/use/data.md.

:data:`PARTITIONS` (at the end) is the registry of the scenario names: each
entry holds its split and the ``DataConfig`` fields it reads, so
``edgesim.learning.context.make_partition`` is a lookup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from edgesim.learning.registry import Registry

FEDDURE_MODES = ("iid_iid", "iid_dir", "dir_dir")


@dataclass(frozen=True, eq=False)
class ClientSplit:
    """One device's data, as indices.

    ``train``: fully labelled reciprocal-training set (DoFed-SPP; empty
    otherwise). ``labeled``: labelled data of the device's target
    distribution. ``unlabeled``: data whose labels the algorithm must not
    use. ``test``: indices into the TEST pool, the device's evaluation set.
    ``train_classes`` / ``target_classes``: the classes the sets are drawn
    from (``train_classes`` is empty when there is no train set).
    """

    train: np.ndarray
    labeled: np.ndarray
    unlabeled: np.ndarray
    test: np.ndarray
    train_classes: tuple[int, ...]
    target_classes: tuple[int, ...]

    @property
    def labeled_fraction(self) -> float:
        """μ = |labeled| / (|labeled| + |unlabeled|) (UM-pFSSL Eq. 2); 0 for a device with neither."""
        n = len(self.labeled) + len(self.unlabeled)
        return len(self.labeled) / n if n else 0.0


class DofedSizes(NamedTuple):
    """Per-device set sizes of DoFed-SPP §6.1."""

    train: int
    labeled: int
    unlabeled: int


# --------------------------------------------------------------------------
# Checks


def _count(name: str, value, minimum: int = 0) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum
    if not ok:
        raise ValueError(f"{name}(={value!r}) must be an integer >= {minimum}")
    return int(value)


def _positive(name: str, value) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}(={value!r}) must be a finite number > 0")
    return float(value)


def _labels(name: str, y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or y.size == 0):
        raise ValueError(f"{name} has dtype {y.dtype} and shape {y.shape}; expected a 1-D array of integer labels")
    y = y.astype(np.int64)
    if y.size and y.min() < 0:
        raise ValueError(f"{name} holds the negative label {int(y.min())}; expected labels >= 0")
    return y


def _setup(y_train, y_test, n_classes) -> tuple[np.ndarray, np.ndarray, int]:
    y_train, y_test = _labels("y_train", y_train), _labels("y_test", y_test)
    if y_train.size == 0:
        raise ValueError("y_train is empty; expected the labels of the train pool")
    seen = int(max(y_train.max(), y_test.max() if y_test.size else 0)) + 1
    if n_classes is None:
        return y_train, y_test, seen
    n_classes = _count("n_classes", n_classes, 1)
    if n_classes < seen:
        raise ValueError(f"n_classes(={n_classes}) is smaller than the largest label + 1 (= {seen})")
    return y_train, y_test, n_classes


def _by_class(y: np.ndarray, n_classes: int) -> list[np.ndarray]:
    """Indices of each class, ascending."""
    order = np.argsort(y, kind="stable")
    return np.split(order, np.cumsum(np.bincount(y, minlength=n_classes))[:-1])


def _sorted(parts) -> np.ndarray:
    parts = list(parts)
    return np.sort(np.concatenate(parts)).astype(np.int64) if parts else np.empty(0, dtype=np.int64)


def _classes_of(y: np.ndarray, *index_sets: np.ndarray) -> tuple[int, ...]:
    return tuple(int(c) for c in np.unique(y[np.concatenate(index_sets)])) if index_sets else ()


# --------------------------------------------------------------------------
# Class-balanced drawing without replacement


class _Pool:
    """Per-class shuffled indices; each index is handed out at most once."""

    def __init__(self, by_class: list[np.ndarray], rng: np.random.Generator):
        self._by_class, self._rng = by_class, rng
        self._shuffled: dict[int, np.ndarray] = {}
        self._used = np.zeros(len(by_class), dtype=np.int64)

    def available(self, classes) -> np.ndarray:
        return np.array([len(self._by_class[c]) - self._used[c] for c in classes], dtype=np.int64)

    def take(self, c: int, n: int) -> np.ndarray:
        if c not in self._shuffled:
            self._shuffled[c] = self._rng.permutation(self._by_class[c])
        start = self._used[c]
        self._used[c] += n
        return self._shuffled[c][start:start + n]


def _balanced_counts(size: int, available: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``size`` split over classes as evenly as possible; the remainder goes to the classes with most to spare."""
    base, extra = divmod(size, len(available))
    counts = np.full(len(available), base, dtype=np.int64)
    if extra:
        spare = available - base
        order = np.lexsort((rng.random(len(available)), -spare))  # most spare first, random among ties
        counts[order[:extra]] += 1
    return counts


def _draw(pool: _Pool, classes: tuple[int, ...], size: int, rng: np.random.Generator, what: str) -> np.ndarray:
    """A class-balanced set of ``size`` indices of ``classes``, or ValueError naming needed vs available."""
    if size == 0:
        return np.empty(0, dtype=np.int64)
    available = pool.available(classes)
    counts = _balanced_counts(size, available, rng)
    if np.any(counts > available):
        detail = ", ".join(f"class {c}: needs {n}, has {a}" for c, n, a in zip(classes, counts, available) if n > a)
        raise ValueError(f"the train pool cannot supply the {what} ({size} samples over classes {list(classes)}): "
                         f"{detail} left; lower the set sizes (scale), the number of devices, or pass disjoint=False")
    return _sorted(pool.take(c, n) for c, n in zip(classes, counts))


def _test_set(test_by_class: list[np.ndarray], classes, test_size, rng, what: str) -> np.ndarray:
    """All test-pool samples of ``classes`` (``test_size`` None), else a class-balanced random subset."""
    if test_size is None:
        return _sorted(test_by_class[c] for c in classes)
    pool = _Pool(test_by_class, rng)
    available = pool.available(classes)
    counts = _balanced_counts(test_size, available, rng)
    if np.any(counts > available):
        detail = ", ".join(f"class {c}: needs {n}, has {a}" for c, n, a in zip(classes, counts, available) if n > a)
        raise ValueError(f"test_size(={test_size}) is more than the test pool holds for the {what}: {detail}")
    return _sorted(pool.take(c, n) for c, n in zip(classes, counts))


# --------------------------------------------------------------------------
# DoFed-SPP: SUBSET and NORMAL


def dofed_sizes(n_classes: int, n_clusters: int, scale: float = 1.0) -> DofedSizes:
    """DoFed-SPP §6.1 set sizes: |train| = 500·C/𝒦, |target_l| = 10·C/𝒦, |target_ul| = 190·C/𝒦.

    Each times ``scale``, rounded half to even, at least 1. E.g. CIFAR-10 with
    𝒦 = 5: (1000, 20, 380).
    """
    n_classes = _count("n_classes", n_classes, 1)
    n_clusters = _count("n_clusters", n_clusters, 1)
    scale = _positive("scale", scale)
    per = n_classes / n_clusters * scale
    return DofedSizes(*(max(1, round(k * per)) for k in (500, 10, 190)))


def class_clusters(n_classes: int, n_clusters: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """The C classes split at random into 𝒦 clusters of ⌊C/𝒦⌋; the C mod 𝒦 left over join distinct clusters."""
    n_classes = _count("n_classes", n_classes, 2)
    n_clusters = _count("n_clusters", n_clusters, 2)
    if n_clusters > n_classes:
        raise ValueError(f"n_clusters(={n_clusters}) must be <= the number of classes (= {n_classes})")
    perm = rng.permutation(n_classes)
    q = n_classes // n_clusters
    clusters = [list(perm[i * q:(i + 1) * q]) for i in range(n_clusters)]
    rest = perm[q * n_clusters:]
    for c, k in zip(rest, rng.choice(n_clusters, size=len(rest), replace=False)):
        clusters[k].append(c)
    return [tuple(sorted(int(c) for c in cl)) for cl in clusters]


def _cluster_pairs(n_devices: int, n_clusters: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(train cluster, target cluster) per device: rounds through shuffled lists of all ordered pairs a ≠ b."""
    pairs = [(a, b) for a in range(n_clusters) for b in range(n_clusters) if a != b]
    out: list[tuple[int, int]] = []
    while len(out) < n_devices:
        out.extend(pairs[i] for i in rng.permutation(len(pairs)))
    return out[:n_devices]


def _dofed_splits(y_train, y_test, n_classes, class_sets, rng, train_size, labeled_size, unlabeled_size,
                  test_size, disjoint) -> list[ClientSplit]:
    by_class, test_by_class = _by_class(y_train, n_classes), _by_class(y_test, n_classes)
    shared = _Pool(by_class, rng) if disjoint else None
    splits = []
    for k, (train_classes, target_classes) in enumerate(class_sets):
        pool = shared if shared is not None else _Pool(by_class, rng)
        splits.append(ClientSplit(
            train=_draw(pool, train_classes, train_size, rng, f"train set of device {k}"),
            labeled=_draw(pool, target_classes, labeled_size, rng, f"labelled target set of device {k}"),
            unlabeled=_draw(pool, target_classes, unlabeled_size, rng, f"unlabelled target set of device {k}"),
            test=_test_set(test_by_class, target_classes, test_size, rng, f"target classes of device {k}"),
            train_classes=train_classes, target_classes=target_classes))
    return splits


def _check_dofed_sizes(train_size, labeled_size, unlabeled_size, test_size):
    _count("train_size", train_size, 0)
    _count("labeled_size", labeled_size, 1)
    _count("unlabeled_size", unlabeled_size, 0)
    if test_size is not None:
        _count("test_size", test_size, 1)


def subset_partition(y_train, y_test, n_devices: int, n_clusters: int, rng: np.random.Generator,
                     train_size: int, labeled_size: int, unlabeled_size: int, test_size: int | None = None,
                     *, n_classes: int | None = None, disjoint: bool = True) -> list[ClientSplit]:
    """DoFed-SPP SUBSET: train set from one class cluster, target sets from another.

    Clusters from :func:`class_clusters`; devices' (train, target) cluster
    pairs go round all ordered pairs of distinct clusters in random order, so
    every cluster serves about equally often. Each set is class-balanced over
    its cluster. ``test``: the target classes' test-pool samples (all, or a
    class-balanced random ``test_size``). With ``disjoint`` no train-pool
    index is used twice across devices and roles; ``disjoint=False`` keeps
    only a device's own sets disjoint (needed for e.g. CIFAR-100 at the
    paper's sizes, 25 x 10 000 > 50 000).
    """
    y_train, y_test, n_classes = _setup(y_train, y_test, n_classes)
    n_devices = _count("n_devices", n_devices, 1)
    _check_dofed_sizes(train_size, labeled_size, unlabeled_size, test_size)
    clusters = class_clusters(n_classes, n_clusters, rng)
    class_sets = [(clusters[a], clusters[b]) for a, b in _cluster_pairs(n_devices, len(clusters), rng)]
    return _dofed_splits(y_train, y_test, n_classes, class_sets, rng, train_size, labeled_size, unlabeled_size,
                         test_size, disjoint)


def normal_partition(y_train, y_test, n_devices: int, rng: np.random.Generator,
                     train_size: int, labeled_size: int, unlabeled_size: int, test_size: int | None = None,
                     *, n_classes: int | None = None, min_classes: int = 2, max_classes: int = 10,
                     disjoint: bool = True) -> list[ClientSplit]:
    """DoFed-SPP NORMAL: per device, numbers of train and target classes each uniform in
    ``min_classes..min(max_classes, C)``, class sets uniform at random, both redrawn while identical.

    Sizes, balance, ``test`` and ``disjoint`` as in :func:`subset_partition`.
    """
    y_train, y_test, n_classes = _setup(y_train, y_test, n_classes)
    n_devices = _count("n_devices", n_devices, 1)
    _check_dofed_sizes(train_size, labeled_size, unlabeled_size, test_size)
    min_classes = _count("min_classes", min_classes, 1)
    max_classes = _count("max_classes", max_classes, min_classes)
    if min_classes >= n_classes:
        raise ValueError(f"min_classes(={min_classes}) must be < the number of classes (= {n_classes}), "
                         "or train and target class sets could never differ")
    high = min(max_classes, n_classes)

    def draw() -> tuple[int, ...]:
        k = int(rng.integers(min_classes, high + 1))
        return tuple(sorted(int(c) for c in rng.choice(n_classes, size=k, replace=False)))

    class_sets = []
    for _ in range(n_devices):
        train_classes, target_classes = draw(), draw()
        while train_classes == target_classes:
            train_classes, target_classes = draw(), draw()
        class_sets.append((train_classes, target_classes))
    return _dofed_splits(y_train, y_test, n_classes, class_sets, rng, train_size, labeled_size, unlabeled_size,
                         test_size, disjoint)


# --------------------------------------------------------------------------
# Dirichlet (UM-pFSSL), FedDure, labels-at-server, IID


def _dirichlet_assign(by_class: list[np.ndarray], n_clients: int, alpha: float, rng: np.random.Generator,
                      min_size: int, balance: bool, max_tries: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Per class, proportions p_c ~ Dir(α·1) over clients; class c's indices cut at cumsum(p_c)·n_c.

    Redrawn until every client holds >= ``min_size``. ``balance`` (the
    FedDure/NIID-Bench variant) zeroes p for clients already above the mean
    size. Returns the clients' sorted indices and the (C, K) proportions.
    """
    total = sum(len(ix) for ix in by_class)
    if min_size * n_clients > total:
        raise ValueError(f"system.n_devices = {n_clients}: each device needs at least {min_size} samples and the data "
                         f"set has {total} to split; expected at most {total // max(min_size, 1)} devices")
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        sizes = np.zeros(n_clients, dtype=np.int64)
        props = np.zeros((len(by_class), n_clients))
        for c, ix in enumerate(by_class):
            p = rng.dirichlet(np.full(n_clients, alpha))
            if balance:
                p = p * (sizes < total / n_clients)
                p = p / p.sum() if p.sum() > 0 else np.full(n_clients, 1.0 / n_clients)
            props[c] = p
            cuts = (np.cumsum(p) * len(ix)).astype(np.int64)[:-1]
            for k, part in enumerate(np.split(rng.permutation(ix), cuts)):
                parts[k].append(part)
                sizes[k] += len(part)
        if sizes.min() >= min_size:
            return [_sorted(p) for p in parts], props
    raise ValueError(f"no Dirichlet draw in max_tries(={max_tries}) gave every one of n_clients(={n_clients}) "
                     f"at least min_size(={min_size}) of {total} samples with alpha(={alpha}); "
                     "raise alpha, or give the clients more samples (data.train_pool_size)")


def _apportion(total: int, weights: np.ndarray) -> np.ndarray:
    """``total`` split in proportion to ``weights`` by largest remainders (sums exactly to ``total``)."""
    share = total * weights / weights.sum()
    counts = np.floor(share).astype(np.int64)
    counts[np.argsort(-(share - counts), kind="stable")[: total - counts.sum()]] += 1
    return counts


def _split_labeled(ix: np.ndarray, ratio_alpha: float, rng: np.random.Generator,
                   min_labeled: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(μ, 1−μ) ~ Dir_2(ratio_alpha); min(n, max(min_labeled, round(μ·n))) of the client's n indices become labelled.

    ``min_labeled = 0`` lets a client with round(μ·n) = 0 be fully unlabelled (UM-pFSSL's split allows it); the
    draws are the same for any ``min_labeled``, so only such clients change.
    """
    if len(ix) == 0:
        return ix, ix
    mu = rng.dirichlet((ratio_alpha, ratio_alpha))[0]
    n_labeled = min(len(ix), max(min_labeled, round(mu * len(ix))))
    perm = rng.permutation(ix)
    return np.sort(perm[:n_labeled]), np.sort(perm[n_labeled:])


def dirichlet_partition(y_train, y_test, n_clients: int, alpha: float, rng: np.random.Generator,
                        labeled_ratio_alpha: float = 0.5, min_size: int = 10, *, test_size: int | None = None,
                        n_classes: int | None = None, balance: bool = False,
                        max_tries: int = 1000, min_labeled: int = 1) -> list[ClientSplit]:
    """UM-pFSSL: per class p_c ~ Dir_K(α) splits the whole train pool; per client (μ, 1−μ) ~ Dir_2(0.5).

    Every train-pool index goes to exactly one client (redrawn until each
    has >= ``min_size``); a fraction μ_k of a client's data (rounded, at least
    ``min_labeled`` samples: 1 by default, 0 for the paper's split, where a
    client may hold no label) is labelled, the rest unlabelled. ``test`` has the client's label
    distribution: with ``test_size`` None the test pool is cut by the same
    p_c (disjoint across clients), else ``test_size`` samples per client
    apportioned to its train class counts.
    """
    y_train, y_test, n_classes = _setup(y_train, y_test, n_classes)
    n_clients = _count("n_clients", n_clients, 1)
    alpha = _positive("alpha", alpha)
    labeled_ratio_alpha = _positive("labeled_ratio_alpha", labeled_ratio_alpha)
    min_size = _count("min_size", min_size, 0)
    max_tries = _count("max_tries", max_tries, 1)
    min_labeled = _count("min_labeled", min_labeled, 0)
    if test_size is not None:
        _count("test_size", test_size, 1)
    parts, props = _dirichlet_assign(_by_class(y_train, n_classes), n_clients, alpha, rng, min_size, balance, max_tries)
    test_by_class = _by_class(y_test, n_classes)
    if test_size is None:
        test_parts = [[] for _ in range(n_clients)]
        for c, ix in enumerate(test_by_class):
            cuts = (np.cumsum(props[c]) * len(ix)).astype(np.int64)[:-1]
            for k, part in enumerate(np.split(rng.permutation(ix), cuts)):
                test_parts[k].append(part)
    splits = []
    for k, ix in enumerate(parts):
        labeled, unlabeled = _split_labeled(ix, labeled_ratio_alpha, rng, min_labeled)
        if test_size is None:
            test = _sorted(test_parts[k])
        elif len(ix) == 0:
            test = np.empty(0, dtype=np.int64)
        else:
            counts = _apportion(test_size, np.bincount(y_train[ix], minlength=n_classes).astype(float))
            short = [f"class {c}: needs {n}, has {len(test_by_class[c])}"
                     for c, n in enumerate(counts) if n > len(test_by_class[c])]
            if short:
                raise ValueError(
                    f"test_size(={test_size}) is more than the test pool holds for client {k}: {', '.join(short)}")
            test = _sorted(rng.choice(test_by_class[c], size=n, replace=False) for c, n in enumerate(counts) if n)
        splits.append(ClientSplit(train=np.empty(0, dtype=np.int64), labeled=labeled, unlabeled=unlabeled, test=test,
                                  train_classes=(), target_classes=_classes_of(y_train, ix)))
    return splits


def feddure_partition(y_train, y_test, n_clients: int, mode: str, rng: np.random.Generator,
                      labels_per_class: int = 5, alpha: float = 0.5, labeled_total_per_class: int | None = None,
                      *, min_size: int = 10, n_classes: int | None = None, balance: bool = True,
                      max_tries: int = 1000, test_size: int | None = None) -> list[ClientSplit]:
    """FedDure §4.1 (A, B) splits, A = labelled distribution, B = unlabelled distribution, disjoint.

    - IID labelled: every client gets exactly ``labels_per_class`` of each class.
    - DIR labelled: ``labeled_total_per_class`` per class (default
      ``labels_per_class · n_clients``, the paper's 500 for 100 clients) cut
      over clients by Dir(α); every client gets at least one.
    - IID unlabelled: the rest of each class dealt out evenly.
    - DIR unlabelled: the rest cut by a second, independent Dir(α)
      (each client >= ``min_size``).
    ``balance`` follows the official code's Dirichlet (no more to clients
    above the mean size). ``test``: the whole test pool (FedDure evaluates
    the global model on the test split), or with ``test_size`` one random
    subset of that many test samples, the same for every client.
    """
    y_train, y_test, n_classes = _setup(y_train, y_test, n_classes)
    n_clients = _count("n_clients", n_clients, 1)
    if mode not in FEDDURE_MODES:
        raise ValueError(f"mode(={mode!r}) must be one of {', '.join(map(repr, FEDDURE_MODES))}")
    labels_per_class = _count("labels_per_class", labels_per_class, 1)
    alpha = _positive("alpha", alpha)
    min_size = _count("min_size", min_size, 0)
    max_tries = _count("max_tries", max_tries, 1)
    if test_size is not None:
        test_size = _count("test_size", test_size, 1)
        if test_size > len(y_test):
            raise ValueError(f"test_size(={test_size}) exceeds the {len(y_test)} test samples")
    labeled_iid = mode.startswith("iid")
    per_class = labels_per_class * n_clients
    if labeled_total_per_class is not None:
        if labeled_iid:
            raise ValueError(f"labeled_total_per_class(={labeled_total_per_class}) applies to mode 'dir_dir' only; "
                             f"mode {mode!r} gives each client labels_per_class(={labels_per_class}) per class")
        per_class = _count("labeled_total_per_class", labeled_total_per_class, 1)
    by_class = [rng.permutation(ix) for ix in _by_class(y_train, n_classes)]
    short = [f"class {c}: needs {per_class}, has {len(ix)}" for c, ix in enumerate(by_class) if len(ix) < per_class]
    if short:
        raise ValueError(f"the train pool has too few samples for {per_class} labelled per class: {', '.join(short)}")
    labeled_pool, rest = [ix[:per_class] for ix in by_class], [ix[per_class:] for ix in by_class]

    if labeled_iid:
        labeled = [_sorted(ix.reshape(n_clients, labels_per_class)[k] for ix in labeled_pool) for k in range(n_clients)]
    else:
        labeled, _ = _dirichlet_assign(labeled_pool, n_clients, alpha, rng, 1, balance, max_tries)
    if mode.endswith("iid"):
        dealt = np.concatenate(rest)  # class by class, so striding deals each class out evenly
        unlabeled = [np.sort(dealt[k::n_clients]) for k in range(n_clients)]
    else:
        unlabeled, _ = _dirichlet_assign(rest, n_clients, alpha, rng, min_size, balance, max_tries)
    test = (np.arange(len(y_test), dtype=np.int64) if test_size is None
            else np.sort(rng.choice(len(y_test), size=test_size, replace=False)).astype(np.int64))
    return [ClientSplit(train=np.empty(0, dtype=np.int64), labeled=labeled[k], unlabeled=unlabeled[k], test=test.copy(),
                        train_classes=(), target_classes=_classes_of(y_train, labeled[k], unlabeled[k]))
            for k in range(n_clients)]


def labels_at_server_partition(y_train, y_test, n_clients: int, n_server_labeled: int, rng: np.random.Generator,
                               alpha: float | None = None, *, min_size: int = 10, n_classes: int | None = None,
                               balance: bool = False, max_tries: int = 1000,
                               test_size: int | None = None) -> tuple[np.ndarray, list[ClientSplit]]:
    """FedMix labels-at-server: a class-balanced labelled server set, unlabelled clients.

    ``n_server_labeled`` is the server set's total (FedMix: 1000 = 100 per
    class of CIFAR-10). The rest of the train pool goes to the clients,
    all unlabelled: equal random shares when ``alpha`` is None (IID), else
    per-class Dir(α) cuts, which skew both label mix and quantity (each client
    >= ``min_size``). ``test``: the whole test pool (the global model is
    evaluated), or ``test_size`` samples of it drawn uniformly (last, so the
    rest of the split does not depend on it; FedMix tests on 2,000 CIFAR-10
    images), the same for every client. Returns (server indices, client splits).
    """
    y_train, y_test, n_classes = _setup(y_train, y_test, n_classes)
    n_clients = _count("n_clients", n_clients, 1)
    n_server_labeled = _count("n_server_labeled", n_server_labeled, 1)
    min_size = _count("min_size", min_size, 0)
    max_tries = _count("max_tries", max_tries, 1)
    if alpha is not None:
        alpha = _positive("alpha", alpha)
    by_class = _by_class(y_train, n_classes)
    present = tuple(c for c in range(n_classes) if len(by_class[c]))
    pool = _Pool(by_class, rng)
    server = _draw(pool, present, n_server_labeled, rng, f"server set (n_server_labeled={n_server_labeled})")
    rest_mask = np.ones(len(y_train), dtype=bool)
    rest_mask[server] = False
    if alpha is None:
        rest = rng.permutation(np.flatnonzero(rest_mask))
        if len(rest) < n_clients * max(min_size, 1):
            raise ValueError(f"{len(rest)} samples left after the server set cannot give n_clients(={n_clients}) "
                             f"at least {max(min_size, 1)} each")
        clients = [np.sort(part) for part in np.array_split(rest, n_clients)]
    else:
        rest_by_class = [ix[rest_mask[ix]] for ix in by_class]
        clients, _ = _dirichlet_assign(rest_by_class, n_clients, alpha, rng, min_size, balance, max_tries)
    test = np.arange(len(y_test), dtype=np.int64)
    if test_size is not None:
        test_size = _count("test_size", test_size, 1)
        if test_size > len(y_test):
            raise ValueError(f"test_size(={test_size}) exceeds the {len(y_test)} test samples")
        test = np.sort(rng.choice(len(y_test), size=test_size, replace=False)).astype(np.int64)
    return server, [ClientSplit(train=np.empty(0, dtype=np.int64), labeled=np.empty(0, dtype=np.int64),
                                unlabeled=ix.astype(np.int64), test=test.copy(), train_classes=(),
                                target_classes=_classes_of(y_train, ix)) for ix in clients]


def iid_partition(y_train, y_test, n_clients: int, rng: np.random.Generator, labeled_fraction: float = 1.0,
                  *, test_size: int | None = None, n_classes: int | None = None) -> list[ClientSplit]:
    """Equal random shares of the train pool; ``labeled_fraction`` of each (at least one) is labelled.

    ``test``: equal random shares of the test pool (``test_size`` None), or
    ``test_size`` random test-pool samples per client.
    """
    y_train, y_test, n_classes = _setup(y_train, y_test, n_classes)
    n_clients = _count("n_clients", n_clients, 1)
    if not (isinstance(labeled_fraction, (int, float)) and 0 < labeled_fraction <= 1):
        raise ValueError(f"labeled_fraction(={labeled_fraction!r}) must be a number in (0, 1]")
    if n_clients > len(y_train):
        raise ValueError(f"n_clients(={n_clients}) exceeds the {len(y_train)} train samples")
    if test_size is not None:
        test_size = _count("test_size", test_size, 1)
        if test_size > len(y_test):
            raise ValueError(f"test_size(={test_size}) exceeds the {len(y_test)} test samples")
    shares = np.array_split(rng.permutation(len(y_train)), n_clients)
    tests = np.array_split(rng.permutation(len(y_test)), n_clients) if test_size is None else None
    splits = []
    for k, share in enumerate(shares):
        n_labeled = max(1, round(labeled_fraction * len(share)))
        test = tests[k] if tests is not None else rng.choice(len(y_test), size=test_size, replace=False)
        splits.append(ClientSplit(train=np.empty(0, dtype=np.int64), labeled=np.sort(share[:n_labeled]),
                                  unlabeled=np.sort(share[n_labeled:]), test=np.sort(test).astype(np.int64),
                                  train_classes=(), target_classes=_classes_of(y_train, share)))
    return splits


# --------------------------------------------------------------------------
# The registry: every ``[data] partition`` name, the DataConfig fields it reads, its split


@dataclass(frozen=True)
class PartitionSpec:
    """One ``[data] partition`` name.

    ``split(y_train, y_test, n_devices, rng, n_classes, **fields)`` returns
    ``(server_indices or None, [ClientSplit per device])``; ``fields`` are
    exactly the ``DataConfig`` fields named in ``reads`` (a field not listed
    there does not affect the split).
    """

    name: str
    reads: tuple[str, ...]
    split: Callable
    summary: str

    def apply(self, y_train, y_test, n_devices: int, rng: np.random.Generator, n_classes: int, cfg):
        """:attr:`split` with the ``reads`` fields taken from ``cfg`` (a ``DataConfig``)."""
        return self.split(y_train, y_test, n_devices, rng, n_classes, **{f: getattr(cfg, f) for f in self.reads})


def _iid(y_tr, y_te, n, rng, n_classes, labeled_fraction, test_size):
    return None, iid_partition(y_tr, y_te, n, rng, labeled_fraction, test_size=test_size, n_classes=n_classes)


def _dirichlet(y_tr, y_te, n, rng, n_classes, alpha, labeled_ratio_alpha, min_labeled, test_size):
    return None, dirichlet_partition(y_tr, y_te, n, alpha, rng, labeled_ratio_alpha, test_size=test_size,
                                     n_classes=n_classes, min_labeled=min_labeled)


def _subset(y_tr, y_te, n, rng, n_classes, n_clusters, size_scale, test_size):
    sizes = dofed_sizes(n_classes, n_clusters, size_scale)
    return None, subset_partition(y_tr, y_te, n, n_clusters, rng, *sizes, test_size, n_classes=n_classes)


def _normal(y_tr, y_te, n, rng, n_classes, n_clusters, size_scale, test_size):
    sizes = dofed_sizes(n_classes, n_clusters, size_scale)
    return None, normal_partition(y_tr, y_te, n, rng, *sizes, test_size, n_classes=n_classes)


def _feddure(mode: str) -> Callable:
    def split(y_tr, y_te, n, rng, n_classes, labels_per_class, alpha, test_size):
        return None, feddure_partition(y_tr, y_te, n, mode, rng, labels_per_class, alpha, n_classes=n_classes,
                                       test_size=test_size)

    return split


def hold_out_balanced(idx, y, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Split the indices ``idx`` (labels ``y[idx]``) into ``(kept, held)`` with ``n`` class-balanced held out.

    Balanced as every split here: ``n`` spread as evenly as the classes allow, the remainder to random
    classes (``rng``). Both parts sorted; ``n = 0`` holds nothing out. Used for the server's validation set
    (``[data] server_validation``).
    """
    idx = np.asarray(idx, dtype=np.int64)
    n = _count("n", n, 0)
    if n >= len(idx) and n:
        raise ValueError(f"cannot hold out {n} of {len(idx)} samples: some must be kept")
    sub = np.asarray(y)[idx]
    n_classes = int(sub.max()) + 1 if len(sub) else 0
    by_class = _by_class(sub, n_classes)
    present = tuple(c for c in range(n_classes) if len(by_class[c]))
    held_positions = _draw(_Pool(by_class, rng), present, n, rng, f"validation set (n={n})")
    keep = np.ones(len(idx), dtype=bool)
    keep[held_positions] = False
    return np.sort(idx[keep]), np.sort(idx[held_positions])


def _labels_at_server(y_tr, y_te, n, rng, n_classes, server_labeled, alpha, test_size):
    return labels_at_server_partition(y_tr, y_te, n, server_labeled, rng, alpha, n_classes=n_classes,
                                      test_size=test_size)


def _labels_at_server_iid(y_tr, y_te, n, rng, n_classes, server_labeled, test_size):
    return labels_at_server_partition(y_tr, y_te, n, server_labeled, rng, None, n_classes=n_classes,
                                      test_size=test_size)


PARTITIONS = Registry("partition")
"""Every partition by name; the single source of the names (``edgesim.learning.config`` validates against it)."""

for _spec in (
    PartitionSpec("iid", ("labeled_fraction", "test_size"), _iid, "equal random shares"),
    PartitionSpec("dirichlet", ("alpha", "labeled_ratio_alpha", "min_labeled", "test_size"), _dirichlet,
                  "UM-pFSSL: per-class Dir_K(alpha), labelled share per client ~ Dir_2"),
    PartitionSpec("subset", ("n_clusters", "size_scale", "test_size"), _subset,
                  "DoFed-SPP SUBSET: train and target sets from two class clusters"),
    PartitionSpec("normal", ("n_clusters", "size_scale", "test_size"), _normal,
                  "DoFed-SPP NORMAL: random class sets per device"),
    *(PartitionSpec(f"feddure_{mode}", ("labels_per_class", "alpha", "test_size"), _feddure(mode),
                    f"FedDure ({mode.replace('_', ', ').upper()}) labelled/unlabelled split") for mode in FEDDURE_MODES),
    PartitionSpec("labels_at_server", ("server_labeled", "alpha", "test_size"), _labels_at_server,
                  "FedMix: a class-balanced labelled set at the server, unlabelled clients"),
    PartitionSpec("labels_at_server_iid", ("server_labeled", "test_size"), _labels_at_server_iid,
                  "FedMix IID: a class-balanced labelled set at the server, equal random unlabelled shares"),
):
    PARTITIONS.add(_spec)


# The run's random streams of the data: the train pool drawn before partitioning, and the partition itself.
POOL_STREAM, PARTITION_STREAM = 0x9001, 0x5EED


def train_pool_indices(n_train: int, size: int, rng: np.random.Generator, name: str = "the data set") -> np.ndarray:
    """Sorted indices of a uniformly drawn ``size``-sample subset of ``n_train`` training samples."""
    if size > n_train:
        raise ValueError(f"train_pool_size(={size}) exceeds the {n_train} training samples of {name}")
    return np.sort(rng.choice(n_train, size=size, replace=False))


def device_splits(y_train, y_test, n_classes: int, cfg, n_devices: int, seed: int, name: str = "the data set"):
    """A run's data split, torch-free: ``(pool, server_indices or None, [ClientSplit per device])``.

    ``pool``: the train indices drawn first (``cfg.train_pool_size``; ``None``: the whole split), which the
    splits' train indices point into. The same streams as the run's (``[seed, POOL_STREAM]``,
    ``[seed, PARTITION_STREAM]``), so ``edgesim plan`` sees the very split a run trains on.
    """
    pool = None
    if cfg.train_pool_size is not None:
        pool = train_pool_indices(len(y_train), cfg.train_pool_size, np.random.default_rng([seed, POOL_STREAM]), name)
        y_train = np.asarray(y_train)[pool]
    spec = PARTITIONS.lookup(cfg.partition)
    server, splits = spec.apply(y_train, y_test, n_devices, np.random.default_rng([seed, PARTITION_STREAM]), n_classes,
                                cfg)
    return pool, server, splits
