"""The asynchronous aggregation rules, one registry: when the server aggregates and how it weighs staleness.

A rule is one class registered by name (``@register_async_rule("fedbuff")``); ``[budget] round_mode`` is
``"sync"``, ``"deadline"``, a registered rule or ``"hierarchical"`` (:func:`round_modes`; the client–edge–cloud
rounds of :mod:`edgesim.hierarchy`). The clock half lives here (torch-free):

- ``options``: the frozen dataclass of the ``[async]`` keys the rule reads beyond the common ones
  (``concurrency``, ``staleness``, ``staleness_a``/``_b``, ``eval_every``);
- ``flush(buffered)``: whether the ``buffered`` updates that have arrived since the last aggregation are
  aggregated now (FedAsync: at every arrival; FedBuff: at ``buffer_size``);
- ``weight(staleness)``: the staleness weight ``s(t − τ)`` of an update (default: the ``[async]`` table's
  staleness function, :func:`edgesim.asynchrony.staleness_weight`);
- ``combine``: how the server combines the arrivals, the name of a learning-side step (default: the rule's
  own name). The FedAvg family registers its steps with ``register_async_combine``: ``"fedasync"`` mixes,
  ``"fedbuff"`` steps by the weighted mean delta. A rule that reuses one is one file; a rule with a step
  of its own registers it under its name in a second (docs/extend/writing_an_async_rule.md).
Plugins register on import: an installed package through the entry-point group ``edgesim.async_rules``
(loaded when a round mode is not known yet), or an import before the scenario is loaded.
docs/extend/writing_an_async_rule.md shows a new rule in one file.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable

SYNC_MODES = ("sync", "deadline")  # the two round modes of the synchronous engine
HIERARCHICAL = "hierarchical"  # edge rounds per cell and cloud aggregations (edgesim.hierarchy)
ENTRY_POINT_GROUP = "edgesim.async_rules"

ASYNC_RULES: dict[str, type] = {}  # name -> rule class
_loaded_entry_points: set[tuple[str, str]] = set()


def _source(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_async_rule(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_async_rule("my_rule")`` makes ``[budget] round_mode = "my_rule"`` run it.
    The class subclasses :class:`AsyncRule`; a name already taken (or a round mode) is refused in one line naming
    both sources."""
    if not isinstance(name, str) or not name or name in (*SYNC_MODES, HIERARCHICAL):
        raise ValueError(f"asynchronous rule name {name!r}: expected a non-empty string other than "
                         f"{' and '.join(map(repr, SYNC_MODES))} (and {HIERARCHICAL!r}: the round modes that are no "
                         f"rule)")

    def add(cls: type) -> type:
        if not (isinstance(cls, type) and issubclass(cls, AsyncRule)):
            raise ValueError(f"asynchronous rule {name!r} ({cls!r}): expected a subclass of "
                             f"edgesim.async_rules.AsyncRule")
        taken = ASYNC_RULES.get(name)
        if taken is not None and taken is not cls:
            raise ValueError(f"asynchronous rule {name!r} is registered by {_source(taken)} and again by "
                             f"{_source(cls)}; expected one rule per name (rename one)")
        cls.name = name
        ASYNC_RULES[name] = cls
        return cls

    return add


