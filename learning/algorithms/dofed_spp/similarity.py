"""Similarity ratios of DoFed-SPP, Eq. (19) (Ching et al., IEEE TSC 2023, §4.1, Theorem 1).

For device n and every device i (i = n included, docs/studies/dofed_spp.md):

    L_{n,i} = l(θ_n^tar; D_{n,l}) − l(θ_i^rec; D_{n,l})              (target loss gap)
    s_{n,i} = max{ (γ·L_{n,i} + G1 + γ·G2) / ‖θ_i^rec − θ_n^{rec,prev}‖₂ , 0 }
    ρ̂_n^i  = s_{n,i} / Σ_j s_{n,j}

``l`` is the mean cross-entropy over device n's labelled target set; θ_i^rec
is the copy of device i's reciprocal model that device n holds (the PCA
reconstruction it last received, its own full model for i = n);
θ_n^{rec,prev} is device n's own reciprocal model one local update older
(Alg. 2 lines 10 and 32). γ is the SGD step size; G1 and G2 are the bounds
of Assumptions 1–2, as options (docs/studies/dofed_spp.md):

- ``"empirical"``: G1_n = the largest distance between two models device n
  holds; G2_n = the largest ‖∇_θ l(θ_i; D_{n,l})‖₂ over them;
- ``"zero"``: 0 (then ρ̂ is FedFomo's weight up to normalisation);
- a number: that constant for every device.

Choices the paper leaves open (docs/studies/dofed_spp.md):

- a distance below ``min_distance`` (1e-12) counts as ``min_distance``;
- a row whose scores are all 0 (every model worse than the target model, with
  G1 = G2 = 0) keeps the previous round's row, or is uniform (1/N) when there
  is none; NaN scores (no labelled data) count as 0.

Batched: the losses come from one stacked forward call over the distinct
models and the concatenated labelled sets, or (on a CPU, where vmap'd
convolutions are slower) one call per distinct model on the sets of the
devices holding it (:func:`held_losses`); all distances from one Gram
matrix (:func:`pairwise_distances`); gradient norms from ``vmap(grad)`` over
each device's models — no N² Python loop of (model, device) pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from edgesim.learning.algorithms.dofed_spp.config import BOUND_MODES, Bound, check_bound  # noqa: F401 - torch-free
from edgesim.learning.inference import cross_entropy_losses, eval_mode
from edgesim.learning.state import flatten_states, stack_params

Params = dict[str, torch.Tensor]
MIN_DISTANCE = 1e-12


# --------------------------------------------------------------------------- Eq. (19), pure


def similarity_ratios(
    target_loss,
    rec_loss,
    distance,
    gamma: float,
    g1=0.0,
    g2=0.0,
    previous=None,
    min_distance: float = MIN_DISTANCE,
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (19) for all devices: ``(rho, kept)``.

    ``target_loss`` ``(N,)``: l(θ_n^tar; D_{n,l}); ``rec_loss`` ``(N, N)``:
    ``[n, i]`` = l(θ_i^rec; D_{n,l}); ``distance`` ``(N, N)``: ``[n, i]`` =
    ‖θ_i^rec − θ_n^{rec,prev}‖₂; ``gamma`` > 0; ``g1``, ``g2``: scalars or
    ``(N,)`` per device. ``previous`` ``(N, N)``: the rows to keep where all
    scores are 0 (uniform 1/N if ``None``). ``kept`` ``(N,)`` marks those rows.
    Rows of ``rho`` sum to 1.
    """
    t = np.asarray(target_loss, dtype=float)
    r = np.asarray(rec_loss, dtype=float)
    d = np.asarray(distance, dtype=float)
    n = t.shape[0]
    if t.shape != (n,) or r.shape != (n, n) or d.shape != (n, n):
        raise ValueError(f"shapes target_loss{t.shape}, rec_loss{r.shape}, distance{d.shape} must be (N,), (N, N), (N, N)")
    if not gamma > 0:
        raise ValueError(f"gamma(={gamma}) must be > 0")
    if (d < 0).any():
        raise ValueError(f"distance must be >= 0 (min {d.min()})")
    g1 = np.broadcast_to(np.asarray(g1, dtype=float), (n,))
    g2 = np.broadcast_to(np.asarray(g2, dtype=float), (n,))
    numerator = gamma * (t[:, None] - r) + g1[:, None] + gamma * g2[:, None]
    with np.errstate(invalid="ignore"):
        s = np.maximum(numerator / np.maximum(d, min_distance), 0.0)
    s = np.where(np.isfinite(s), s, 0.0)
    total = s.sum(axis=1)
    kept = total <= 0
    rho = np.empty_like(s)
    live = ~kept
    rho[live] = s[live] / total[live, None]
    if kept.any():
        if previous is None:
            rho[kept] = 1.0 / n
        else:
            prev = np.asarray(previous, dtype=float)
            if prev.shape != (n, n):
                raise ValueError(f"previous(shape={prev.shape}) must be (N, N) = ({n}, {n})")
            rho[kept] = prev[kept]
    return rho, kept


