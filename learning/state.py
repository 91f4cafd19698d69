"""Model states as plain dicts of tensors: stacking many, and their size in numbers and bits.

What a transfer costs is what it carries: :func:`state_bits` counts the
floating-point numbers of the keys actually sent (parameters and running
statistics; integer bookkeeping such as ``num_batches_tracked`` is not
sent), at ``bits_per_number`` each. :func:`scaled_bits` keeps a scenario's
own ``model_bits`` meaningful: a transfer of a subset of the keys costs that
subset's share of the full model's numbers × ``model_bits``.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

import torch

Params = dict[str, torch.Tensor]


def stack_params(params_list: Sequence[Mapping[str, torch.Tensor]]) -> Params:
    """Stack per-model dicts along a new leading dimension (same keys in every dict)."""
    if not params_list:
        raise ValueError("params_list is empty")
    keys = list(params_list[0].keys())
    for i, p in enumerate(params_list):
        if set(p) != set(keys):
            raise ValueError(f"params_list[{i}] has keys {sorted(p)}, expected {sorted(keys)}")
    return {k: torch.stack([p[k].detach() for p in params_list]) for k in keys}


def unstack_params(stacked: Mapping[str, torch.Tensor]) -> list[Params]:
    """Inverse of :func:`stack_params` (views, no copies)."""
    n = next(iter(stacked.values())).shape[0]
    return [{k: v[i] for k, v in stacked.items()} for i in range(n)]


def sent_numbers(state: Mapping[str, torch.Tensor], keys: Optional[Iterable[str]] = None) -> int:
    """Floating-point numbers in ``state[k]`` for ``k`` in ``keys`` (default: all keys)."""
    keys = state.keys() if keys is None else keys
    return int(sum(state[k].numel() for k in keys if state[k].is_floating_point()))


def state_bits(state: Mapping[str, torch.Tensor], keys: Optional[Iterable[str]] = None, bits_per_number: int = 32) -> int:
    """Bits to send ``keys`` of ``state``: floating-point numbers × ``bits_per_number``."""
    if bits_per_number < 1:
        raise ValueError(f"bits_per_number(={bits_per_number}) must be >= 1")
    return sent_numbers(state, keys) * int(bits_per_number)


def scaled_bits(state: Mapping[str, torch.Tensor], keys: Iterable[str], model_bits: float) -> int:
    """``model_bits`` × (numbers of ``keys`` / numbers of the whole state), rounded: the bits of a partial model."""
    full = sent_numbers(state)
    if full == 0:
        return 0
    return int(round(float(model_bits) * sent_numbers(state, keys) / full))


def flatten_states(states: Sequence[Mapping[str, torch.Tensor]], keys: Optional[Sequence[str]] = None) -> torch.Tensor:
    """Each state's floating-point tensors (``keys``, default all) flattened and concatenated: ``(Q, P)``."""
    if not states:
        raise ValueError("states is empty")
    keys = list(keys) if keys is not None else [k for k, v in states[0].items() if v.is_floating_point()]
    return torch.stack([torch.cat([s[k].detach().reshape(-1).float() for k in keys]) for s in states])
