"""Ensemble pseudo-labels of DoFed-SPP, Eq. (20) (Ching et al., IEEE TSC 2023, §4.2):

    p̂(x) = OneHot( Σ_{i∈[B]} p(x; θ̂_i^rec) · ρ̂_n^i ),   x ∈ D_{n,ul}^target

Each device n weighs the softmax outputs of its B downloaded reciprocal
models by its similarity ratios and takes the arg-max (no confidence
threshold, docs/studies/dofed_spp.md). The one-hot vector is returned as its class
index; among equal scores the lowest class wins (``torch.argmax``).

A device none of whose B models has ρ̂ > 0 ("uncovered": Eq. (20)'s sum is
zero, a case the paper leaves undefined) labels nothing (−1): it trains its
student on its labelled data only, never on labels from models its own ratios
call useless.

Vectorised over the models: every device draws its B models from the same K
uploaded ones, so the K models' probabilities on all devices' unlabelled
data come from one stacked call (``edgesim.learning.executors.predict_proba``) and
each device's ensemble is a row of a weight matrix (:func:`weight_matrix`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch


def ensemble_scores(probs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``Σ_b weights[b] · probs[b]``: ``probs`` ``(B, n, C)``, ``weights`` ``(B,)`` → ``(n, C)``."""
    if probs.dim() != 3:
        raise ValueError(f"probs(shape={tuple(probs.shape)}) must be (B, n, C)")
    w = torch.as_tensor(weights, dtype=probs.dtype, device=probs.device)
    if w.shape != (probs.shape[0],):
        raise ValueError(f"weights(shape={tuple(w.shape)}) must be ({probs.shape[0]},), one per model")
    return torch.einsum("bnc,b->nc", probs, w)


def ensemble_pseudo_labels(probs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Eq. (20) for one device: class index ``argmax_c Σ_b weights[b]·probs[b, :, c]`` per sample, ``(n,)``.

    All weights zero (an uncovered device): −1 for every sample.
    """
    labels = ensemble_scores(probs, weights).argmax(dim=-1)
    if not bool((torch.as_tensor(weights) > 0).any()):
        return torch.full_like(labels, -1)
    return labels


def weight_matrix(rho: np.ndarray, assigned: Mapping[int, Sequence[int]], models: Sequence[int]) -> np.ndarray:
    """The ``(N, K)`` ensemble weights: ``W[n, k] = ρ̂[n, models[k]]`` if device n uses model k, else 0.

    ``rho``: the ``(N, N)`` similarity ratios; ``assigned[n]``: the devices
    whose models device n uses (its [B]); ``models``: the K models stacked,
    by device id. A device whose assigned models all have ρ̂ = 0 keeps a zero
    row (it labels nothing, module docstring).
    """
    rho = np.asarray(rho, dtype=float)
    col = {int(i): k for k, i in enumerate(models)}
    w = np.zeros((rho.shape[0], len(col)))
    for n, ids in assigned.items():
        for i in ids:
            if int(i) not in col:
                raise ValueError(f"device {n} is assigned model {i}, which is not among the stacked models {list(models)}")
            w[n, col[int(i)]] = rho[n, int(i)]
    return w


def batched_pseudo_labels(probs: torch.Tensor, weights: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
    """Eq. (20) for many devices at once.

    ``probs`` ``(K, n, C)``: the K models on the unlabelled samples of all
    devices, concatenated; ``weights`` ``(N, K)`` from :func:`weight_matrix`;
    ``owner`` ``(n,)``: the device of each sample. Returns the class index of
    each sample ``(n,)``. A sample whose device weighs no model gets −1.
    """
    if probs.dim() != 3:
        raise ValueError(f"probs(shape={tuple(probs.shape)}) must be (K, n, C)")
    w = torch.as_tensor(weights, dtype=probs.dtype, device=probs.device)
    if w.dim() != 2 or w.shape[1] != probs.shape[0]:
        raise ValueError(f"weights(shape={tuple(w.shape)}) must be (N, K = {probs.shape[0]})")
    owner = torch.as_tensor(owner, dtype=torch.long, device=probs.device)
    if owner.shape != (probs.shape[1],):
        raise ValueError(f"owner(shape={tuple(owner.shape)}) must be ({probs.shape[1]},), one device per sample")
    per_sample = w[owner]  # (n, K)
    scores = torch.einsum("knc,nk->nc", probs, per_sample)
    labels = scores.argmax(dim=-1)
    return torch.where(per_sample.sum(dim=1) > 0, labels, torch.full_like(labels, -1))
