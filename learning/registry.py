"""Named registries: one per kind of thing a scenario names (model, dataset, partition).

A :class:`Registry` maps a name to its *spec*, a frozen dataclass that holds
the thing's builder and its metadata. The registry is the single source of
the names: ``edgesim.learning.config`` validates ``[data] dataset``, ``[data]
partition`` and ``[train] model`` against it, the builders
(:func:`edgesim.learning.data.load_dataset`, :func:`edgesim.learning.context.make_partition`,
:func:`edgesim.learning.models.build_model`) look their entry up in it, and every
"unknown name" error lists its names.

The registries must be importable without torch (``edgesim plan`` and scenario
loading never import it), so each lives where its builders need nothing more
than numpy, or names its builders lazily:

- datasets: :data:`edgesim.learning.data.datasets.DATASETS` (numpy-only module; each
  entry holds its loader);
- partitions: :data:`edgesim.learning.data.partitions.PARTITIONS` (numpy-only; each
  entry holds its split function and the ``DataConfig`` fields it reads);
- models: :data:`edgesim.learning.model_specs.MODELS` (stdlib-only; each entry
  names its builder in ``edgesim.learning.models`` as ``"module:attribute"``, imported
  on first use, so torch is loaded only when a model is built);
- algorithms: :data:`ALGORITHMS` below (torch-free: names, config dataclasses, validation,
  declared capabilities; each folder of :mod:`edgesim.learning.algorithms` declares into it,
  and ``edgesim.learning.algorithms.REGISTRY`` is the same dict, whose builders the torch
  modules attach with ``@register``).

This module is standard library only.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional


class Registry(dict):
    """``{name: spec}`` for one ``kind`` of thing; :meth:`lookup` fails with one line naming every choice.

    ``error`` is the exception class an unknown name raises (a ``ValueError``
    subclass, e.g. ``DatasetError``). Names keep their registration order,
    which is the order error messages list them in.
    """

    def __init__(self, kind: str, error: type[Exception] = ValueError):
        super().__init__()
        self.kind, self.error = kind, error

    def add(self, spec):
        """Register ``spec`` under ``spec.name`` (each name once); returns ``spec``."""
        if spec.name in self:
            raise ValueError(f"{self.kind} {spec.name!r} is registered twice")
        self[spec.name] = spec
        return spec

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self)

    def lookup(self, name: str):
        """The spec of ``name``; an unknown name raises ``error`` listing the registered names."""
        if name not in self:
            raise self.error(f"unknown {self.kind} {name!r}; expected one of: {', '.join(map(repr, self))}")
        return self[name]


def resolve(ref: str) -> Callable:
    """The object a lazy reference ``"package.module:attribute"`` names (imports the module)."""
    module, _, attribute = ref.partition(":")
    if not module or not attribute:
        raise ValueError(f"reference {ref!r} must be 'package.module:attribute'")
    return getattr(importlib.import_module(module), attribute)


# --------------------------------------------------------------------------- algorithms


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
    asynchronous: bool = False  # its backend has an ``asynchronous()`` mode (docs/model/asynchrony.md)
    chooses_devices: bool = False  # it picks its own devices each round (no [resources] scheduling policy)
    per_device_iterations: bool = False  # it trains each device its own I_k epochs (workload.local_iterations a list)
    hierarchical: bool = False  # its backend has a ``hierarchical()`` mode (docs/model/hierarchy.md)

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
ALGORITHMS_PACKAGE = "edgesim.learning.algorithms"  # its import declares every built-in algorithm (one folder each)


def declared() -> dict[str, AlgorithmSpec]:
    """:data:`ALGORITHMS` with every built-in algorithm declared: the registry fills itself on first read by
    importing :data:`ALGORITHMS_PACKAGE` by name (as a lazy builder reference; torch-free), so a module that reads
    it — ``edgesim.learning.config`` — needs no import of the algorithms."""
    importlib.import_module(ALGORITHMS_PACKAGE)
    return ALGORITHMS


def declare(name: str, config_cls: type, *, module: str, summary: str, display: str = "",
            check: Optional[Callable] = None, planning: Optional[PlanningHook] = None,
            asynchronous: bool = False, chooses_devices: bool = False, per_device_iterations: bool = False,
            hierarchical: bool = False) -> None:
    """Declare ``name`` torch-free; ``module`` registers its builder with ``@register`` when imported.
    Its capabilities, declared here rather than listed by name elsewhere: ``planning`` (it decides its round
    under the budget: ``edgesim plan``'s figures and the budget check before any round), ``asynchronous`` (its
    backend offers ``asynchronous()``, a mode for ``round_mode = "fedasync"/"fedbuff"``), ``chooses_devices``
    (it picks each round's devices itself, so a ``[resources]`` scheduling policy is refused with it),
    ``per_device_iterations`` (it trains and charges each device its own ``workload.local_iterations`` I_k,
    ``Context.epochs_of``; a list or table of them is refused with any other algorithm),
    ``hierarchical`` (its backend offers ``hierarchical()``, a mode for ``round_mode = "hierarchical"``)."""
    if name in ALGORITHMS:
        raise ValueError(f"algorithm {name!r} is declared twice")
    ALGORITHMS[name] = AlgorithmSpec(name, config_cls, None, summary, display or name, module, check,
                                     planning=planning, asynchronous=asynchronous, chooses_devices=chooses_devices,
                                     per_device_iterations=per_device_iterations, hierarchical=hierarchical)


def planning_hooks(names) -> dict[str, PlanningHook]:
    """``{name: hook}`` of the algorithms among ``names`` that schedule under the round budget."""
    return {n: declared()[n].planning for n in names if decides_budget(n)}


def declare_variants(variants: Mapping[str, tuple], *, module: str, check: Optional[Callable] = None,
                     asynchronous: bool = False, per_device_iterations: bool = False,
                     hierarchical: Callable[[type], bool] | bool = False) -> None:
    """Declare every ``name: (config class, display, summary)`` of one family (built in ``module``), each with the
    family's capabilities; ``hierarchical``: for all of them, or a test of a variant's config class."""
    for name, (config_cls, display, summary) in variants.items():
        declare(name, config_cls, module=module, summary=summary, display=display, check=check,
                asynchronous=asynchronous, per_device_iterations=per_device_iterations,
                hierarchical=bool(hierarchical(config_cls) if callable(hierarchical) else hierarchical))


def asynchronous_algorithms() -> tuple[str, ...]:
    """The declared algorithms with an asynchronous mode (torch-free; :func:`declare`'s ``asynchronous``)."""
    return tuple(name for name, spec in declared().items() if spec.asynchronous)


def hierarchical_algorithms() -> tuple[str, ...]:
    """The declared algorithms with a hierarchical mode (torch-free; :func:`declare`'s ``hierarchical``)."""
    return tuple(name for name, spec in declared().items() if spec.hierarchical)


def choosing_devices() -> tuple[str, ...]:
    """The declared algorithms that choose their own devices (:func:`declare`'s ``chooses_devices``)."""
    return tuple(name for name, spec in declared().items() if spec.chooses_devices)


def per_device_iteration_algorithms() -> tuple[str, ...]:
    """The declared algorithms that train each device its own I_k (:func:`declare`'s ``per_device_iterations``)."""
    return tuple(name for name, spec in declared().items() if spec.per_device_iterations)


def decides_budget(name: str) -> bool:
    """Whether algorithm ``name`` decides its round under the budget (it declares a :class:`PlanningHook`): its
    backend then checks the budget before any round (``check_budget(view)``)."""
    spec = declared().get(name)
    return spec is not None and spec.planning is not None


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
        spec = ALGORITHMS.get(name)
        if spec is not None and (spec.build is not None or spec.config_cls is not config_cls):
            raise ValueError(f"algorithm {name!r} is registered twice")
        if spec is not None:
            ALGORITHMS[name] = dataclasses.replace(spec, build=build, check_data=check_data or spec.check_data)
        else:
            line = summary or (build.__doc__ or "").strip().split("\n")[0]
            ALGORITHMS[name] = AlgorithmSpec(name, config_cls, build, line,
                                           display or name, build.__module__, check, check_data)
        return build

    return deco


def get(name: str) -> AlgorithmSpec:
    if name not in declared():
        raise ValueError(f"unknown algorithm {name!r}; expected one of: {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


def register_variants(variants: Mapping[str, tuple[type, str, str]], backend: Callable) -> None:
    """Register every ``name: (config class, display, summary)`` of one algorithm family, each built as
    ``backend(ctx, name, cfg)`` (the name keys only the variant's own extra randomness; docs/use/metrics.md)."""
    for name, (config_cls, display, summary) in variants.items():
        def build(ctx, cfg, _name=name):
            return backend(ctx, _name, cfg)

        build.__module__ = backend.__module__  # where the family lives (its declared module)
        register(name, config_cls, summary, display=display)(build)
