"""Client splits (learning/data/partitions.py): sizes, class sets, disjointness, determinism, Dirichlet limits."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.learning.data.partitions import (
    ClientSplit,
    class_clusters,
    dirichlet_partition,
    dofed_sizes,
    feddure_partition,
    iid_partition,
    labels_at_server_partition,
    normal_partition,
    subset_partition,
)

SETTINGS = settings(max_examples=40, deadline=None)


def pool(per_class, n_classes, seed=0):
    """Shuffled labels with ``per_class`` samples of each class."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(n_classes), per_class))


Y10, YT10 = pool(600, 10), pool(100, 10, seed=1)


def rng(seed=0):
    return np.random.default_rng(seed)


def all_train_side(splits):
    return np.concatenate([np.concatenate([s.train, s.labeled, s.unlabeled]) for s in splits])


def assert_disjoint(splits):
    used = all_train_side(splits)
    assert len(np.unique(used)) == len(used)


def assert_same(a: list[ClientSplit], b: list[ClientSplit]):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for field in ("train", "labeled", "unlabeled", "test"):
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))
        assert (x.train_classes, x.target_classes) == (y.train_classes, y.target_classes)


def assert_index_arrays(splits):
    for s in splits:
        for field in ("train", "labeled", "unlabeled", "test"):
            arr = getattr(s, field)
            assert arr.dtype == np.int64 and arr.ndim == 1 and np.all(np.diff(arr) > 0)


# --- dofed_sizes and clusters -----------------------------------------------------


def test_dofed_sizes_hand_values():
    assert dofed_sizes(10, 5) == (1000, 20, 380)  # the paper's CIFAR-10 example
    assert dofed_sizes(100, 5) == (10000, 200, 3800)
    assert dofed_sizes(14, 5) == (1400, 28, 532)  # DBPedia: C/𝒦 = 2.8
    assert dofed_sizes(10, 5, scale=0.1) == (100, 2, 38)
    assert dofed_sizes(10, 5, scale=0.001) == (1, 1, 1)  # at least one each
    with pytest.raises(ValueError, match=r"scale\(=0\) must be a finite number > 0"):
        dofed_sizes(10, 5, scale=0)


def test_class_clusters_partition_the_classes():
    clusters = class_clusters(14, 5, rng())
    assert sorted(c for cl in clusters for c in cl) == list(range(14))
    assert sorted(len(cl) for cl in clusters) == [2, 3, 3, 3, 3]  # ⌊14/5⌋ = 2, 4 left over to distinct clusters
    with pytest.raises(ValueError, match=r"n_clusters\(=11\) must be <= the number of classes \(= 10\)"):
        class_clusters(10, 11, rng())


# --- SUBSET ---------------------------------------------------------------------


def test_subset_sizes_class_sets_and_disjointness():
    sizes = dofed_sizes(10, 5, scale=0.1)
    splits = subset_partition(Y10, YT10, 25, 5, rng(), *sizes)
    assert len(splits) == 25
    assert_index_arrays(splits)
    assert_disjoint(splits)
    clusters = {s.train_classes for s in splits} | {s.target_classes for s in splits}
    assert len(clusters) == 5 and sorted(c for cl in clusters for c in cl) == list(range(10))
    for s in splits:
        assert (len(s.train), len(s.labeled), len(s.unlabeled)) == (100, 2, 38)
        assert len(s.train_classes) == 2 and set(s.train_classes).isdisjoint(s.target_classes)
        assert set(Y10[s.train]) <= set(s.train_classes)
        assert set(Y10[s.labeled]) | set(Y10[s.unlabeled]) <= set(s.target_classes)
        # test: every test-pool sample of the target classes, nothing else
        np.testing.assert_array_equal(s.test, np.flatnonzero(np.isin(YT10, s.target_classes)))
        counts = np.bincount(Y10[s.train], minlength=10)[list(s.train_classes)]
        assert counts.max() - counts.min() <= 1  # class-balanced
    # every cluster is used as a train cluster about equally often (25 devices, 20 ordered pairs)
    uses = np.unique([s.train_classes for s in splits], axis=0, return_counts=True)[1]
    assert uses.min() >= 4 and uses.max() <= 6


def test_subset_test_size_and_uneven_clusters():
    y, yt = pool(300, 14), pool(50, 14, seed=1)
    splits = subset_partition(y, yt, 6, 5, rng(3), 30, 3, 10, test_size=7)
    for s in splits:
        assert len(s.test) == 7 and set(yt[s.test]) <= set(s.target_classes)
        assert len(s.train_classes) in (2, 3) and len(s.target_classes) in (2, 3)


