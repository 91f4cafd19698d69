"""The BS's PCA "downsizing" of broadcast reciprocal models (DoFed-SPP §4.5, Alg. 2 lines 6–8 and 17–22).

The paper runs ``sklearn.decomposition.PCA`` on each reciprocal model before
the broadcast and says the downsized models "can infer data as well"; how is
not written down; our choice (docs/studies/dofed_spp.md), followed here: per-layer
low-rank compression with reconstruction.

For every floating-point tensor ``W`` with two or more dimensions, reshaped to
``(o, d)`` (``o`` = output channels/features, ``d`` = the rest, e.g.
``in·k·k``), and a rank ``r``:

1. ``μ = mean of the o rows`` (d numbers), ``W_c = W − μ``;
2. ``W_c = U S Vᵀ`` (thin SVD); ``components = Vᵀ[:r]`` (r × d),
   ``scores = U[:, :r] S[:r]`` (o × r);
3. the BS sends ``components``, ``scores`` and ``μ``; the device rebuilds
   ``Ŵ = scores · components + μ`` in the original shape.

That is exactly ``PCA(n_components=r, svd_solver="full").fit(W)``:
``transform`` gives the scores, ``components_`` the components, ``mean_`` μ
and ``inverse_transform`` Ŵ (the signs of singular vectors may differ, Ŵ does
not; tests/test_pca.py checks it against scikit-learn). The SVD is done with
``torch.linalg.svd`` in float64, batched over the models of a broadcast,
because it is the same computation and runs on the compute device.

- Reconstruction error: ``‖W − Ŵ‖_F² = Σ_{j>r} S_j²`` (the discarded singular
  values of the *centred* matrix); ``r = min(o, d)`` reconstructs exactly.
- Rank: ``r = ceil(rank_fraction · min(o, d))``, at least 1.
- Bits sent for a compressed tensor: ``32 · (r·(o + d) + d)`` (scores,
  components, mean). A tensor whose compressed form would not be smaller
  than ``o·d`` numbers — always the case at full rank — is sent as it is.
  Biases, 1-d tensors and floating buffers are sent in full; integer buffers
  (``num_batches_tracked``) are bookkeeping and not counted, as in
  :func:`edgesim.learning.models.model_bits`. So ``rank_fraction = 1`` sends the
  model unchanged, with ``model_bits`` bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import torch

Params = dict[str, torch.Tensor]


def check_fraction(rank_fraction: float) -> float:
    """``rank_fraction`` as a float in (0, 1], or ``ValueError`` quoting it."""
    if isinstance(rank_fraction, bool) or not isinstance(rank_fraction, (int, float)):
        raise ValueError(f"rank_fraction(={rank_fraction!r}) must be a number in (0, 1]")
    if not (0.0 < float(rank_fraction) <= 1.0):
        raise ValueError(f"rank_fraction(={rank_fraction}) must be in (0, 1]")
    return float(rank_fraction)


def layer_rank(rows: int, cols: int, rank_fraction: float) -> int:
    """``r = ceil(rank_fraction · min(rows, cols))``, clipped to ``1..min(rows, cols)``."""
    full = min(int(rows), int(cols))
    if full < 1:
        raise ValueError(f"matrix shape ({rows}, {cols}) must have rows and cols >= 1")
    frac = check_fraction(rank_fraction)
    return max(1, min(full, math.ceil(frac * full - 1e-9)))


def compressed_numbers(rows: int, cols: int, rank: int) -> int:
    """Numbers sent for one compressed ``(rows, cols)`` matrix: ``r·(rows + cols) + cols``."""
    return int(rank) * (int(rows) + int(cols)) + int(cols)


@dataclass(frozen=True)
class TensorPlan:
    """How one state-dict entry travels: ``rank`` None = sent in full; ``numbers`` sent; ``counted`` in bits."""

    key: str
    shape: tuple
    rank: Optional[int]
    numbers: int
    counted: bool


def compression_plan(template: Mapping[str, torch.Tensor], rank_fraction: float) -> list[TensorPlan]:
    """Per state-dict entry of ``template`` (one model's state): compressed at which rank, or sent as is."""
    frac = check_fraction(rank_fraction)
    plan = []
    for key, t in template.items():
        shape = tuple(t.shape)
        if not t.is_floating_point():
            plan.append(TensorPlan(key, shape, None, t.numel(), False))
            continue
        if t.dim() >= 2:
            rows, cols = shape[0], t.numel() // shape[0]
            r = layer_rank(rows, cols, frac)
            n = compressed_numbers(rows, cols, r)
            if n < rows * cols:
                plan.append(TensorPlan(key, shape, r, n, True))
                continue
        plan.append(TensorPlan(key, shape, None, t.numel(), True))
    return plan


def compressed_bits(template: Mapping[str, torch.Tensor], rank_fraction: float, bits_per_number: int = 32) -> int:
    """Bits the BS sends per downsized model: what :func:`compression_plan` sends × ``bits_per_number``."""
    if bits_per_number < 1:
        raise ValueError(f"bits_per_number(={bits_per_number}) must be >= 1")
    return int(sum(p.numbers for p in compression_plan(template, rank_fraction) if p.counted)) * int(bits_per_number)


def pca_matrices(w: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """PCA of the rows of ``w`` ``(..., o, d)``, batched over leading dims: ``(scores, components, mean, S)``.

    float64: ``scores`` ``(..., o, r)``, ``components`` ``(..., r, d)``, ``mean``
    ``(..., 1, d)`` and all singular values ``S`` ``(..., min(o, d))`` of the
    centred matrix.
    """
    if w.dim() < 2:
        raise ValueError(f"w(shape={tuple(w.shape)}) must have at least 2 dims (rows, cols)")
    o, d = w.shape[-2], w.shape[-1]
    r = int(rank)
    if not 1 <= r <= min(o, d):
        raise ValueError(f"rank(={rank}) must be in 1..min(rows, cols) = {min(o, d)}")
    x = w.detach().to(torch.float64)
    mean = x.mean(dim=-2, keepdim=True)
    u, s, vh = torch.linalg.svd(x - mean, full_matrices=False)
    scores = u[..., :, :r] * s[..., None, :r]
    return scores, vh[..., :r, :], mean, s


def reconstruct_matrix(w: torch.Tensor, rank: int) -> torch.Tensor:
    """``Ŵ = scores · components + mean`` for ``w`` ``(..., o, d)``, in ``w``'s dtype."""
    scores, comps, mean, _ = pca_matrices(w, rank)
    return (scores @ comps + mean).to(w.dtype)


def downsize(states: Sequence[Mapping[str, torch.Tensor]], rank_fraction: float) -> list[Params]:
    """What the devices rebuild from the BS's downsized broadcast of ``states`` (one SVD batch per layer).

    Entries sent in full come back unchanged (the same tensors); compressed
    ones are the rank-r reconstructions, same shape and dtype.
    """
    states = list(states)
    if not states:
        return []
    plan = compression_plan(states[0], rank_fraction)
    out: list[Params] = [dict() for _ in states]
    for p in plan:
        if p.rank is None:
            for o, s in zip(out, states):
                o[p.key] = s[p.key]
            continue
        stacked = torch.stack([s[p.key].detach().reshape(p.shape[0], -1) for s in states])
        rebuilt = reconstruct_matrix(stacked, p.rank)
        for i, o in enumerate(out):
            o[p.key] = rebuilt[i].reshape(p.shape).contiguous()
    return out