def load_entry_points() -> None:
    """Import the installed packages' rules (entry-point group ``edgesim.async_rules``) not imported yet."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        key = (ep.name, ep.value)
        if key in _loaded_entry_points:
            continue
        _loaded_entry_points.add(key)  # once, even if it fails: a broken plugin is reported once
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, type):
                obj()
        except Exception as e:  # noqa: BLE001 - any failure of someone else's code is reported in one line
            raise ValueError(f"asynchronous rule entry point {ep.name!r} = {ep.value!r} (group "
                             f"{ENTRY_POINT_GROUP!r}): cannot be loaded ({type(e).__name__}: {e}); expected a "
                             f"module that registers a rule") from None


def round_modes(name: str = "") -> tuple[str, ...]:
    """``"sync"``, ``"deadline"``, every registered rule and ``"hierarchical"``; the installed plugins are loaded
    first when ``name`` is none of them."""
    if name and name not in (*SYNC_MODES, HIERARCHICAL) and name not in ASYNC_RULES:
        load_entry_points()
    return (*SYNC_MODES, *ASYNC_RULES, HIERARCHICAL)


def is_asynchronous(round_mode: str) -> bool:
    """Whether ``round_mode`` is a registered asynchronous rule (slots instead of rounds)."""
    return round_mode not in (*SYNC_MODES, HIERARCHICAL) and round_mode in round_modes(round_mode)


def is_hierarchical(round_mode: str) -> bool:
    """Whether ``round_mode`` runs client–edge–cloud rounds (:mod:`edgesim.hierarchy`)."""
    return round_mode == HIERARCHICAL


def rule_of(round_mode: str) -> type:
    """The rule class of ``round_mode`` (``ValueError`` of one line if it is none)."""
    if round_mode not in ASYNC_RULES:
        round_modes(round_mode)
    cls = ASYNC_RULES.get(round_mode)
    if cls is None:
        raise ValueError(f"round_mode = {round_mode!r}: expected an asynchronous rule, one of "
                         f"{', '.join(map(repr, ASYNC_RULES))}")
    return cls


@dataclass(frozen=True)
class NoOptions:
    """A rule that reads only the common ``[async]`` keys."""


class AsyncRule:
    """An asynchronous rule, made from the resolved ``[async]`` table (module docstring); ``opts`` its
    :attr:`options` filled from that table."""

    name = ""  # set by register_async_rule
    options: type = NoOptions
    combine = ""  # the learning side's step; "": the rule's name

    def __init__(self, cfg: Any):
        self.cfg = cfg
        keys = tuple(self.options.__dataclass_fields__)
        missing = [k for k in keys if not hasattr(cfg, k)]
        if missing:
            raise ValueError(f"asynchronous rule {self.name!r}: its options {self.options.__name__} name "
                             f"{', '.join(map(repr, missing))}, which the [async] table does not have; expected "
                             f"keys of the [async] table")
        self.opts = self.options(**{k: getattr(cfg, k) for k in keys})

    @classmethod
    def combine_name(cls) -> str:
        """The learning side's step this rule aggregates with."""
        return cls.combine or cls.name

    def flush(self, buffered: int) -> bool:
        """Whether the ``buffered`` (>= 1) updates arrived since the last aggregation are aggregated now."""
        raise NotImplementedError

    def weight(self, staleness: int) -> float:
        """The staleness weight ``s(t − τ)`` in [0, 1] of an update ``staleness`` versions old."""
        return self.cfg.weight(staleness)


@dataclass(frozen=True)
class FedAsyncOptions:
    """FedAsync's ``[async]`` key: ``alpha``, the mixing weight α in (0, 1]."""

    alpha: float


@register_async_rule("fedasync")
class FedAsync(AsyncRule):
    """FedAsync (Xie, Koyejo & Gupta 2019, Alg. 1): every arrival is mixed in at once,
    ``x_t = (1 − α_t) x_{t−1} + α_t x_new`` with ``α_t = α · s(t − τ)``."""

    options = FedAsyncOptions

    def flush(self, buffered: int) -> bool:
        return True


@dataclass(frozen=True)
class FedBuffOptions:
    """FedBuff's ``[async]`` keys: ``buffer_size`` K (updates per server step) and ``server_lr`` η_g."""

    buffer_size: int
    server_lr: float


@register_async_rule("fedbuff")
class FedBuff(AsyncRule):
    """FedBuff (Nguyen et al., AISTATS 2022, Alg. 1): arrivals join a buffer; at K the server steps
    ``x ← x + η_g Σ_i (n_i / Σ n) s(t − τ_i) Δ_i`` and empties it."""

    options = FedBuffOptions

    def flush(self, buffered: int) -> bool:
        return buffered >= self.opts.buffer_size