def test_subset_is_deterministic_for_a_seed():
    a = subset_partition(Y10, YT10, 10, 5, rng(42), 50, 2, 20)
    b = subset_partition(Y10, YT10, 10, 5, rng(42), 50, 2, 20)
    c = subset_partition(Y10, YT10, 10, 5, rng(43), 50, 2, 20)
    assert_same(a, b)
    assert any(not np.array_equal(x.train, y.train) for x, y in zip(a, c))


def test_subset_pool_exhaustion_names_needed_and_available():
    with pytest.raises(ValueError, match=r"cannot supply the .* of device \d+ .*class \d+: needs \d+, has \d+"):
        subset_partition(Y10, YT10, 25, 5, rng(), *dofed_sizes(10, 5))  # 25 x 1400 > 6000
    # without cross-device disjointness the same sizes fit; a device's own sets stay disjoint
    splits = subset_partition(Y10, YT10, 25, 5, rng(), 500, 20, 380, disjoint=False)
    for s in splits:
        own = np.concatenate([s.train, s.labeled, s.unlabeled])
        assert len(np.unique(own)) == len(own) == 900
    assert len(np.unique(all_train_side(splits))) < len(all_train_side(splits))


def test_subset_bad_parameters():
    with pytest.raises(ValueError, match=r"n_devices\(=0\) must be an integer >= 1"):
        subset_partition(Y10, YT10, 0, 5, rng(), 10, 1, 1)
    with pytest.raises(ValueError, match=r"n_clusters\(=1\) must be an integer >= 2"):
        subset_partition(Y10, YT10, 3, 1, rng(), 10, 1, 1)
    with pytest.raises(ValueError, match=r"labeled_size\(=0\) must be an integer >= 1"):
        subset_partition(Y10, YT10, 3, 5, rng(), 10, 0, 1)
    with pytest.raises(ValueError, match=r"train_size\(=-1\)"):
        subset_partition(Y10, YT10, 3, 5, rng(), -1, 1, 1)
    with pytest.raises(ValueError, match=r"test_size\(=0\)"):
        subset_partition(Y10, YT10, 3, 5, rng(), 10, 1, 1, test_size=0)
    with pytest.raises(ValueError, match=r"y_train has dtype float64 .*expected a 1-D array of integer labels"):
        subset_partition(Y10.astype(float), YT10, 3, 5, rng(), 10, 1, 1)
    with pytest.raises(ValueError, match=r"y_test holds the negative label -1"):
        subset_partition(Y10, YT10 - 1, 3, 5, rng(), 10, 1, 1)
    with pytest.raises(ValueError, match=r"test_size\(=201\) is more than the test pool holds"):
        subset_partition(Y10, YT10, 3, 5, rng(), 10, 1, 1, test_size=201)  # 2 classes x 100


# --- NORMAL -----------------------------------------------------------------------


def test_normal_class_counts_and_sets():
    splits = normal_partition(Y10, YT10, 40, rng(5), 60, 2, 20)
    assert_index_arrays(splits)
    assert_disjoint(splits)
    sizes = set()
    for s in splits:
        assert 2 <= len(s.train_classes) <= 10 and 2 <= len(s.target_classes) <= 10
        assert s.train_classes != s.target_classes
        assert set(Y10[s.train]) <= set(s.train_classes)
        assert set(Y10[np.concatenate([s.labeled, s.unlabeled])]) <= set(s.target_classes)
        assert (len(s.train), len(s.labeled), len(s.unlabeled)) == (60, 2, 20)
        sizes.add(len(s.train_classes))
    assert len(sizes) >= 4  # the number of classes really varies
    assert_same(splits, normal_partition(Y10, YT10, 40, rng(5), 60, 2, 20))


def test_normal_caps_at_the_number_of_classes_and_needs_three():
    y, yt = pool(200, 3), pool(20, 3)
    for s in normal_partition(y, yt, 20, rng(), 10, 1, 5):
        assert len(s.train_classes) <= 3 and s.train_classes != s.target_classes
    with pytest.raises(ValueError, match=r"min_classes\(=2\) must be < the number of classes \(= 2\)"):
        normal_partition(pool(50, 2), pool(5, 2), 2, rng(), 10, 1, 5)
    with pytest.raises(ValueError, match=r"max_classes\(=1\) must be an integer >= 2"):
        normal_partition(Y10, YT10, 2, rng(), 10, 1, 5, max_classes=1)


