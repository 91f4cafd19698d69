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
from typing import Callable, Mapping


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


def variant(base: type, name: str, doc: str, **defaults) -> type:
    """A frozen subclass of the config dataclass ``base`` with other defaults: a registered variant of an
    algorithm (FedBN is FedAvg with ``local = "batchnorm"``)."""
    ns = {"__doc__": doc, "__annotations__": {k: base.__annotations__[k] for k in defaults}, **defaults}
    return dataclass(frozen=True)(type(name, (base,), ns))


def register_variants(variants: Mapping[str, tuple[type, str, str]], backend: Callable) -> None:
    """Register every ``name: (config class, display, summary)`` of one algorithm family, each built as
    ``backend(ctx, name, cfg)`` (the name keys only the variant's own extra randomness; docs/metrics.md)."""
    for name, (config_cls, display, summary) in variants.items():
        def build(ctx, cfg, _name=name):
            return backend(ctx, _name, cfg)

        register(name, config_cls, summary, display=display)(build)
