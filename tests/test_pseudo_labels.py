"""Ensemble pseudo-labels, Eq. (20) (learning/algorithms/dofed_spp/pseudo_labels.py): by hand, batched = per device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgesim.learning.algorithms.dofed_spp.pseudo_labels import (
    batched_pseudo_labels,
    ensemble_pseudo_labels,
    ensemble_scores,
    weight_matrix,
)

# Two models, three samples, three classes.
P = torch.tensor(
    [
        [[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]],  # model a
        [[0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.4, 0.1]],  # model b
    ]
)


def test_eq20_by_hand():
    # ρ = (0.75, 0.25): scores = 0.75·a + 0.25·b
    # sample 0: [0.475, 0.425, 0.1] → 0;  sample 1: [0.225, 0.45, 0.325] → 1;  sample 2: [0.2, 0.175, 0.625] → 2
    scores = ensemble_scores(P, torch.tensor([0.75, 0.25]))
    assert torch.allclose(scores, torch.tensor([[0.475, 0.425, 0.1], [0.225, 0.45, 0.325], [0.2, 0.175, 0.625]]))
    assert ensemble_pseudo_labels(P, torch.tensor([0.75, 0.25])).tolist() == [0, 1, 2]
    # ρ = (0.2, 0.8): sample 0: [0.2, 0.7, 0.1] → 1; sample 1: [0.28, 0.34, 0.38] → 2; sample 2: [0.42, 0.34, 0.24] → 0
    assert ensemble_pseudo_labels(P, torch.tensor([0.2, 0.8])).tolist() == [1, 2, 0]


def test_an_uncovered_device_labels_nothing():
    # every weight zero: no equal-weight mix of models its ratios call useless, no labels at all
    assert ensemble_pseudo_labels(P, torch.tensor([0.0, 0.0])).tolist() == [-1, -1, -1]
    owner = torch.tensor([0, 1, 1])
    w = torch.tensor([[0.75, 0.25], [0.0, 0.0]])
    assert batched_pseudo_labels(P, w, owner).tolist() == [0, -1, -1]
    # a single positive weight is enough to label: the model it weighs decides
    assert ensemble_pseudo_labels(P, torch.tensor([0.0, 1e-9])).tolist() == [1, 2, 0]


def test_ties_go_to_the_lowest_class():
    p = torch.tensor([[[0.5, 0.5]]])
    assert ensemble_pseudo_labels(p, torch.tensor([1.0])).tolist() == [0]


def test_weight_matrix_and_uncovered_devices():
    rho = np.array([[0.1, 0.6, 0.3], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    w = weight_matrix(rho, {0: (1, 2), 1: (0, 1), 2: ()}, models=[1, 2, 0])
    # device 0 uses models 1 and 2 (ρ 0.6, 0.3); device 1's models 0 and 1 both have ρ = 0 → a zero row
    assert np.allclose(w, [[0.6, 0.3, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="not among"):
        weight_matrix(rho, {0: (0,)}, models=[1])


def test_batched_equals_per_device():
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(3, 7, 4, generator=g), dim=-1)
    owner = torch.tensor([0, 0, 1, 1, 1, 2, 2])
    w = torch.tensor([[0.5, 0.5, 0.0], [0.1, 0.0, 0.9], [0.0, 0.0, 0.0]])
    labels = batched_pseudo_labels(probs, w, owner)
    for n in range(2):
        rows = owner == n
        assert labels[rows].tolist() == ensemble_pseudo_labels(probs[:, rows], w[n]).tolist()
    assert labels[owner == 2].tolist() == [-1, -1]  # a device with no model labels nothing
    with pytest.raises(ValueError, match="owner"):
        batched_pseudo_labels(probs, w, owner[:3])