# --- Dirichlet (UM-pFSSL) ------------------------------------------------------------


def class_mix(y, split):
    counts = np.bincount(y[np.concatenate([split.labeled, split.unlabeled])], minlength=10)
    return counts / counts.sum()


def test_dirichlet_covers_the_pool_once_and_splits_labels():
    splits = dirichlet_partition(Y10, YT10, 20, 0.5, rng(1))
    assert_index_arrays(splits)
    assert_disjoint(splits)
    assert len(all_train_side(splits)) == len(Y10)  # every sample goes to some client
    for s in splits:
        assert len(s.train) == 0 and len(s.labeled) >= 1 and len(s.labeled) + len(s.unlabeled) >= 10
        assert 0 < s.labeled_fraction <= 1
    # test pool cut by the same proportions: disjoint, complete
    tests = np.concatenate([s.test for s in splits])
    assert sorted(tests.tolist()) == list(range(len(YT10)))


def test_dirichlet_large_alpha_is_near_uniform_small_alpha_concentrated():
    flat = dirichlet_partition(Y10, YT10, 10, 1000.0, rng(2))
    assert max(np.abs(class_mix(Y10, s) - 0.1).max() for s in flat) < 0.05
    peaked = dirichlet_partition(Y10, YT10, 10, 0.05, rng(2), min_size=1)
    assert np.mean([class_mix(Y10, s).max() for s in peaked]) > 0.6


def test_dirichlet_labelled_fraction_follows_beta():
    splits = dirichlet_partition(Y10, YT10, 200, 1.0, rng(3), labeled_ratio_alpha=0.5, min_size=5)
    mu = np.array([s.labeled_fraction for s in splits])
    assert 0.4 < mu.mean() < 0.6  # Beta(0.5, 0.5) has mean 1/2 ...
    assert np.mean((mu < 0.1) | (mu > 0.9)) > 0.25  # ... and most of its mass near 0 and 1 (P ≈ 0.41)
    peaked = dirichlet_partition(Y10, YT10, 200, 1.0, rng(3), labeled_ratio_alpha=100.0, min_size=5)
    assert all(0.25 < s.labeled_fraction < 0.75 for s in peaked)


def test_dirichlet_test_size_follows_the_client_label_mix():
    splits = dirichlet_partition(Y10, YT10, 8, 0.3, rng(4), test_size=40)
    for s in splits:
        assert len(s.test) == 40 and len(np.unique(s.test)) == 40
        train_mix = class_mix(Y10, s)
        test_mix = np.bincount(YT10[s.test], minlength=10) / 40
        assert np.abs(train_mix - test_mix).max() <= 1 / 40 + 1e-9  # largest-remainder rounding
        assert set(YT10[s.test]) <= set(s.target_classes)


def test_dirichlet_is_deterministic_and_validates():
    assert_same(dirichlet_partition(Y10, YT10, 7, 0.5, rng(9)), dirichlet_partition(Y10, YT10, 7, 0.5, rng(9)))
    with pytest.raises(ValueError, match=r"alpha\(=0\) must be a finite number > 0"):
        dirichlet_partition(Y10, YT10, 5, 0, rng())
    with pytest.raises(ValueError, match=r"labeled_ratio_alpha\(=-1\)"):
        dirichlet_partition(Y10, YT10, 5, 1.0, rng(), labeled_ratio_alpha=-1)
    with pytest.raises(ValueError, match=r"n_clients\(=0\)"):
        dirichlet_partition(Y10, YT10, 0, 1.0, rng())
    with pytest.raises(ValueError, match=r"system.n_devices = 10: each device needs at least 700 samples and the data set has 6000"):
        dirichlet_partition(Y10, YT10, 10, 1.0, rng(), min_size=700)
    with pytest.raises(ValueError, match=r"no Dirichlet draw in max_tries\(=3\) .*alpha\(=0.01\)"):
        dirichlet_partition(Y10, YT10, 50, 0.01, rng(), min_size=100, max_tries=3)


# --- FedDure --------------------------------------------------------------------------


