"""The algorithms' names, config dataclasses and validation: torch-free, the registry's lower half.

:data:`ALGORITHMS` is the one registry of algorithms (``edgesim.learning.algorithms.REGISTRY``
is the same dict): name → :class:`AlgorithmSpec` (config dataclass, display
name, summary, scenario check, and the builder). Each family's config module
here (``fedavg``, ``feddure``, …) declares its names with :func:`declare`,
naming the torch module whose ``@register`` attaches the builder when it is
imported. Loading, validating and planning a scenario therefore read names,
options and checks without importing torch, and ``learning/config.py`` never
imports from ``learning/algorithms/`` (arrows point down only).

A config dataclass validates its own values in ``__post_init__``; what depends
on the rest of the scenario (the number of devices, the partition, the model)
is the spec's ``check(cfg, facts)`` on :class:`ScenarioFacts`, run by
scenario validation — so ``edgesim plan`` and ``edgesim run`` refuse the same
things, before any data is loaded. A plugin declares its algorithm the same
way: :func:`declare` in a torch-free module (or just ``@register`` with
``config_cls`` and ``check`` in its torch module).

This package imports no torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional


@dataclass(frozen=True)
class AlgorithmSpec:
    """One registered algorithm.

    ``build(ctx, cfg)`` makes its learning backend (``None`` until ``module``,
    its torch module, is imported: ``import edgesim.learning.algorithms`` imports them
    all). ``check(cfg, facts)`` raises ``ValueError`` naming the option when
    the config does not fit the scenario (:class:`ScenarioFacts`).
    """

    name: str
    config_cls: type
    build: Optional[Callable]
    summary: str
    display: str = ""  # how figures name it; "" = the name
    module: str = ""  # the torch module that registers ``build``
    check: Optional[Callable[[Any, "ScenarioFacts"], None]] = None
    check_data: Optional[Callable] = None  # (ctx, cfg) after the data is loaded, before any algorithm runs

    def __post_init__(self):
        if not self.display:
            object.__setattr__(self, "display", self.name)


@dataclass(frozen=True)
class ScenarioFacts:
    """What an algorithm's ``check`` may read of the rest of a scenario (all torch-free).

    ``n_devices``: N; ``clients_per_round``: K; ``data``/``train``: the
    scenario's :class:`edgesim.learning.config.DataConfig` and ``TrainConfig``;
    ``model_layers``: the model's weight layers (``None`` when unknown).
    """

    n_devices: int
    clients_per_round: int
    data: Any
    train: Any
    model_layers: Optional[int] = None


ALGORITHMS: dict[str, AlgorithmSpec] = {}


def declare(name: str, config_cls: type, *, module: str, summary: str, display: str = "",
            check: Optional[Callable] = None) -> None:
    """Declare ``name`` torch-free; ``module`` registers its builder with ``@register`` when imported."""
    if name in ALGORITHMS:
        raise ValueError(f"algorithm {name!r} is declared twice")
    ALGORITHMS[name] = AlgorithmSpec(name, config_cls, None, summary, display or name, module, check)


def declare_variants(variants: Mapping[str, tuple], *, module: str, check: Optional[Callable] = None) -> None:
    """Declare every ``name: (config class, display, summary)`` of one family (built in ``module``)."""
    for name, (config_cls, display, summary) in variants.items():
        declare(name, config_cls, module=module, summary=summary, display=display, check=check)


def variant(base: type, name: str, doc: str, **defaults) -> type:
    """A frozen subclass of the config dataclass ``base`` with other defaults: a registered variant of an
    algorithm (FedBN is FedAvg with ``local = "batchnorm"``)."""
    ns = {"__doc__": doc, "__annotations__": {k: base.__annotations__[k] for k in defaults}, **defaults}
    return dataclass(frozen=True)(type(name, (base,), ns))


def defining(cfg_or_cls) -> tuple:
    """The values of a config's ``DEFINING`` options (class attribute of a family's base config, e.g.
    FedAvg's ``objective``, ``data``, ``local``): what tells the family's registered variants apart."""
    cls = cfg_or_cls if isinstance(cfg_or_cls, type) else type(cfg_or_cls)
    cfg = cls() if isinstance(cfg_or_cls, type) else cfg_or_cls
    return tuple(getattr(cfg, k) for k in getattr(cls, "DEFINING", ()))


def check_fixed(name: str, cfg) -> None:
    """Refuse options that turn algorithm ``name`` into another registered one of its family, under its name.

    ``fixavg`` with ``objective = "supervised"`` is ``fedavg``; ``feddure_no_creg`` with
    ``creg = true`` is ``feddure``. (``fedper`` with ``objective = "fixmatch"`` is no other
    registered algorithm, so it stays allowed: the papers' "FedPer + FixMatch".)
    """
    keys = getattr(type(cfg), "DEFINING", ())
    mine = defining(cfg)
    if not keys or mine == defining(type(cfg)):
        return
    for other, spec in ALGORITHMS.items():
        if other != name and getattr(spec.config_cls, "DEFINING", None) == keys and defining(spec.config_cls) == mine:
            changed = [f"{k} = {v!r}" for k, v, d in zip(keys, mine, defining(type(cfg))) if v != d]
            raise ValueError(f"{', '.join(changed)}: makes {name!r} the registered algorithm {other!r}; expected "
                             f"{name}'s own value (or run {other!r} by its name)")


def unused_options(cfg, unused: Mapping[str, bool]) -> None:
    """Refuse an option set away from its default where ``unused[name]`` says this config does not read it."""
    defaults = {f.name: f.default for f in dataclasses.fields(cfg)}
    for key, is_unused in unused.items():
        if is_unused and getattr(cfg, key) != defaults[key]:
            raise ValueError(f"{key} = {getattr(cfg, key)!r} is not used by this algorithm; expected it left out")


from edgesim.learning.algorithm_configs import dofed_spp, fedavg, fedbe, feddure, fedfomo  # noqa: E402,F401 (declarations)
from edgesim.learning.algorithm_configs import feddure_code  # noqa: E402,F401 (declarations)
from edgesim.learning.algorithm_configs import fedmatch, fedmix, local, pfedme, server_only, um_pfssl  # noqa: E402,F401 (declarations)
