"""Server-side aggregation as pure functions over state dicts (FedAvg, McMahan et al. 2017, Alg. 1)."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch

Params = dict[str, torch.Tensor]


def weighted_average(updates: Sequence[tuple[Mapping[str, torch.Tensor], float]]) -> Params:
    """``Σ_k w_k θ_k / Σ_k w_k`` key by key; integer buffers (e.g. ``num_batches_tracked``) take the max.

    ``updates``: (state dict, weight ≥ 0) pairs, weights not all zero.
    """
    if not updates:
        raise ValueError("weighted_average needs at least one update")
    weights = [float(w) for _, w in updates]
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights(={weights}) must be >= 0 and not all zero")
    total = sum(weights)
    out: Params = {}
    for key, first in updates[0][0].items():
        if not first.is_floating_point():
            out[key] = torch.stack([u[key] for u, _ in updates]).max(0).values
            continue
        acc = torch.zeros_like(first)
        for (state, _), w in zip(updates, weights):
            acc.add_(state[key], alpha=w / total)
        out[key] = acc
    return out


def over_the_air_average(updates: Sequence[tuple[Mapping[str, torch.Tensor], float]], noise_var: float,
                         generator: torch.Generator) -> Params:
    """What over-the-air aggregation (AirComp) gives the server: ``(Σ_k w'_k θ_k + n) / K`` with ``w'_k = K w_k /
    Σ w`` (each device pre-scales its update by its weight; uniform weights: the plain sum) and ``n`` Gaussian of
    variance ``noise_var`` on every floating-point parameter, i.e. :func:`weighted_average` plus ``n / K``
    (Zhu, Wang and Huang, IEEE TWC 2020, Eq. (10); docs/model/access_schemes.md). The noise is drawn on the CPU from
    ``generator`` (its own stream) and moved to each tensor's device; integer buffers take the max as in
    :func:`weighted_average`."""
    if noise_var < 0 or noise_var != noise_var:
        raise ValueError(f"noise_var(={noise_var}) must be >= 0")
    out = weighted_average(updates)
    std = noise_var ** 0.5 / len(updates)
    for key in sorted(out):
        value = out[key]
        if value.is_floating_point():
            noise = torch.randn(value.shape, generator=generator, dtype=torch.float64) * std
            out[key] = value + noise.to(dtype=value.dtype, device=value.device)
    return out


def merge(global_state: Mapping[str, torch.Tensor], personal: Mapping[str, torch.Tensor]) -> Params:
    """A client's model: the global state with its personal (never-shared) keys on top."""
    return {**global_state, **personal}


def split_keys(state: Mapping[str, torch.Tensor], is_personal: Callable[[str], bool]) -> tuple[Params, Params]:
    """(shared, personal) parts of a state dict: ``is_personal(key)`` marks the keys that stay on the device."""
    shared = {k: v for k, v in state.items() if not is_personal(k)}
    personal = {k: v for k, v in state.items() if is_personal(k)}
    return shared, personal
