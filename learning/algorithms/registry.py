"""The one registry of algorithms: name → (config dataclass, builder).

A new algorithm is one module plus a ``@register("name", ConfigCls)`` on its
builder ``build(ctx, cfg) -> backend``; its variants are config values or a
second registration with different defaults (FedBN is FedAvg with BatchNorm
kept local).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    config_cls: type
    build: Callable
    summary: str


REGISTRY: dict[str, AlgorithmSpec] = {}


def register(name: str, config_cls: type, summary: str = ""):
    """Decorator: register ``build(ctx, cfg)`` under ``name`` with its config dataclass."""

    def deco(build):
        if name in REGISTRY:
            raise ValueError(f"algorithm {name!r} is registered twice")
        REGISTRY[name] = AlgorithmSpec(name, config_cls, build, summary or (build.__doc__ or "").strip().split("\n")[0])
        return build

    return deco


def get(name: str) -> AlgorithmSpec:
    if name not in REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; expected one of: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]
