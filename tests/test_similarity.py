"""Similarity ratios, Eq. (19) (learning/algorithms/dofed_spp/similarity.py): by hand, limits, batched = naive loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from edgesim.learning.algorithms.dofed_spp.similarity import (
    check_bound,
    cross_entropy_losses,
    device_similarity,
    flatten_states,
    gradient_norms,
    pairwise_distances,
    similarity_ratios,
)

# Two devices, γ = 0.5.
TARGET = [2.0, 1.0]  # l(θ_n^tar; D_{n,l})
REC = [[1.0, 3.0], [0.5, 0.2]]  # [n, i] = l(θ_i^rec; D_{n,l})
DIST = [[2.0, 4.0], [1.0, 0.5]]  # [n, i] = ‖θ_i^rec − θ_n^{rec,prev}‖


def test_eq19_by_hand_with_g1_g2_zero():
    # row 0: γL = 0.5·[1, −1] = [0.5, −0.5] → s = [0.5/2, 0] → ρ = [1, 0]
    # row 1: γL = 0.5·[0.5, 0.8] = [0.25, 0.4] → s = [0.25/1, 0.4/0.5] = [0.25, 0.8] → ρ = [5/21, 16/21]
    rho, kept = similarity_ratios(TARGET, REC, DIST, gamma=0.5)
    assert np.allclose(rho, [[1.0, 0.0], [5 / 21, 16 / 21]], rtol=0, atol=1e-15)
    assert not kept.any()


def test_eq19_by_hand_with_bounds():
    # G1 = 1, G2 = 2: numerator = γL + 1 + 0.5·2 = γL + 2
    # row 0: [2.5, 1.5] / [2, 4] = [1.25, 0.375] → [10/13, 3/13]
    # row 1: [2.25, 2.4] / [1, 0.5] = [2.25, 4.8] → [15/47, 32/47]
    rho, _ = similarity_ratios(TARGET, REC, DIST, gamma=0.5, g1=1.0, g2=2.0)
    assert np.allclose(rho, [[10 / 13, 3 / 13], [15 / 47, 32 / 47]], rtol=0, atol=1e-15)
    # per-device bounds: device 0 gets G1 = 1, G2 = 2, device 1 none
    rho2, _ = similarity_ratios(TARGET, REC, DIST, gamma=0.5, g1=[1.0, 0.0], g2=[2.0, 0.0])
    assert np.allclose(rho2, [[10 / 13, 3 / 13], [5 / 21, 16 / 21]], rtol=0, atol=1e-15)


def test_a_huge_g1_is_inverse_distance():
    rho, _ = similarity_ratios(TARGET, REC, DIST, gamma=0.5, g1=1e12)
    inv = 1.0 / np.asarray(DIST)
    assert np.allclose(rho, inv / inv.sum(1, keepdims=True), rtol=1e-9)


def test_rows_without_a_positive_score_keep_the_previous_ratios():
    target = [0.1, 2.0]
    rho, kept = similarity_ratios(target, REC, DIST, gamma=0.5)
    assert kept.tolist() == [True, False]
    assert np.allclose(rho[0], [0.5, 0.5])  # no previous row: uniform
    prev = np.array([[0.3, 0.7], [0.0, 1.0]])
    rho, _ = similarity_ratios(target, REC, DIST, gamma=0.5, previous=prev)
    assert np.allclose(rho[0], [0.3, 0.7])
    assert np.allclose(rho.sum(1), 1.0)


def test_zero_distance_and_nan_losses():
    rho, _ = similarity_ratios([1.0, 1.0], [[0.0, 0.5], [np.nan, 0.0]], [[0.0, 1.0], [1.0, 1.0]], gamma=1.0)
    # device 0: s = [1/1e-12, 0.5/1] → almost all weight on model 0; device 1: NaN counts as 0
    assert rho[0, 0] == pytest.approx(1.0) and rho[1].tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="gamma"):
        similarity_ratios(TARGET, REC, DIST, gamma=0.0)
    with pytest.raises(ValueError, match="shapes"):
        similarity_ratios(TARGET, REC, [[1.0]], gamma=1.0)


def test_check_bound():
    assert check_bound("g1", "empirical") == "empirical" and check_bound("g2", 3) == 3.0
    for bad in ("big", -1.0, True, float("nan")):
        with pytest.raises(ValueError, match="g1"):
            check_bound("g1", bad)


# --------------------------------------------------------------------------- batched = naive


def _model():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _states(k, seed=0):
    out = []
    for s in range(k):
        torch.manual_seed(seed + s)
        out.append({n: v.detach().clone() for n, v in _model().state_dict().items()})
    return out


def _data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    sizes = [3, 5, 2, 4][:n]
    return [torch.randn(k, 4, generator=g) for k in sizes], [torch.randint(0, 3, (k,), generator=g) for k in sizes]


@pytest.mark.parametrize("vectorize", [True, False])
def test_losses_distances_and_gradients_equal_naive_loops(vectorize):
    model = _model()
    states = _states(5)
    xs, ys = _data(3)
    losses = cross_entropy_losses(model, states, xs, ys, batch_size=4, vectorize=vectorize)
    for m, s in enumerate(states):
        for j, (x, y) in enumerate(zip(xs, ys)):
            want = F.cross_entropy(torch.func.functional_call(model, s, (x,)).double(), y)
            assert float(losses[m, j]) == pytest.approx(float(want), rel=1e-6)
    flat = flatten_states(states)
    d = pairwise_distances(flat, chunk=7)
    for a, b in itertools.product(range(5), repeat=2):
        assert float(d[a, b]) == pytest.approx(float((flat[a].double() - flat[b].double()).norm()), abs=1e-6)
    g = gradient_norms(model, states, xs[0], ys[0], vectorize=vectorize)
    for m, s in enumerate(states):
        live = {k: v.clone().requires_grad_(True) for k, v in s.items()}
        F.cross_entropy(torch.func.functional_call(model, live, (xs[0],)), ys[0]).backward()
        want = torch.sqrt(sum(v.grad.double().pow(2).sum() for v in live.values()))
        assert float(g[m]) == pytest.approx(float(want), rel=1e-5)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("bounds", [("zero", "zero"), ("empirical", "empirical"), (0.3, 1.5)])
def test_device_similarity_equals_a_naive_loop(bounds, vectorize):
    model = _model()
    n = 3
    models = _states(5)  # 0..2: cached copies, 3..4: own models of devices 0, 1 (device 2 holds copy 2 as its own)
    index = np.array([[3, 0, 1], [2, 4, 1], [0, 1, 2]])
    reference = _states(3, seed=10)
    targets = _states(3, seed=20)
    xs, ys = _data(n)
    res = device_similarity(model, models, index, reference, targets, xs, ys, gamma=0.1, g1=bounds[0], g2=bounds[1],
                            vectorize=vectorize)

    def loss(s, k):
        return float(F.cross_entropy(torch.func.functional_call(model, s, (xs[k],)).double(), ys[k]))

    def flat(s):
        return torch.cat([v.reshape(-1).double() for v in s.values()])

    rec = np.array([[loss(models[index[k, i]], k) for i in range(n)] for k in range(n)])
    tar = np.array([loss(targets[k], k) for k in range(n)])
    dist = np.array([[float((flat(models[index[k, i]]) - flat(reference[k])).norm()) for i in range(n)] for k in range(n)])
    if bounds[0] == "empirical":
        g1 = [max(float((flat(models[a]) - flat(models[b])).norm()) for a in index[k] for b in index[k]) for k in range(n)]
        g2 = []
        for k in range(n):
            norms = []
            for j in index[k]:
                live = {key: v.clone().requires_grad_(True) for key, v in models[j].items()}
                F.cross_entropy(torch.func.functional_call(model, live, (xs[k],)), ys[k]).backward()
                norms.append(float(torch.sqrt(sum(v.grad.double().pow(2).sum() for v in live.values()))))
            g2.append(max(norms))
    elif bounds[0] == "zero":
        g1, g2 = 0.0, 0.0
    else:
        g1, g2 = bounds
    want, _ = similarity_ratios(tar, rec, dist, 0.1, g1, g2)
    assert np.allclose(res.rec_loss, rec, rtol=1e-6)
    assert np.allclose(res.target_loss, tar, rtol=1e-9)
    assert np.allclose(res.distance, dist, rtol=1e-6)
    assert np.allclose(res.rho, want, rtol=1e-5, atol=1e-9)
    assert np.allclose(res.rho.sum(1), 1.0)


def test_held_losses_vectorised_equals_per_model_calls():
    from edgesim.learning.algorithms.dofed_spp.similarity import held_losses

    model = _model()
    models = _states(5)
    xs, ys = _data(3)
    index = np.array([[3, 0, 1], [2, 4, 1], [0, 1, 2]])
    a = held_losses(model, models, index, xs, ys, vectorize=True)
    b = held_losses(model, models, index, xs, ys, vectorize=False)
    assert np.allclose(a, b, rtol=1e-6) and not np.isnan(a).any()