# --------------------------------------------------------------------------- batched pieces


def paired_losses(
    model: nn.Module,
    states: Sequence[Mapping[str, torch.Tensor]],
    xs: Sequence[torch.Tensor],
    ys: Sequence[torch.Tensor],
    *,
    batch_size: int = 2048,
) -> torch.Tensor:
    """Mean cross-entropy of ``states[n]`` on ``(xs[n], ys[n])`` for every n: ``(N,)`` float64 (NaN if empty)."""
    if not (len(states) == len(xs) == len(ys)):
        raise ValueError(f"states, xs, ys must have one entry per device (got {len(states)}, {len(xs)}, {len(ys)})")
    out = torch.full((len(states),), float("nan"), dtype=torch.float64)
    with eval_mode(model), torch.no_grad():
        for n, (s, x, y) in enumerate(zip(states, xs, ys)):
            if x.shape[0] == 0:
                continue
            total = 0.0
            for i in range(0, x.shape[0], batch_size):
                z = functional_call(model, dict(s), (x[i:i + batch_size],))
                total += float(F.cross_entropy(z.double(), y[i:i + batch_size], reduction="sum"))
            out[n] = total / x.shape[0]
    return out


def pairwise_distances(x: torch.Tensor, chunk: int = 1 << 16) -> torch.Tensor:
    """Euclidean distances between the rows of ``x`` ``(Q, P)``: ``(Q, Q)`` float64 on the CPU.

    From the Gram matrix, accumulated in float64 over column chunks of
    ``chunk`` (memory ``Q·chunk`` doubles), centred first so that small
    distances between large vectors keep their precision.
    """
    if x.dim() != 2:
        raise ValueError(f"x(shape={tuple(x.shape)}) must be (Q, P)")
    q, p = x.shape
    centre = x.mean(dim=0, keepdim=True)
    gram = torch.zeros((q, q), dtype=torch.float64, device=x.device)
    for j in range(0, p, chunk):
        block = (x[:, j:j + chunk] - centre[:, j:j + chunk]).double()
        gram += block @ block.T
    sq = gram.diagonal()
    d2 = (sq[:, None] + sq[None, :] - 2.0 * gram).clamp_min(0.0)
    d2.fill_diagonal_(0.0)
    return d2.sqrt().cpu()


def gradient_norms(
    model: nn.Module,
    states: Sequence[Mapping[str, torch.Tensor]],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    vectorize: bool = True,
) -> torch.Tensor:
    """‖∇_θ l(θ; (x, y))‖₂ (mean cross-entropy, trainable parameters) of each state: ``(M,)`` float64.

    ``vmap(grad)`` over the stacked states (``vectorize``) or a loop of ``grad``.
    Zero for an empty set.
    """
    if x.shape[0] == 0:
        return torch.zeros(len(states), dtype=torch.float64)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]

    def loss(p, rest, xb, yb):
        return F.cross_entropy(functional_call(model, {**p, **rest}, (xb,)), yb)

    with eval_mode(model):
        if vectorize:
            stacked = stack_params(states)
            p = {k: stacked[k] for k in trainable}
            rest = {k: v for k, v in stacked.items() if k not in p}
            g = vmap(grad(loss), in_dims=(0, 0, None, None))(p, rest, x, y)
            return torch.sqrt(sum(v.double().pow(2).flatten(1).sum(1) for v in g.values())).cpu()
        out = []
        for s in states:
            p = {k: s[k].detach() for k in trainable}
            rest = {k: v for k, v in s.items() if k not in p}
            g = grad(loss)(p, rest, x, y)
            out.append(torch.sqrt(sum(v.double().pow(2).sum() for v in g.values())))
        return torch.stack(out).cpu()


