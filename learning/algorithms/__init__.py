"""The algorithms: one folder each (``NAME/``), found by walking this package; the one registry of them.

An algorithm is a folder ``learning/algorithms/NAME/`` holding

- ``config.py``: its options (a frozen config dataclass), its scenario check and its
  :func:`declare` (or :func:`declare_variants`) call — torch-free, so loading,
  validating and planning a scenario (``edgesim plan``) never import torch;
- ``algorithm.py``: the learning backend, whose builder ``@register`` (or
  :func:`register_variants`) attaches to the declared name (imports torch);
- its private helpers (DoFed-SPP's similarity ratios, PCA and pseudo-labels;
  FedMatch's helper search), imported by its ``algorithm.py`` only.

Importing this package imports every folder's ``config`` (``pkgutil.iter_modules``:
no hand-kept list), filling :data:`ALGORITHMS` with names, config dataclasses,
display names, checks and planning hooks. :data:`REGISTRY` is the same dict with
every builder attached: reading it (``from edgesim.learning.algorithms import
REGISTRY``) imports every folder's ``algorithm`` and the installed plugins' algorithms
(entry point group ``edgesim.algorithms``, :mod:`edgesim.learning.plugins`), after
edgesim's own. No module outside an algorithm's folder imports the folder.

A config dataclass validates its own values in ``__post_init__``; what depends
on the rest of the scenario (the number of devices, the partition, the model)
is the spec's ``check(cfg, facts)`` on :class:`ScenarioFacts`, run by
scenario validation — so ``edgesim plan`` and ``edgesim run`` refuse the same
things, before any data is loaded. A plugin declares its algorithm the same
way: :func:`declare` in a torch-free module (or just ``@register`` with
``config_cls`` and ``check`` in its torch module).

This module imports no torch.
"""


from __future__ import annotations

import dataclasses
import importlib
import pkgutil
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
    planning: Optional["PlanningHook"] = None  # set when the algorithm schedules under the round budget
    asynchronous: bool = False  # its backend has an ``asynchronous()`` mode (FedAsync/FedBuff, docs/asynchrony.md)

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


@dataclass(frozen=True)
class PlanningHook:
    """What an algorithm that schedules its round under the budget adds to ``edgesim plan`` (torch-free).

    ``target_cycles(scenario, workload)``: cycles (per device, per round) spent beside the trained model
    that the plan must charge, or ``None`` when they are not known before the data is split.
    ``auto_fields``: the ``[workload]`` fields this algorithm's phases define, which may be ``"auto"``;
    ``auto_cycles``: ``"module:function"`` (imports torch) giving such a field's number as
    ``function(field, scenario, model, dataset, cycles_per_sample)``. An algorithm with a hook picks its
    schedule from the plan, so ``edgesim plan`` prints the plan's feasibility figures and fails when no
    schedule fits.
    """

    target_cycles: Callable[[Any, Any], Optional[float]]
    auto_fields: tuple[str, ...] = ()
    auto_cycles: str = ""


ALGORITHMS: dict[str, AlgorithmSpec] = {}


def declare(name: str, config_cls: type, *, module: str, summary: str, display: str = "",
            check: Optional[Callable] = None, planning: Optional[PlanningHook] = None,
            asynchronous: bool = False) -> None:
    """Declare ``name`` torch-free; ``module`` registers its builder with ``@register`` when imported.
    ``asynchronous``: its backend offers ``asynchronous()`` (a mode for ``round_mode = "fedasync"/"fedbuff"``)."""
    if name in ALGORITHMS:
        raise ValueError(f"algorithm {name!r} is declared twice")
    ALGORITHMS[name] = AlgorithmSpec(name, config_cls, None, summary, display or name, module, check,
                                     planning=planning, asynchronous=asynchronous)


def planning_hooks(names) -> dict[str, PlanningHook]:
    """``{name: hook}`` of the algorithms among ``names`` that schedule under the round budget."""
    return {n: ALGORITHMS[n].planning for n in names if n in ALGORITHMS and ALGORITHMS[n].planning is not None}


