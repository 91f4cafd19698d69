"""The one registry of algorithms: name → (config dataclass, builder, display name, scenario check).

The registry itself, the config dataclasses and their validation are
torch-free (:mod:`edgesim.learning.algorithm_configs`; :data:`REGISTRY` here is its
``ALGORITHMS``), so scenarios load and validate without torch. An algorithm's
torch module attaches its builder with ``@register("name", ConfigCls,
display="Pretty-Name")`` on ``build(ctx, cfg) -> backend``; its variants are
config values or a second registration with different defaults (FedBN is
FedAvg with BatchNorm kept local). ``display`` is how the papers write the
name; a run writes it into ``summary.json``, where the figures read it (so
plotting a run folder needs no torch). A name that no config module declared
(a plugin's) is registered here whole, with its ``check``. The registries of
models, data sets and partitions: :mod:`edgesim.learning.registry`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Optional

from edgesim.learning.algorithm_configs import ALGORITHMS, AlgorithmSpec, variant  # noqa: F401 (re-exported)

REGISTRY: dict[str, AlgorithmSpec] = ALGORITHMS


def register(name: str, config_cls: type, summary: str = "", display: str | None = None, *,
             check: Optional[Callable] = None, check_data: Optional[Callable] = None):
    """Decorator: register ``build(ctx, cfg)`` under ``name`` with its config dataclass and display name.

    A name declared torch-free (:func:`edgesim.learning.algorithm_configs.declare`) gets its builder attached
    (its config class must be the declared one); any other name is registered whole.
    ``check_data(ctx, cfg)`` (optional) checks the config against the loaded data before any algorithm
    runs, raising ``ValueError`` naming the option.
    """

    def deco(build):
        declared = REGISTRY.get(name)
        if declared is not None and (declared.build is not None or declared.config_cls is not config_cls):
            raise ValueError(f"algorithm {name!r} is registered twice")
        if declared is not None:
            REGISTRY[name] = dataclasses.replace(declared, build=build, check_data=check_data or declared.check_data)
        else:
            REGISTRY[name] = AlgorithmSpec(name, config_cls, build, summary or (build.__doc__ or "").strip().split("\n")[0],
                                           display or name, build.__module__, check, check_data)
        return build

    return deco


def get(name: str) -> AlgorithmSpec:
    if name not in REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; expected one of: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def register_variants(variants: Mapping[str, tuple[type, str, str]], backend: Callable) -> None:
    """Register every ``name: (config class, display, summary)`` of one algorithm family, each built as
    ``backend(ctx, name, cfg)`` (the name keys only the variant's own extra randomness; docs/metrics.md)."""
    for name, (config_cls, display, summary) in variants.items():
        def build(ctx, cfg, _name=name):
            return backend(ctx, _name, cfg)

        build.__module__ = backend.__module__  # where the family lives (its declared module)
        register(name, config_cls, summary, display=display)(build)
