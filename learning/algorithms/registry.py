"""The one registry of algorithms: name → (config dataclass, builder, display name).

A new algorithm is one module plus a ``@register("name", ConfigCls,
display="Pretty-Name")`` on its builder ``build(ctx, cfg) -> backend``; its
variants are config values or a second registration with different defaults
(FedBN is FedAvg with BatchNorm kept local). ``display`` is how the papers
write the name; a run writes it into ``summary.json``, where the figures read
it (so plotting a run folder needs no torch). The registries of models, data
sets and partitions: :mod:`learning.registry`.
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
    display: str = ""  # how figures name it; "" = the name

    def __post_init__(self):
        if not self.display:
            object.__setattr__(self, "display", self.name)


REGISTRY: dict[str, AlgorithmSpec] = {}


def register(name: str, config_cls: type, summary: str = "", display: str | None = None):
    """Decorator: register ``build(ctx, cfg)`` under ``name`` with its config dataclass and display name."""

    def deco(build):
        if name in REGISTRY:
            raise ValueError(f"algorithm {name!r} is registered twice")
        REGISTRY[name] = AlgorithmSpec(name, config_cls, build, summary or (build.__doc__ or "").strip().split("\n")[0],
                                       display or name)
        return build

    return deco


def get(name: str) -> AlgorithmSpec:
    if name not in REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; expected one of: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]