def declare_variants(variants: Mapping[str, tuple], *, module: str, check: Optional[Callable] = None,
                     asynchronous: bool = False) -> None:
    """Declare every ``name: (config class, display, summary)`` of one family (built in ``module``)."""
    for name, (config_cls, display, summary) in variants.items():
        declare(name, config_cls, module=module, summary=summary, display=display, check=check,
                asynchronous=asynchronous)


def asynchronous_algorithms() -> tuple[str, ...]:
    """The declared algorithms with an asynchronous mode (torch-free; :func:`declare`'s ``asynchronous``)."""
    return tuple(name for name, spec in ALGORITHMS.items() if spec.asynchronous)


def variant(base: type, name: str, doc: str, **defaults) -> type:
    """A frozen subclass of the config dataclass ``base`` with other defaults: a registered variant of an
    algorithm (FedBN is FedAvg with ``local = "batchnorm"``)."""
    ns = {"__doc__": doc, "__annotations__": {k: base.__annotations__[k] for k in defaults}, **defaults,
          "__module__": base.__module__}  # it lives in the family's config module
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



def register(name: str, config_cls: type, summary: str = "", display: str | None = None, *,
             check: Optional[Callable] = None, check_data: Optional[Callable] = None):
    """Decorator: register ``build(ctx, cfg)`` under ``name`` with its config dataclass and display name.

    A name declared torch-free (:func:`declare`) gets its builder attached
    (its config class must be the declared one); any other name is registered whole.
    ``check_data(ctx, cfg)`` (optional) checks the config against the loaded data before any algorithm
    runs, raising ``ValueError`` naming the option.
    """

    def deco(build):
        declared = ALGORITHMS.get(name)
        if declared is not None and (declared.build is not None or declared.config_cls is not config_cls):
            raise ValueError(f"algorithm {name!r} is registered twice")
        if declared is not None:
            ALGORITHMS[name] = dataclasses.replace(declared, build=build, check_data=check_data or declared.check_data)
        else:
            line = summary or (build.__doc__ or "").strip().split("\n")[0]
            ALGORITHMS[name] = AlgorithmSpec(name, config_cls, build, line,
                                           display or name, build.__module__, check, check_data)
        return build

    return deco


def get(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; expected one of: {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


def register_variants(variants: Mapping[str, tuple[type, str, str]], backend: Callable) -> None:
    """Register every ``name: (config class, display, summary)`` of one algorithm family, each built as
    ``backend(ctx, name, cfg)`` (the name keys only the variant's own extra randomness; docs/metrics.md)."""
    for name, (config_cls, display, summary) in variants.items():
        def build(ctx, cfg, _name=name):
            return backend(ctx, _name, cfg)

        build.__module__ = backend.__module__  # where the family lives (its declared module)
        register(name, config_cls, summary, display=display)(build)


def _folders() -> list[str]:
    """The algorithm folders of this package (its subpackages), in name order."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg)


for _folder in _folders():  # the torch-free declarations
    importlib.import_module(f"{__name__}.{_folder}.config")

_builders_loaded = False


def load_builders() -> dict[str, AlgorithmSpec]:
    """Import every folder's ``algorithm`` (torch) and the plugins' algorithms; returns :data:`ALGORITHMS`,
    every builder attached."""
    global _builders_loaded
    if not _builders_loaded:
        _builders_loaded = True
        for folder in _folders():
            importlib.import_module(f"{__name__}.{folder}.algorithm")
        from edgesim.learning.entry_points import load_entry_points

        load_entry_points("algorithms")
    return ALGORITHMS


def __getattr__(name: str):
    """``REGISTRY``: :data:`ALGORITHMS` with every builder attached (PEP 562; imports torch on first use)."""
    if name == "REGISTRY":
        return load_builders()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