def test_feddure_iid_iid():
    splits = feddure_partition(Y10, YT10, 20, "iid_iid", rng(1), labels_per_class=5)
    assert_index_arrays(splits)
    assert_disjoint(splits)
    assert len(all_train_side(splits)) == len(Y10)
    for s in splits:
        assert np.bincount(Y10[s.labeled], minlength=10).tolist() == [5] * 10
        assert np.bincount(Y10[s.unlabeled], minlength=10).tolist() == [(600 - 5 * 20) // 20] * 10
        assert len(s.test) == len(YT10)


def test_feddure_iid_dir_keeps_iid_labels_and_skews_the_rest():
    splits = feddure_partition(Y10, YT10, 10, "iid_dir", rng(2), labels_per_class=3, alpha=0.1, min_size=1)
    assert_disjoint(splits)
    for s in splits:
        assert np.bincount(Y10[s.labeled], minlength=10).tolist() == [3] * 10
    assert np.mean([np.bincount(Y10[s.unlabeled], minlength=10).max() / len(s.unlabeled) for s in splits]) > 0.3


def test_feddure_dir_dir_totals_and_min_one_label():
    splits = feddure_partition(Y10, YT10, 20, "dir_dir", rng(3), labels_per_class=5)
    assert_disjoint(splits)
    labeled = np.concatenate([s.labeled for s in splits])
    assert np.bincount(Y10[labeled]).tolist() == [100] * 10  # labels_per_class x n_clients per class
    assert all(len(s.labeled) >= 1 and len(s.unlabeled) >= 10 for s in splits)
    custom = feddure_partition(Y10, YT10, 20, "dir_dir", rng(3), labeled_total_per_class=40)
    assert np.bincount(Y10[np.concatenate([s.labeled for s in custom])]).tolist() == [40] * 10
    assert_same(splits, feddure_partition(Y10, YT10, 20, "dir_dir", rng(3), labels_per_class=5))


def test_feddure_test_size_is_one_shared_subset_and_leaves_the_train_side_alone():
    full = feddure_partition(Y10, YT10, 10, "iid_dir", rng(4), labels_per_class=3)
    cut = feddure_partition(Y10, YT10, 10, "iid_dir", rng(4), labels_per_class=3, test_size=50)
    assert all(np.array_equal(s.test, cut[0].test) for s in cut)  # the same test set on every client
    assert len(cut[0].test) == len(np.unique(cut[0].test)) == 50 and cut[0].test.max() < len(YT10)
    for a, b in zip(full, cut):  # drawn after the train side: labelled and unlabelled sets unchanged
        assert np.array_equal(a.labeled, b.labeled) and np.array_equal(a.unlabeled, b.unlabeled)
    assert len(feddure_partition(Y10, YT10, 10, "iid_iid", rng(4), test_size=len(YT10))[0].test) == len(YT10)
    with pytest.raises(ValueError, match=r"test_size\(=100000\) exceeds"):
        feddure_partition(Y10, YT10, 10, "iid_iid", rng(4), test_size=100_000)


def test_feddure_bad_parameters():
    with pytest.raises(ValueError, match=r"mode\(='dir_iid'\) must be one of 'iid_iid', 'iid_dir', 'dir_dir'"):
        feddure_partition(Y10, YT10, 5, "dir_iid", rng())
    with pytest.raises(ValueError, match=r"too few samples for 700 labelled per class: class 0: needs 700, has 600"):
        feddure_partition(Y10, YT10, 100, "iid_iid", rng(), labels_per_class=7)
    with pytest.raises(ValueError, match=r"labeled_total_per_class\(=50\) applies to mode 'dir_dir' only"):
        feddure_partition(Y10, YT10, 5, "iid_dir", rng(), labeled_total_per_class=50)
    with pytest.raises(ValueError, match=r"labels_per_class\(=0\)"):
        feddure_partition(Y10, YT10, 5, "iid_iid", rng(), labels_per_class=0)


# --- labels at server, IID -----------------------------------------------------------------


def test_labels_at_server_iid_and_dirichlet():
    server, clients = labels_at_server_partition(Y10, YT10, 10, 1000, rng(1))
    assert np.bincount(Y10[server]).tolist() == [100] * 10
    assert_disjoint(clients)
    used = np.concatenate([server, all_train_side(clients)])
    assert sorted(used.tolist()) == list(range(len(Y10)))
    assert {len(c.unlabeled) for c in clients} == {500} and all(len(c.labeled) == 0 for c in clients)
    server2, skewed = labels_at_server_partition(Y10, YT10, 10, 95, rng(1), alpha=0.1, min_size=5)
    counts = np.bincount(Y10[server2])
    assert counts.sum() == 95 and counts.max() - counts.min() == 1
    assert len(np.intersect1d(server2, all_train_side(skewed))) == 0
    assert len({len(c.unlabeled) for c in skewed}) > 5  # quantity skew
    with pytest.raises(ValueError, match=r"n_server_labeled\(=0\)"):
        labels_at_server_partition(Y10, YT10, 10, 0, rng())
    with pytest.raises(ValueError, match=r"cannot supply the server set .*class \d+: needs 601, has 600"):
        labels_at_server_partition(Y10, YT10, 10, 6010, rng())



def test_labels_at_server_test_size_draws_one_test_set_for_every_client_last():
    server, clients = labels_at_server_partition(Y10, YT10, 10, 1000, rng(1))
    server2, small = labels_at_server_partition(Y10, YT10, 10, 1000, rng(1), test_size=50)
    assert np.array_equal(server, server2)
    assert all(np.array_equal(a.unlabeled, b.unlabeled) for a, b in zip(clients, small))
    assert all(len(c.test) == 50 and np.array_equal(c.test, small[0].test) for c in small)
    assert len(np.unique(small[0].test)) == 50
    with pytest.raises(ValueError, match="test_size"):
        labels_at_server_partition(Y10, YT10, 10, 1000, rng(1), test_size=len(YT10) + 1)

def test_iid_partition():
    splits = iid_partition(Y10, YT10, 7, rng(), labeled_fraction=0.1)
    assert_disjoint(splits)
    assert {len(s.labeled) + len(s.unlabeled) for s in splits} <= {857, 858}
    assert all(len(s.labeled) == round(0.1 * (len(s.labeled) + len(s.unlabeled))) for s in splits)
    assert sorted(np.concatenate([s.test for s in splits]).tolist()) == list(range(len(YT10)))
    with pytest.raises(ValueError, match=r"labeled_fraction\(=0\) must be a number in \(0, 1\]"):
        iid_partition(Y10, YT10, 7, rng(), labeled_fraction=0)


# --- properties on random label arrays -------------------------------------------------------

label_arrays = st.lists(st.integers(min_value=1, max_value=40), min_size=2, max_size=6).map(
    lambda counts: np.random.default_rng(len(counts)).permutation(np.repeat(np.arange(len(counts)), counts)))


@SETTINGS
@given(y=label_arrays, n_clients=st.integers(1, 8), alpha=st.floats(0.05, 50.0), seed=st.integers(0, 2**32 - 1))
def test_dirichlet_property_partition_of_the_pool(y, n_clients, alpha, seed):
    splits = dirichlet_partition(y, y, n_clients, alpha, rng(seed), min_size=0)
    used = all_train_side(splits)
    assert sorted(used.tolist()) == list(range(len(y)))  # disjoint and complete
    for s in splits:
        n = len(s.labeled) + len(s.unlabeled)
        assert (n == 0) or (1 <= len(s.labeled) <= n)
        assert set(y[s.test]) <= set(s.target_classes)


@SETTINGS
@given(n_classes=st.integers(2, 12), data=st.data())
def test_subset_property_classes_and_disjointness(n_classes, data):
    n_clusters = data.draw(st.integers(2, n_classes))
    n_devices = data.draw(st.integers(1, 10))
    y, yt = pool(60, n_classes), pool(5, n_classes, seed=1)
    splits = subset_partition(y, yt, n_devices, n_clusters, rng(data.draw(st.integers(0, 1000))), 3, 1, 2)
    assert_disjoint(splits)
    for s in splits:
        assert set(s.train_classes).isdisjoint(s.target_classes)
        assert set(y[s.train]) <= set(s.train_classes) and set(y[s.labeled]) <= set(s.target_classes)
        assert set(yt[s.test]) == set(s.target_classes)


@SETTINGS
@given(y=label_arrays, n_clients=st.integers(1, 5), seed=st.integers(0, 1000), mode=st.sampled_from(["iid_iid", "dir_dir"]))
def test_feddure_property_disjoint_and_complete(y, n_clients, seed, mode):
    if np.bincount(y).min() < n_clients:
        return  # one label per class per client must exist
    splits = feddure_partition(y, y, n_clients, mode, rng(seed), labels_per_class=1, min_size=0)
    used = all_train_side(splits)
    assert sorted(used.tolist()) == list(range(len(y)))
    labeled = np.concatenate([s.labeled for s in splits])
    assert np.bincount(y[labeled]).tolist() == [n_clients] * (y.max() + 1)
