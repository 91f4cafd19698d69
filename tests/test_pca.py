"""The BS's per-layer PCA downsizing (learning/algorithms/dofed_spp/pca.py, docs/studies/dofed_spp.md): round trip, error, bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

from edgesim.learning.algorithms.dofed_spp.pca import (
    compressed_bits,
    compressed_numbers,
    compression_plan,
    downsize,
    layer_rank,
    pca_matrices,
    reconstruct_matrix,
)
from edgesim.learning.models import build_model, model_bits


def _w(rows=8, cols=12, seed=0) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))


def test_full_rank_reconstructs_exactly():
    w = _w()
    assert torch.allclose(reconstruct_matrix(w, 8), w, atol=1e-5)
    state = build_model("cnn", (1, 8, 8), 10, seed=0).state_dict()
    back = downsize([state], 1.0)[0]
    for k in state:
        assert torch.equal(back[k], state[k])  # full rank: nothing is worth compressing, all sent as is


@pytest.mark.parametrize("rank", [1, 3, 5])
def test_rank_r_error_is_the_discarded_singular_values(rank):
    w = _w()
    centred = (w.double() - w.double().mean(0, keepdim=True)).numpy()
    s = np.linalg.svd(centred, compute_uv=False)
    err = float(((w.double() - reconstruct_matrix(w.double(), rank)) ** 2).sum())
    assert err == pytest.approx(float((s[rank:] ** 2).sum()), rel=1e-9)
    _, _, _, s_t = pca_matrices(w, rank)
    assert np.allclose(s_t.numpy(), s)


def test_matches_sklearn_pca():
    decomposition = pytest.importorskip("sklearn.decomposition")
    w = _w(10, 7, seed=1).double()
    pca = decomposition.PCA(n_components=3, svd_solver="full").fit(w.numpy())
    ref = pca.inverse_transform(pca.transform(w.numpy()))
    assert np.allclose(reconstruct_matrix(w, 3).numpy(), ref, atol=1e-10)


def test_bits_formula_by_hand():
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.Flatten(), nn.Linear(10, 8))
    state = model.state_dict()
    # conv weight (16, 27): r = ceil(0.25·16) = 4 → 4·(16 + 27) + 27 = 199 numbers (< 432)
    # linear weight (8, 10): r = ceil(0.25·8) = 2 → 2·(8 + 10) + 10 = 46 (< 80); biases 16 + 8 in full
    assert layer_rank(16, 27, 0.25) == 4 and layer_rank(8, 10, 0.25) == 2
    assert compressed_numbers(16, 27, 4) == 199 and compressed_numbers(8, 10, 2) == 46
    assert compressed_bits(state, 0.25) == 32 * (199 + 16 + 46 + 8)
    # at 0.5 the linear layer would need 4·18 + 10 = 82 >= 80 numbers: sent in full instead
    plan = {p.key: p for p in compression_plan(state, 0.5)}
    assert plan["2.weight"].rank is None and plan["2.weight"].numbers == 80
    assert plan["0.weight"].rank == 8
    assert compressed_bits(state, 1.0) == model_bits(model)


def test_downsize_is_batched_and_keeps_shapes_dtypes_and_integer_buffers():
    def bn_model(seed):
        torch.manual_seed(seed)
        m = nn.Sequential(nn.Conv2d(2, 6, 3), nn.BatchNorm2d(6), nn.Flatten(), nn.Linear(24, 5))
        m.train()(torch.randn(4, 2, 4, 4))  # move the running statistics and num_batches_tracked
        return m

    states = [bn_model(s).state_dict() for s in (0, 1)]
    out = downsize(states, 0.25)
    for s, o in zip(states, out):
        assert o.keys() == s.keys()
        for k in s:
            assert o[k].shape == s[k].shape and o[k].dtype == s[k].dtype
            if not s[k].is_floating_point() or s[k].dim() < 2:
                assert torch.equal(o[k], s[k])
    one = downsize(states[1:], 0.25)[0]  # each model is compressed on its own, batch or not
    for k in one:
        assert torch.allclose(one[k], out[1][k], atol=1e-6)
    assert compressed_bits(states[0], 0.25) < model_bits(bn_model(0))


def test_bad_inputs():
    with pytest.raises(ValueError, match="rank_fraction"):
        layer_rank(4, 4, 0.0)
    with pytest.raises(ValueError, match="rank_fraction"):
        compressed_bits({"w": torch.zeros(2, 2)}, 1.5)
    with pytest.raises(ValueError, match="rank"):
        reconstruct_matrix(_w(), 9)
