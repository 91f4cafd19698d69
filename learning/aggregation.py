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


def merge(global_state: Mapping[str, torch.Tensor], personal: Mapping[str, torch.Tensor]) -> Params:
    """A client's model: the global state with its personal (never-shared) keys on top."""
    return {**global_state, **personal}


def split_keys(state: Mapping[str, torch.Tensor], is_personal: Callable[[str], bool]) -> tuple[Params, Params]:
    """(shared, personal) parts of a state dict: ``is_personal(key)`` marks the keys that stay on the device."""
    shared = {k: v for k, v in state.items() if not is_personal(k)}
    personal = {k: v for k, v in state.items() if is_personal(k)}
    return shared, personal