def held_losses(
    model: nn.Module,
    models: Sequence[Mapping[str, torch.Tensor]],
    index: np.ndarray,
    xs: Sequence[torch.Tensor],
    ys: Sequence[torch.Tensor],
    *,
    batch_size: int = 2048,
    vectorize: bool = True,
) -> np.ndarray:
    """``[n, i]`` = mean cross-entropy of ``models[index[n, i]]`` on ``(xs[n], ys[n])``: ``(N, N)`` float64.

    ``vectorize``: one vmapped call of all models on all sets (a GPU does the
    extra pairs for free). Otherwise one call per distinct model, on the
    concatenated sets of the devices that hold it: exactly the N² (model,
    device) pairs' forward passes, in Q ≤ N² calls.
    """
    index = np.asarray(index, dtype=np.int64)
    n = index.shape[0]
    rows = np.arange(n)[:, None]
    if vectorize:
        return cross_entropy_losses(model, models, xs, ys, batch_size=batch_size, vectorize=True).numpy()[index, rows]
    out = np.full((n, n), np.nan)
    for q in np.unique(index):
        holders = sorted(set(np.nonzero(index == q)[0].tolist()))
        losses = cross_entropy_losses(model, [models[q]], [xs[d] for d in holders], [ys[d] for d in holders],
                                      batch_size=batch_size, vectorize=False).numpy()[0]
        where = dict(zip(holders, losses))
        for d, i in zip(*np.nonzero(index == q)):
            out[d, i] = where[int(d)]
    return out


# --------------------------------------------------------------------------- one round's ratios


@dataclass(frozen=True)
class SimilarityResult:
    """Eq. (19)'s inputs and output for every device (numpy float64).

    ``rho`` ``(N, N)``; ``target_loss`` ``(N,)``; ``rec_loss`` and ``distance``
    ``(N, N)``; ``g1``, ``g2`` ``(N,)``; ``kept`` ``(N,)``: rows that kept the
    previous ratios because all scores were 0.
    """

    rho: np.ndarray
    target_loss: np.ndarray
    rec_loss: np.ndarray
    distance: np.ndarray
    g1: np.ndarray
    g2: np.ndarray
    kept: np.ndarray


def device_similarity(
    model: nn.Module,
    models: Sequence[Mapping[str, torch.Tensor]],
    index: np.ndarray,
    reference: Sequence[Mapping[str, torch.Tensor]],
    targets: Sequence[Mapping[str, torch.Tensor]],
    x_lab: Sequence[torch.Tensor],
    y_lab: Sequence[torch.Tensor],
    *,
    gamma: float,
    g1: Bound = "empirical",
    g2: Bound = "empirical",
    previous: Optional[np.ndarray] = None,
    batch_size: int = 2048,
    vectorize: bool = True,
) -> SimilarityResult:
    """Eq. (19) for every device from the models each one holds.

    ``models``: the Q distinct reciprocal models held anywhere (cached copies
    and the devices' own); ``index`` ``(N, N)``: ``index[n, i]`` = which of
    ``models`` device n holds for device i; ``reference[n]``: θ_n^{rec,prev};
    ``targets[n]``: θ_n^tar; ``x_lab``/``y_lab``: the labelled target sets.
    """
    index = np.asarray(index, dtype=np.int64)
    n = len(targets)
    if index.shape != (n, n) or index.min() < 0 or index.max() >= len(models):
        raise ValueError(f"index(shape={index.shape}) must be (N, N) = ({n}, {n}) with entries in 0..{len(models) - 1}")
    g1 = check_bound("g1", g1)
    g2 = check_bound("g2", g2)
    rec_loss = held_losses(model, models, index, x_lab, y_lab, batch_size=batch_size, vectorize=vectorize)
    target_loss = paired_losses(model, targets, x_lab, y_lab, batch_size=batch_size).numpy()
    q = len(models)
    dist_all = pairwise_distances(flatten_states(list(models) + list(reference))).numpy()
    distance = dist_all[q + np.arange(n)[:, None], index]
    if g1 == "empirical":
        g1_v = np.array([dist_all[np.ix_(index[k], index[k])].max() for k in range(n)])
    else:
        g1_v = np.zeros(n) if g1 == "zero" else np.full(n, float(g1))
    if g2 == "empirical":
        g2_v = np.array([
            float(gradient_norms(model, [models[j] for j in index[k]], x_lab[k], y_lab[k], vectorize=vectorize).max())
            for k in range(n)
        ])
    else:
        g2_v = np.zeros(n) if g2 == "zero" else np.full(n, float(g2))
    rho, kept = similarity_ratios(target_loss, rec_loss, distance, gamma, g1_v, g2_v, previous)
    return SimilarityResult(rho, target_loss, rec_loss, distance, g1_v, g2_v, kept)
