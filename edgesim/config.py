"""Frozen configuration dataclasses of the simulator: the system, the budget, the workload.

Each dataclass validates itself in ``__post_init__`` and raises ``ValueError``
naming the field, the value and what was expected; the scenario loader
(``scenarios/``) prefixes the file and section. A field declared with
:func:`key` carries its meaning, unit and allowed values in its metadata:
the same rule checks it (:func:`check_keys`) and writes its line of the key
reference (``docs/use/scenario_reference.md``). Decibel fields keep their unit
in their name; the ``*_w``/``*_w_per_hz`` properties give the linear values.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from dataclasses import dataclass, fields
from typing import Any, Callable, Optional, Union

from .async_rules import round_modes
from .units import db_to_linear, dbm_per_hz_to_w_per_hz, dbm_to_w

# The registered access schemes' names, in registration order: edgesim.access.register_access adds each (the built-in
# ones register when edgesim is imported: edgesim/__init__.py imports edgesim.access).
ACCESS_NAMES: list[str] = []
CSI_MODES = ("perfect", "estimated", "outdated")
# The largest cell a scenario may describe: checked before anything is allocated; `edgesim plan` takes
# well under a second at this size (docs/model/system_model.md, "Plausible values").
MAX_DEVICES = 100_000
# Physically plausible ranges (docs/model/system_model.md, "Plausible values"); a value outside is an error.
NOISE_PSD_DBM_PER_HZ_RANGE = (-220.0, -100.0)  # thermal noise at 290 K is -174 dBm/Hz
BANDWIDTH_HZ_RANGE = (1.0, 1e12)
TX_POWER_DBM_RANGE = (-60.0, 60.0)  # 1 nW to 1 kW
CHANNEL_GAIN_DB_RANGE = (-250.0, 30.0)
CPU_FREQ_HZ_RANGE = (1e3, 1e12)
CELL_RADIUS_M_MAX = 1e5
KAPPA_RANGE = (0.0, 1e-20)  # effective switched capacitance, Eq. (9); the papers use 1e-28
PATH_LOSS_INTERCEPT_DB_RANGE = (0.0, 250.0)  # the loss at 1 km; 3GPP macro cell 128.1 dB
PATH_LOSS_SLOPE_DB_RANGE = (0.0, 100.0)  # dB per decade of distance; free space 20, urban 30-60
SHADOWING_STD_DB_RANGE = (0.0, 30.0)  # measured macro-cell shadowing is 4-12 dB
MOBILITY_MODELS = ("static", "random_waypoint")
# Several cells (system.cells, docs/model/system_model.md "Several cells"): how devices are placed over them, and the
# association rules' names in registration order (edgesim.cells.register_association adds each; the built-in ones
# register when edgesim is imported: edgesim/__init__.py imports edgesim.cells).
PLACEMENTS = ("uniform_union", "per_cell")
ASSOCIATION_NAMES: list[str] = []
CELL_KEYS = ("x_m", "y_m", "bandwidth_hz", "tx_power_dbm", "cpu_hz")
MAX_CELLS = 1000
CELL_POSITION_M_MAX = 1e7  # a base station's coordinate, |x_m| and |y_m| (10,000 km)


def fail(field_name: str, value, expected: str):
    """Refuse ``value`` of ``field_name``: a :class:`ConfigError` (a ``ValueError``) with those parts."""
    raise ConfigError(key=field_name, value=value, expected=expected)


def check_number(name: str, value, *, minimum=None, strict=False, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        fail(name, value, "a finite number")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        fail(name, value, f"a number {'>' if strict else '>='} {minimum}")


def check_int(name: str, value, minimum: int):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        fail(name, value, f"an integer >= {minimum}")


def check_access_name(value) -> None:
    """``access`` names a registered access scheme (:data:`ACCESS_NAMES`, plugins included once loaded)."""
    if not isinstance(value, str) or value not in ACCESS_NAMES:
        fail("access", value, "one of " + ", ".join(repr(k) for k in ACCESS_NAMES)
             + " (`edgesim list access`; a plugin's scheme once its module is loaded)")


def access_names(value: str = "") -> list[str]:
    """The registered access schemes' names (:data:`ACCESS_NAMES`: the built-in ones and the plugins loaded)."""
    return ACCESS_NAMES


def check_association_name(value) -> None:
    """``association`` names a registered association rule (:data:`ASSOCIATION_NAMES`, plugins once loaded)."""
    if not isinstance(value, str) or value not in ASSOCIATION_NAMES:
        fail("association", value, "one of " + ", ".join(repr(k) for k in ASSOCIATION_NAMES)
             + " (a plugin's rule once its module is loaded: [run] plugins)")


def association_names(value: str = "") -> list[str]:
    """The registered association rules' names (:data:`ASSOCIATION_NAMES`)."""
    return ASSOCIATION_NAMES


def check_choice(name: str, value, choices):
    if value not in choices:
        fail(name, value, "one of " + ", ".join(repr(c) for c in choices))


def check_path_gains(intercept_db: float, slope_db: float, min_distance_m: float, cell_radius_m: float) -> None:
    """The path-loss gain ``-(A + B·log10(d / 1 km))`` dB (docs/model/system_model.md, Channel) at the nearest and
    farthest distance of the cell must lie in :data:`CHANNEL_GAIN_DB_RANGE`, else ``ValueError`` naming A and B."""
    low, high = CHANNEL_GAIN_DB_RANGE
    for d in (min_distance_m, cell_radius_m):
        gain_db = -(intercept_db + slope_db * math.log10(d / 1000.0))
        if not low <= gain_db <= high:
            fail("path_loss_intercept_db", intercept_db,
                 f"with path_loss_slope_db = {slope_db!r}, a path gain in [{low:g}, {high:g}] dB over the cell "
                 f"(it is {gain_db:.6g} dB at {d:g} m)")


# An option of an algorithm ([algorithms.NAME]) may be at most this many times its default's magnitude (1 for a
# default of 0 or none): beyond, a number is no setting of the method but a typo that overflows later (pFedMe's
# beta = 1e300 made the training diverge, blamed on the learning rate). Every default and every shipped scenario is
# far inside (the largest ratio shipped is 3,000: FedBE's server_samples = 3000, its default unset).
OPTION_SCALE_MAX = 1e6


def option_bound(default) -> float:
    """The largest magnitude :func:`check_option_scale` accepts for an option whose default is ``default``:
    ``OPTION_SCALE_MAX · max(1, |default|)``."""
    scale = abs(default) if isinstance(default, (int, float)) and not isinstance(default, bool) else 0.0
    return OPTION_SCALE_MAX * max(1.0, scale if math.isfinite(scale) else 0.0)


def check_option_scale(name: str, value, default, meaning: str = "") -> None:
    """An algorithm option's number within :func:`option_bound` of its default, else ``ValueError`` naming the
    key, the value, the plausible range and (``meaning``) what the option is. Not a number: nothing to check."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return
    bound = option_bound(default)
    if abs(value) > bound:
        shown = "none" if default is None else repr(default)
        fail(name, value, f"a plausible value, |{name}| <= {bound:g} ({OPTION_SCALE_MAX:g} times its default's "
             f"magnitude, the default being {shown})" + (f"; {meaning}" if meaning else ""))


def field_meaning(cls: type, name: str) -> str:
    """The sentence of ``cls``'s docstrings (its own, then its bases') that names ````name````: an algorithm
    option's one-line meaning for ``edgesim list`` (``""`` when no docstring names it)."""
    for klass in getattr(cls, "__mro__", (cls,)):
        doc = " ".join((inspect.getdoc(klass) or "").split())
        for sentence in re.split(r"(?<!Eq\.)(?<!e\.g\.)(?<!i\.e\.)(?<!cf\.)(?<=[.;])\s+", doc):
            if f"``{name}``" in sentence:
                sentence = sentence.replace("``", "").rstrip(";")
                return sentence if len(sentence) <= 110 else sentence[:107].rstrip() + "..."
    return ""


def check_range(name: str, value, low: float, high: float, unit: str, hint: str = ""):
    """A finite number in ``[low, high]`` (a physically plausible value), else ``ValueError`` with ``hint``."""
    check_number(name, value)
    if not low <= value <= high:
        fail(name, value, f"a plausible value in [{low:g}, {high:g}] {unit}{hint}")


def noise_psd_hint(value) -> str:
    """A hint for a noise PSD that looks like W/Hz (a tiny positive number) given in the dBm/Hz field."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e-3:
        return f" (it looks like W/Hz: {value:g} W/Hz is {10 * math.log10(value) + 30:.1f} dBm/Hz)"
    return ""


def per_device(name: str, value, n_devices: int, *, minimum=None, strict=False, plausible=None) -> tuple[float, ...]:
    """A scalar or a list of length ``n_devices`` → a tuple of ``n_devices`` floats.

    ``plausible = (low, high, unit)`` also checks that each value lies in that range.
    """
    def check(label, v):
        check_number(label, v, minimum=minimum, strict=strict)
        if plausible is not None:
            check_range(label, v, *plausible)

    if isinstance(value, (list, tuple)):
        if len(value) != n_devices:
            fail(name, value, f"a number or a list of n_devices (= {n_devices}) numbers, got {len(value)}")
        for i, v in enumerate(value):
            check(f"{name}[{i}]", v)
        return tuple(float(v) for v in value)
    check(name, value)
    return (float(value),) * n_devices


Number = Union[int, float]


# --- scenario keys described once ------------------------------------------------------------------------------
# Each field's meaning, unit and allowed values live in its metadata (key(default, "meaning", unit=..., allowed=
# Rule)), and that one description both checks a value (check_keys, from __post_init__) and writes the key reference
# (edgesim.scenarios.reference), as scikit-learn's _parameter_constraints drive both its validation and its docs.
# A rule refuses a value with the same ConfigError (key, value, expected) as the check helpers above. Checks that
# span keys (min_distance_m < cell_radius_m) stay in __post_init__, after check_keys.

META = "edgesim.key"  # the metadata entry of a described field: a KeyDoc


def _g(x: float) -> str:  # a bound as the reference writes it
    return f"{x:g}"


@dataclass(frozen=True)
class Allowed:
    """What a key accepts: :meth:`check` refuses anything else (``ValueError`` naming key, value and what was
    expected), :meth:`text` says it in the reference's words. ``optional``: unset (``None``) is accepted too;
    ``also``: what the class's ``__post_init__`` checks with another key (``"< server_labeled"``), added to the text;
    ``expected``: the words of every refusal, instead of the rule's own (a message users already know)."""

    optional: bool = dataclasses.field(default=False, kw_only=True)
    also: Any = dataclasses.field(default="", kw_only=True)  # or a function of nothing returning it
    expected: str = dataclasses.field(default="", kw_only=True)

    def check(self, name: str, value: Any, cfg: Any) -> None:
        if value is None and self.optional:
            return
        if not self.expected:
            self._check(name, value, cfg)
            return
        try:
            self._check(name, value, cfg)
        except ConfigError:
            fail(name, value, self.expected)

    def _check(self, name: str, value: Any, cfg: Any) -> None:  # pragma: no cover - every rule overrides it
        raise NotImplementedError

    def text(self) -> str:
        also = self.also() if callable(self.also) else self.also
        return self._text() + (f"; {also}" if also else "") + (", or unset" if self.optional else "")

    def _text(self) -> str:  # pragma: no cover - every rule overrides it
        raise NotImplementedError

    def accepts(self, value: Any, cfg: Any = None) -> bool:
        """Whether :meth:`check` lets ``value`` through."""
        try:
            self.check("key", value, cfg)
        except ValueError:
            return False
        return True


@dataclass(frozen=True)
class Finite(Allowed):
    """A finite number, ``> minimum`` (``strict``) or ``>= minimum``; ``below``: also ``< below``; ``maximum``: also
    ``<= maximum``, a value above refused as ``noun`` in the interval (``"a fraction in [0, 1]"``, with ``why`` in
    parentheses); ``auto``: the word ``"auto"`` too; ``per_device``: such a number or a list of one per device
    (``n_devices``), a bad one refused naming it (``battery_j[2]``)."""

    minimum: Optional[float] = None
    strict: bool = False
    below: Optional[float] = None
    maximum: Optional[float] = None
    noun: str = "a number"
    why: str = ""
    auto: bool = False
    per_device: bool = False

    def _check(self, name, value, cfg):

        if self.per_device and isinstance(value, (list, tuple)):
            if len(value) != cfg.n_devices:
                fail(name, value, f"a number or a list of n_devices (= {cfg.n_devices}) numbers, got {len(value)}")
            for i, v in enumerate(value):
                self._check_one(f"{name}[{i}]", v)
        else:
            self._check_one(name, value)

    def _check_one(self, name, value):
        if self.auto and value == "auto":
            return
        if self.auto and (isinstance(value, bool) or not isinstance(value, (int, float))):
            fail(name, value, f'a number {self._bound()} or "auto"')
        check_number(name, value, minimum=self.minimum, strict=self.strict)
        if self.below is not None and value >= self.below:
            fail(name, value, f"{self.noun} in {self._bound()}")
        if self.maximum is not None and value > self.maximum:
            fail(name, value, f"{self.noun} in {self._bound()}" + (f" ({self.why})" if self.why else ""))

    def _bound(self) -> str:
        if self.maximum is not None:
            low = "(-inf" if self.minimum is None else f"{'(' if self.strict else '['}{_g(self.minimum)}"
            return f"{low}, {_g(self.maximum)}]"
        if self.minimum is None:
            return "finite"
        if self.below is not None:
            return f"{'(' if self.strict else '['}{_g(self.minimum)}, {_g(self.below)})"
        return f"{'>' if self.strict else '>='} {_g(self.minimum)}"

    def _text(self):
        return (self._bound() + (' or "auto"' if self.auto else "")
                + ("; or a list of n_devices values" if self.per_device else ""))


@dataclass(frozen=True)
class Plausible(Allowed):
    """A finite number in ``[low, high]`` of ``unit`` (a physically plausible value; ``above_low``: ``(low, high]``);
    ``hint(value)`` adds to the message (a noise PSD given in W/Hz); ``per_device``: a number or a list of one per
    device (``n_devices``)."""

    low: float = -math.inf
    high: float = math.inf
    unit: str = ""
    hint: Any = None
    per_device: bool = False
    above_low: bool = False

    def _check(self, name, value, cfg):

        if self.above_low:  # (low, high]
            check_number(name, value, minimum=self.low, strict=True)
        if self.per_device:
            per_device(name, value, cfg.n_devices, plausible=(self.low, self.high, self.unit))
        else:
            check_range(name, value, self.low, self.high, self.unit, self.hint(value) if self.hint else "")

    def _text(self):
        return (f"{'(' if self.above_low else '['}{_g(self.low)}, {_g(self.high)}]"
                + ("; or a list of n_devices values" if self.per_device else ""))


@dataclass(frozen=True)
class Integer(Allowed):
    """An integer ``>= minimum`` (and ``<= maximum``, with ``why`` saying where that bound comes from); ``auto``:
    the word ``"auto"`` too. ``maximum`` may be a function of the config being checked (a bound another key sets:
    the number of cells), ``why`` then naming it in the reference's range (``integer in [1, the number of cells]``)
    and every refusal saying the interval with its bound's value."""

    minimum: int = 0
    maximum: Any = None  # an int, or a function of the config returning one
    why: str = ""
    auto: bool = False

    def _check(self, name, value, cfg):

        if self.auto and value == "auto":
            return
        if callable(self.maximum):
            top = self.maximum(cfg)
            if isinstance(value, bool) or not isinstance(value, int) or not self.minimum <= value <= top:
                fail(name, value, f"an integer in [{self.minimum}, {top}] ({self.why})")
            return
        if self.auto and (isinstance(value, bool) or not isinstance(value, int) or value < self.minimum):
            fail(name, value, f'an integer >= {self.minimum} or "auto"')
        check_int(name, value, self.minimum)
        if self.maximum is not None and value > self.maximum:
            why = f" ({self.why})" if self.why else ""
            fail(name, value, f"an integer in [{self.minimum}, {self.maximum}]{why}")

    def _text(self):
        top = self.why if callable(self.maximum) else self.maximum
        bound = f"integer in [{self.minimum}, {top}]" if self.maximum is not None else f"integer >= {self.minimum}"
        return bound + (' or "auto"' if self.auto else "")


@dataclass(frozen=True)
class Choice(Allowed):
    """One of ``choices``: a tuple, or a registry's names — a function of the value given (which may load the
    plugins that register it) returning them, ``registered`` saying in the reference what plugins may add."""

    choices: Any = ()
    registered: str = ""
    checker: Any = None  # the registry's own check of a value (its wording), instead of the plain "one of ..."

    def names(self, value: Any = "") -> tuple:
        return tuple(self.choices(value if isinstance(value, str) else "")) if callable(self.choices) else \
            tuple(self.choices)

    def _check(self, name, value, cfg):

        if self.checker is not None:
            self.checker(value)
        else:
            check_choice(name, value, self.names(value))

    def _text(self):
        words = [f'"{c}"' for c in self.names()] + ([self.registered] if self.registered else [])
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


@dataclass(frozen=True)
class Flag(Allowed):
    """``true`` or ``false``."""

    def _check(self, name, value, cfg):

        if not isinstance(value, bool):
            fail(name, value, "true or false")

    def _text(self):
        return "true or false"


@dataclass(frozen=True)
class Described(Allowed):
    """A value whose check is written out in the class's ``__post_init__`` (a registered name, a list of them, a
    table): ``words`` says what it accepts; :func:`check_keys` leaves it to that code."""

    words: Any = ""  # or a function of nothing returning them (a registry's names, plugins included)

    def _check(self, name, value, cfg):
        return None

    def _text(self):
        return self.words() if callable(self.words) else self.words


@dataclass(frozen=True)
class Text(Allowed):
    """A string (``nonempty``: not ``""``): a path, a name, a line; ``words`` says what it is (``"a file path"``)."""

    words: str = "text"
    nonempty: bool = True

    def _check(self, name, value, cfg):

        if not isinstance(value, str) or (self.nonempty and not value):
            fail(name, value, f"{self.words} (a {'non-empty ' if self.nonempty else ''}string)")

    def _text(self):
        return self.words


@dataclass(frozen=True)
class Items(Allowed):
    """A list of ``length`` values (``None``: any number), each one that ``item`` accepts (``[H, W]``: two integers
    >= 1); a bad item is refused naming it (``accuracy_thresholds[2]``)."""

    item: Allowed = None
    length: Optional[int] = 2

    def _check(self, name, value, cfg):

        if not isinstance(value, (list, tuple)) or (self.length is not None and len(value) != self.length):
            fail(name, value, self._text())
        for i, v in enumerate(value):
            self.item.check(f"{name}[{i}]", v, cfg)

    def _text(self):
        item = self.item.text()
        return (f"a list{'' if self.length is None else f' of {self.length} values'}, each "
                + ("in " if item[:1] in "[(" else "") + item)


@dataclass(frozen=True)
class AnyOf(Allowed):
    """A value one of ``rules`` accepts (``"all"``, a count or a fraction); anything else refused with ``expected``
    (or the rules' texts joined), naming the key and the value."""

    rules: tuple = ()

    def _check(self, name, value, cfg):

        if not any(rule.accepts(value, cfg) for rule in self.rules):
            fail(name, value, self._text())

    def _text(self):
        words = [rule.text() for rule in self.rules]
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


DISTRIBUTIONS = ("uniform",)


@dataclass(frozen=True)
class Spread(Allowed):
    """A value ``item`` accepts for every device, a non-empty list of them (one per device) or a distribution table
    ``{dist = "uniform", low, high}`` of them (``low <= high``), drawn once per run (:func:`workload_per_device`);
    ``auto``: the word ``"auto"`` too."""

    item: Allowed = None
    auto: bool = False

    def _check(self, name, value, cfg):

        if self.auto and value == "auto":
            return
        if isinstance(value, dict):
            if set(value) != {"dist", "low", "high"}:
                fail(name, value, '{dist = "uniform", low = ..., high = ...} (exactly those keys)')
            check_choice(f"{name}.dist", value["dist"], DISTRIBUTIONS)
            self.item.check(f"{name}.low", value["low"], cfg)
            self.item.check(f"{name}.high", value["high"], cfg)
            if value["low"] > value["high"]:
                fail(f"{name}.high", value["high"], f"a value >= low (= {value['low']!r})")
        elif isinstance(value, (list, tuple)):
            if not value:
                fail(name, value, "a number, a non-empty list (one per device) or a distribution table")
            for i, v in enumerate(value):
                self.item.check(f"{name}[{i}]", v, cfg)
        else:
            self.item.check(name, value, cfg)

    def _text(self):
        return (self.item.text() + (' or "auto"' if self.auto else "")
                + '; also a list (one per device) or {dist = "uniform", low, high}')


@dataclass(frozen=True)
class KeyDoc:
    """A key's description: ``doc`` (one line), ``unit`` (``""``: none — a count, a name, a flag), ``allowed``."""

    doc: str
    unit: str
    allowed: Allowed


def key(default: Any = dataclasses.MISSING, doc: str = "", *, unit: str = "", allowed: Allowed,
        default_factory: Any = dataclasses.MISSING) -> Any:
    """A described dataclass field: ``default`` (or ``default_factory``), its meaning, unit and allowed values."""
    meta = {META: KeyDoc(doc, unit, allowed)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def key_doc(f: dataclasses.Field) -> Optional[KeyDoc]:
    """The :class:`KeyDoc` of a field made by :func:`key` (``None`` for any other field)."""
    return f.metadata.get(META)


def described_keys(cls: type) -> dict[str, KeyDoc]:
    """``{field name: KeyDoc}`` of the described fields of a config dataclass, in field order."""
    return {f.name: key_doc(f) for f in dataclasses.fields(cls) if key_doc(f) is not None}


def check_key(cls: type, name: str, value: Any, cfg: Any = None) -> None:
    """Check ``value`` of ``cls``'s described field ``name`` with its rule (a key its class reads before it is
    built, such as a codec's ``method``)."""
    described_keys(cls)[name].allowed.check(name, value, cfg)


def check_keys(cfg: Any) -> None:
    """Check every described field of ``cfg`` with its rule, in field order (the first bad one raises)."""
    for f in dataclasses.fields(cfg):
        doc = key_doc(f)
        if doc is not None:
            doc.allowed.check(f.name, getattr(cfg, f.name), cfg)



@dataclass(frozen=True)
class CellConfig:
    """One cell of ``system.cells``: its base station at (``x_m``, ``y_m``) (metres) and what it overrides of the
    ``[system]`` values (``None``: the system's): ``bandwidth_hz``, the cell's uplink band; ``tx_power_dbm``, the base
    station's downlink transmit power (the ``"max_power"`` association's reference signal); ``cpu_hz``, its edge
    server's CPU (cycles/s). Checked by :func:`cells_of` (one line naming ``cells[i].key``, the value and the range)."""

    x_m: float
    y_m: float
    bandwidth_hz: Optional[float] = None
    tx_power_dbm: Optional[float] = None
    cpu_hz: Optional[float] = None


def cells_of(value) -> Optional[tuple[CellConfig, ...]]:
    """``system.cells`` as :class:`CellConfig` s (``None``: unset, one cell at the origin), or ``ConfigError`` naming
    the key (``cells``, ``cells[i]``, ``cells[i].x_m``...), the value and what was expected: a non-empty list of
    tables with the keys of :data:`CELL_KEYS` (``x_m`` and ``y_m`` required), no two cells at one point, each value in
    its plausible range."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value or len(value) > MAX_CELLS:
        fail("cells", value, f"a list of 1 to {MAX_CELLS} tables {{x_m = ..., y_m = ...}} (one per base station)")
    out = []
    for i, cell in enumerate(value):
        if isinstance(cell, CellConfig):
            cell = dataclasses.asdict(cell)
        if not isinstance(cell, dict) or not {"x_m", "y_m"} <= set(cell) or not set(cell) <= set(CELL_KEYS):
            fail(f"cells[{i}]", cell, "a table with x_m and y_m (m) and optionally bandwidth_hz, tx_power_dbm, cpu_hz")
        for name in ("x_m", "y_m"):
            check_range(f"cells[{i}].{name}", cell[name], -CELL_POSITION_M_MAX, CELL_POSITION_M_MAX, "m")
        for name, (low, high), unit in (("bandwidth_hz", BANDWIDTH_HZ_RANGE, "Hz"), ("cpu_hz", CPU_FREQ_HZ_RANGE, "Hz"),
                                        ("tx_power_dbm", TX_POWER_DBM_RANGE, "dBm")):
            if cell.get(name) is not None:
                check_range(f"cells[{i}].{name}", cell[name], low, high, unit)
        out.append(CellConfig(**{k: (None if cell.get(k) is None else float(cell[k])) for k in CELL_KEYS
                                 if k in cell}))
        for j, other in enumerate(out[:-1]):
            if (other.x_m, other.y_m) == (out[-1].x_m, out[-1].y_m):
                fail(f"cells[{i}]", cell, f"a base station at a point of its own (cells[{j}] is at "
                     f"x_m = {other.x_m:g}, y_m = {other.y_m:g})")
    return tuple(out)


@dataclass(frozen=True)
class SystemConfig:
    """The wireless cell and its devices (docs/model/system_model.md).

    ``tx_power_dbm`` and ``cpu_freq_hz`` are one value for every device or a
    list with one value per device (heterogeneous devices). When
    ``channel_gain_db`` is given it fixes the gain of every device and the
    path-loss model (placement, shadowing, fading, mobility) is not used.
    ``downlink_rate_bps`` = 0 means the BS broadcast takes no time (the paper's
    assumption); download bits are still counted. ``server_freq_hz`` is the
    base station's own CPU (cycles/s) for the server phases of a round plan
    (:class:`edgesim.backend.RoundPlan`): default 1e10, ten devices' worth
    of the default 1 GHz device.
    """

    n_devices: int = key(25, "devices in the cell (N)", unit="devices",
                         allowed=Integer(1, MAX_DEVICES, why="the largest cell edgesim simulates"))
    bandwidth_hz: Number = key(1e6, "uplink bandwidth B shared by the devices (Eq. 8)", unit="Hz",
                               allowed=Plausible(low=BANDWIDTH_HZ_RANGE[0], high=BANDWIDTH_HZ_RANGE[1], unit="Hz"))
    noise_psd_dbm_per_hz: Number = key(-174.0, "noise power spectral density N0", unit="dBm/Hz", allowed=Plausible(
        low=NOISE_PSD_DBM_PER_HZ_RANGE[0], high=NOISE_PSD_DBM_PER_HZ_RANGE[1], unit="dBm/Hz", hint=noise_psd_hint))
    tx_power_dbm: Union[Number, list] = key(
        23.0, "each device's transmit power p (one value, or a list with one per device)", unit="dBm",
        allowed=Plausible(low=TX_POWER_DBM_RANGE[0], high=TX_POWER_DBM_RANGE[1], unit="dBm", per_device=True))
    channel_gain_db: Optional[Number] = key(
        None, "a fixed channel gain for every device; unset: path loss, shadowing and fading", unit="dB",
        allowed=Plausible(low=CHANNEL_GAIN_DB_RANGE[0], high=CHANNEL_GAIN_DB_RANGE[1], unit="dB", optional=True))
    cpu_freq_hz: Union[Number, list] = key(
        1e9, "each device's CPU frequency f (one value, or a list with one per device)", unit="cycles/s",
        allowed=Plausible(low=CPU_FREQ_HZ_RANGE[0], high=CPU_FREQ_HZ_RANGE[1], unit="Hz", per_device=True))
    kappa: Number = key(1e-28, "effective switched capacitance κ of the devices' CPUs (energy κ·C·f², Eq. 10)",
                        unit="J·s²/cycle³", allowed=Plausible(low=KAPPA_RANGE[0], high=KAPPA_RANGE[1],
                                                             unit="(J per cycle per Hz^2; 1e-28 is typical)"))
    access: str = key("tdma", "how devices share the uplink: a registered access scheme, its options in [access] "
                      "(docs/model/access_schemes.md)",
                      allowed=Choice(choices=access_names, checker=check_access_name,
                                     registered="a plugin's scheme (`edgesim list access`)"))
    downlink_rate_bps: Number = key(0.0, "rate of the base station's broadcast; 0: the download takes no time",
                                    unit="bit/s", allowed=Finite(minimum=0))
    cell_radius_m: Number = key(250.0, "radius of the cell devices are placed in (more than min_distance_m)",
                                unit="m", allowed=Plausible(low=0, high=CELL_RADIUS_M_MAX, unit="m", above_low=True))
    min_distance_m: Number = key(10.0, "smallest distance of a device from the base station (less than "
                                 "cell_radius_m)", unit="m", allowed=Finite(minimum=0, strict=True))
    path_loss_intercept_db: Number = key(
        128.1, "path loss at 1 km: PL = intercept + slope·log10(d/km)", unit="dB",
        allowed=Plausible(low=PATH_LOSS_INTERCEPT_DB_RANGE[0], high=PATH_LOSS_INTERCEPT_DB_RANGE[1], unit="dB"))
    path_loss_slope_db: Number = key(
        37.6, "path-loss slope per decade of distance", unit="dB/decade",
        allowed=Plausible(low=PATH_LOSS_SLOPE_DB_RANGE[0], high=PATH_LOSS_SLOPE_DB_RANGE[1], unit="dB per decade"))
    shadowing_std_db: Number = key(
        0.0, "standard deviation of log-normal shadowing; 0: none", unit="dB",
        allowed=Plausible(low=SHADOWING_STD_DB_RANGE[0], high=SHADOWING_STD_DB_RANGE[1], unit="dB"))
    rayleigh_fading: bool = key(False, "draw Rayleigh fading per round on top of path loss", allowed=Flag())
    mobility: str = key("static", "how devices move between rounds", allowed=Choice(choices=MOBILITY_MODELS))
    speed_m_per_s: Number = key(1.0, "device speed under a moving mobility model", unit="m/s",
                                allowed=Finite(minimum=0))
    server_freq_hz: Number = key(1e10, "the base station's CPU for a round's server phases", unit="cycles/s",
                                 allowed=Plausible(low=CPU_FREQ_HZ_RANGE[0], high=CPU_FREQ_HZ_RANGE[1], unit="Hz"))

    battery_j: Optional[Union[Number, list]] = key(
        None, "each device's energy budget for the run: a device whose battery is spent takes no further part; "
        "unset: unlimited", unit="J", allowed=Finite(minimum=0, strict=True, per_device=True, optional=True))
    csi: Optional[str] = key(None, 'what the base station knows of the channel when it plans: "perfect" (unset), '
                             '"estimated" (a relative Gaussian error) or "outdated" (the previous round\'s gains)',
                             allowed=Choice(choices=CSI_MODES, optional=True))
    csi_error_std: Optional[Number] = key(None, 'the standard deviation of the relative error of csi = "estimated"',
                                          allowed=Finite(minimum=0, optional=True,
                                                         also='with csi = "estimated" (needed there)'))
    csi_correlation: Optional[Number] = key(
        None, "ρ: the correlation of each device's Rayleigh fading coefficient from one round to the next "
        "(Gauss–Markov, h_t = ρ h_{t−1} + √(1 − ρ²) w_t): under csi = \"outdated\" the correlation of the true "
        "coefficient with the one planned on (1: perfect CSI, 0: independent); needs rayleigh_fading; unset: "
        "independent rounds", allowed=Finite(
            minimum=0, maximum=1, optional=True, also="with rayleigh_fading and one cell",
            expected="a correlation in [0, 1] (1: the channel stays as it was, perfect CSI under csi = 'outdated'; "
                     "0: independent rounds)"))
    cells: Optional[list] = key(
        None, "the base stations, one table each {x_m, y_m} with optional bandwidth_hz, tx_power_dbm (downlink) and "
        "cpu_hz (its edge server) overriding the system's; each cell a disc of cell_radius_m; unset: one cell at the "
        "origin (docs/model/system_model.md, Several cells)", unit="m",
        allowed=Described(words=f"a list of 1 to {MAX_CELLS} tables, no two at one point, or unset"))
    placement: str = key("uniform_union", 'how devices are placed over several cells: "uniform_union" (uniform in area '
                         'over the union of the cells\' discs) or "per_cell" (device n in cell n mod C, uniform in its '
                         'disc)', allowed=Choice(choices=PLACEMENTS))
    association: str = key("nearest", 'which cell serves a device: "nearest" base station, "max_gain" (largest '
                           'average gain: path loss and shadowing), "max_power" (largest average received downlink '
                           'power) or a plugin\'s rule',
                           allowed=Choice(choices=association_names, checker=check_association_name,
                                          registered="a plugin's rule (`edgesim list association`)"))
    frequency_reuse: int = key(1, "the band split into this many equal sub-bands, cell c on sub-band c mod n; 1: "
                               "every cell on the whole band",
                               allowed=Integer(1, maximum=lambda cfg: len(cells_of(cfg.cells) or (None,)),
                                               why="the number of cells"))

    def __post_init__(self):
        check_keys(self)  # each key's own range (its metadata: edgesim.config.key); then what spans keys
        if self.min_distance_m >= self.cell_radius_m:
            fail("min_distance_m", self.min_distance_m, f"a distance < cell_radius_m (= {self.cell_radius_m})")
        if self.channel_gain_db is None:
            check_path_gains(self.path_loss_intercept_db, self.path_loss_slope_db, self.min_distance_m,
                             self.cell_radius_m)
        if self.csi == "estimated":
            if self.csi_error_std is None:
                fail("csi_error_std", None, "a number >= 0 (the relative error's standard deviation) with csi = "
                                            "'estimated'")
        elif self.csi_error_std is not None:
            fail("csi_error_std", self.csi_error_std, f"unset: it applies to csi = 'estimated' (csi = {self.csi!r})")
        if self.csi_correlation is not None and (not self.rayleigh_fading or self.channel_gain_db is not None):
            fail("csi_correlation", self.csi_correlation,
                 "unset: it correlates the Rayleigh fading of consecutive rounds, and this cell has none "
                 + ("(channel_gain_db fixes every gain)" if self.channel_gain_db is not None
                    else "(rayleigh_fading = false)"))
        cells = cells_of(self.cells)
        n_cells = 1 if cells is None else len(cells)
        if n_cells > 1 and self.channel_gain_db is not None:
            fail("channel_gain_db", self.channel_gain_db, f"unset with several cells (cells has {n_cells}): a fixed "
                 f"gain has no distance, so the gain to the other cells is undefined")
        if n_cells > 1 and self.csi_correlation is not None:
            fail("csi_correlation", self.csi_correlation, f"unset with several cells (cells has {n_cells}): the "
                 f"correlated fading is of one cell's links (not implemented per link of several cells)")

    @property
    def cell_configs(self) -> tuple[CellConfig, ...]:
        """The cells (:class:`CellConfig`): ``system.cells``, or one cell at the origin with the system's values."""
        cells = cells_of(self.cells)
        return (CellConfig(0.0, 0.0),) if cells is None else cells

    @property
    def n_cells(self) -> int:
        """The number of cells (1 when ``cells`` is unset)."""
        return 1 if self.cells is None else len(self.cells)

    @property
    def noise_psd_w_per_hz(self) -> float:
        return dbm_per_hz_to_w_per_hz(self.noise_psd_dbm_per_hz)

    @property
    def rounds_only(self) -> dict[str, object]:
        """The settings given here that apply to rounds only (``round_mode`` ``"sync"`` or ``"deadline"``), key →
        value: ``battery_j`` (each device is charged its round's energy at the round's end), an imperfect ``csi``
        (the base station plans a round on its estimate, the devices transmit on the truth) and several ``cells``
        (their interference is timed within rounds). An asynchronous run
        refuses them in one line (:func:`edgesim.asynchrony.check_async_system`)."""
        imperfect_csi = None if self.csi in (None, CSI_MODES[0]) else self.csi
        several = self.cells if self.n_cells > 1 else None  # several cells: rounds only, for now
        return {key: value for key, value in (("battery_j", self.battery_j), ("csi", imperfect_csi),
                                              ("cells", several)) if value is not None}

    @property
    def batteries_j(self) -> Optional[tuple[float, ...]]:
        """Each device's energy budget for the run (J), or ``None``: unlimited (``battery_j`` unset)."""
        return None if self.battery_j is None else per_device("battery_j", self.battery_j, self.n_devices)

    @property
    def tx_power_w(self) -> tuple[float, ...]:
        """Transmit power of each device in watts."""
        return tuple(dbm_to_w(p) for p in per_device("tx_power_dbm", self.tx_power_dbm, self.n_devices))

    @property
    def cpu_freqs_hz(self) -> tuple[float, ...]:
        """CPU frequency of each device in cycles/s."""
        return per_device("cpu_freq_hz", self.cpu_freq_hz, self.n_devices)

    @property
    def fixed_gain(self) -> Optional[float]:
        """The linear channel gain fixed for every device, or ``None`` (path-loss model)."""
        return None if self.channel_gain_db is None else db_to_linear(self.channel_gain_db)

    @property
    def heterogeneous(self) -> bool:
        """True when devices differ in CPU, power or (path-loss model) channel."""
        return (
            len(set(self.cpu_freqs_hz)) > 1
            or len(set(self.tx_power_w)) > 1
            or self.channel_gain_db is None
        )


def __getattr__(name: str):
    """``ROUND_MODES``, for code written before the rules' registry: the round modes registered now
    (:func:`edgesim.async_rules.round_modes`)."""
    if name == "ROUND_MODES":
        return round_modes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class BudgetConfig:
    """The training-service budget: ``total_time_s`` (T) over ``rounds`` (G), Eq. (12)–(13).

    ``round_mode`` ``"sync"`` ends a round when the last upload arrives (the
    paper's); ``"deadline"`` ends it at ``deadline_s`` (default T/G) and drops
    uploads not finished by then; a registered asynchronous rule (``"fedasync"``,
    ``"fedbuff"``, plugins: :mod:`edgesim.async_rules`) has slots instead of rounds.
    """

    total_time_s: Number = key(250.0, "training-service time budget T (Eq. 12)", unit="s",
                               allowed=Finite(minimum=0, strict=True))
    rounds: int = key(100, "rounds G the budget is split over; the per-round budget is T/G (Eq. 13), and the run's "
                      "length unless run.rounds is set", unit="rounds", allowed=Integer(1))
    round_mode: str = key("sync", "when a round ends: at the last upload, at a deadline, or asynchronous aggregation "
                          "(a registered rule)",
                          allowed=Choice(choices=round_modes, registered="an asynchronous rule of a plugin"))
    deadline_s: Optional[Number] = key(
        None, 'a round\'s deadline under round_mode = "deadline"; unset: T/G (fedasync/fedbuff: each update\'s latency '
        'target τ of the policies that need one: deadline_feasible, oort, min_energy)', unit="s",
        allowed=Finite(minimum=0, strict=True, optional=True))

    def __post_init__(self):
        check_keys(self)

    @property
    def round_budget_s(self) -> float:
        """T/G in seconds."""
        return float(self.total_time_s) / self.rounds

    @property
    def round_deadline_s(self) -> float:
        """The deadline of a round in ``"deadline"`` mode (seconds after round start)."""
        return float(self.deadline_s) if self.deadline_s is not None else self.round_budget_s


@dataclass(frozen=True)
class WorkloadConfig:
    """Per-device work of a round, in cycles and bits (Eq. (23)).

    ``cycles_per_sample`` is C_tra, ``samples_per_device`` D,
    ``local_iterations`` I, ``sr_cycles`` C_SR,
    ``pseudo_label_cycles_per_model`` C_pse, ``model_bits`` m.
    ``cycles_source`` says where C_tra comes from: ``"given"`` (this file) or
    ``"flops"`` (the model's forward+backward FLOPs per sample ÷
    ``flops_per_cycle``, computed by the learning backend).
    ``model_bits``, ``samples_per_device``, ``sr_cycles`` and
    ``pseudo_label_cycles_per_model`` may be ``"auto"``: computed by the
    learning backend from the model and the data (see ``learning/sizing.py``);
    ``edgesim plan`` shows the numbers used. ``model_bits`` and
    ``samples_per_device`` are ``"auto"`` unless given — the run's own model
    (32 bits per parameter) and the median device's samples in the run's own
    partition — so a learning run is never charged for a paper's model or data
    it does not have; a physics-only run (no model, no data) must give both.
    In a physics-only run ``cycles_per_sample`` and ``samples_per_device`` may
    also be per device: a list (one value per device) or a distribution table
    ``{dist = "uniform", low = ..., high = ...}`` drawn once per run from the
    seed (:func:`workload_per_device`). ``local_iterations`` may be per device
    the same way (:func:`iterations_per_device`), in a physics-only run and
    with the algorithms that train each device its own number of epochs (the
    FedAvg family: ``edgesim.learning.registry.AlgorithmSpec.per_device_iterations``).
    """

    local_iterations: Union[int, list, dict] = key(
        1, "local epochs I a device trains per round (Eq. 7)", unit="epochs",
        allowed=Spread(item=Integer(1), also="a list or a table only in a physics-only run or with the FedAvg family"))
    cycles_per_sample: Union[Number, list, dict] = key(
        1e6, "CPU cycles C_tra to train on one sample once", unit="cycles/sample",
        allowed=Spread(item=Finite(minimum=0), also="a list or a table only in a physics-only run"))
    samples_per_device: Union[int, str, list, dict] = key(
        "auto", "samples D per device that `edgesim plan` assumes (a run charges each device for the data it holds); "
        "\"auto\": the median device's in the run's partition (a physics-only run must give it)", unit="samples",
        allowed=Spread(item=Integer(1), auto=True, also="a list or a table only in a physics-only run"))
    sr_cycles: Union[Number, str] = key(0.0, "cycles C_SR of DoFed-SPP's similarity step per round; \"auto\": from "
                                        "the model", unit="cycles", allowed=Finite(minimum=0, auto=True))
    pseudo_label_cycles_per_model: Union[Number, str] = key(
        0.0, "cycles C_pse to pseudo-label with one model; \"auto\": from the model", unit="cycles",
        allowed=Finite(minimum=0, auto=True))
    model_bits: Union[Number, str] = key(
        "auto", "size m of one model upload; \"auto\": 32 bits per parameter of the run's model (a physics-only run "
        "must give it)", unit="bit", allowed=Finite(minimum=0, strict=True, auto=True))
    cycles_source: str = key("given", "where cycles_per_sample comes from: this file, or the model's FLOPs",
                             allowed=Choice(choices=("given", "flops")))
    flops_per_cycle: Number = key(8.0, 'FLOPs a device does per cycle (cycles_source = "flops")', unit="FLOP/cycle",
                                  allowed=Finite(minimum=0, strict=True))

    def __post_init__(self):
        check_keys(self)

    @property
    def per_device(self) -> bool:
        """Whether ``cycles_per_sample`` or ``samples_per_device`` differs by device (a list or a table)."""
        return not all(isinstance(v, (int, float)) or v == "auto"  # "auto": one number, from the partition
                       for v in (self.cycles_per_sample, self.samples_per_device))

    @property
    def iterations_vary(self) -> bool:
        """Whether ``local_iterations`` differs by device (a list or a table)."""
        return not isinstance(self.local_iterations, int)

    @property
    def varies(self) -> bool:
        """Whether any device's round work differs by its own C_k, D_k or I_k (a list or a table of any)."""
        return self.per_device or self.iterations_vary


WORKLOAD_DISTRIBUTIONS = DISTRIBUTIONS
STREAM_WORKLOAD = {"cycles_per_sample": 0xD0, "samples_per_device": 0xD1, "local_iterations": 0xD2}  # own streams


def workload_per_device(workload: "WorkloadConfig", n_devices: int, seed: int) -> tuple:
    """Each device's ``cycles_per_sample`` C_k (cycles/sample) and ``samples_per_device`` D_k: a scalar for all, a
    list (its length must be ``n_devices``), or a uniform draw in ``[low, high]`` once per run from
    ``default_rng((seed, stream))`` (its own stream, :data:`STREAM_WORKLOAD`; D_k an integer, both ends included).
    Two NumPy arrays."""
    return (_per_device_values(workload, "cycles_per_sample", n_devices, seed),
            _per_device_values(workload, "samples_per_device", n_devices, seed))


def iterations_per_device(workload: "WorkloadConfig", n_devices: int, seed: int):
    """Each device's ``local_iterations`` I_k (local epochs a round, an integer >= 1): one for all, a list (its
    length must be ``n_devices``), or a uniform integer draw in ``[low, high]`` (both ends included) once per run
    from ``default_rng((seed, 0xD2))``, a stream of its own (:data:`STREAM_WORKLOAD`). A NumPy array of ints."""
    return _per_device_values(workload, "local_iterations", n_devices, seed).astype(int)


def _per_device_values(workload: "WorkloadConfig", name: str, n_devices: int, seed: int):
    """Key ``name`` of ``workload`` per device as a float array: a scalar for all, a list of ``n_devices`` values, or
    a uniform draw from its own stream (integers for the integer keys)."""
    import numpy as np

    value = getattr(workload, name)
    if isinstance(value, dict):
        rng = np.random.default_rng((seed, STREAM_WORKLOAD[name]))
        if name in ("samples_per_device", "local_iterations"):
            return rng.integers(int(value["low"]), int(value["high"]) + 1, n_devices).astype(float)
        return rng.uniform(float(value["low"]), float(value["high"]), n_devices)
    if isinstance(value, (list, tuple)):
        if len(value) != n_devices:
            fail(name, value, f"a list of n_devices (= {n_devices}) values, got {len(value)}")
        return np.asarray(value, dtype=float)
    return np.full(n_devices, float(value))


def field_names(cls) -> tuple[str, ...]:
    """The field names of a config dataclass (the keys its TOML section may hold)."""
    return tuple(f.name for f in fields(cls))


MISSING = object()  # a ConfigError part that was not given

# An option an error's advice names, marked in the message so that each front end words it in its own terms
# (edgesim.scenarios.cli: ``--out``, ``add --overwrite``; edgesim.scenarios.api: ``out=``, ``pass overwrite=True``):
# ``⟨name⟩`` the option, ``⟨+name⟩`` "add the option", ``⟨name=⟩VALUE`` the option given VALUE. ``name`` is the
# option's name on the command line without its dashes (``out``, ``data-dir``); no layer below the front ends
# spells a command-line flag.
MARK = re.compile(r"⟨(\+?)([a-z][a-z-]*)(=?)⟩")


def marked_options(text: str) -> tuple[str, ...]:
    """The names of the options marked in ``text``, first mention first (``"⟨out=⟩r: ⟨+overwrite⟩"``: out,
    overwrite)."""
    return tuple(dict.fromkeys(m.group(2) for m in MARK.finditer(text)))


def worded(text: str, word: Callable[[str, str], str]) -> str:
    """``text`` with each option mark replaced by ``word(name, form)``, ``form`` one of ``""``, ``"+"``, ``"="``."""
    return MARK.sub(lambda m: word(m.group(2), m.group(1) or m.group(3)), text)


def cli_word(name: str, form: str) -> str:
    """An option a message advises, in the command line's words: ``⟨out⟩`` → ``--out``, ``⟨+overwrite⟩`` → ``add
    --overwrite``, ``⟨out=⟩runs/a`` → ``--out runs/a``."""
    return {"": f"--{name}", "+": f"add --{name}", "=": f"--{name} "}[form]


def as_written(text: str) -> str:
    """``text`` as a file keeps it (an ``INCOMPLETE`` note, a sweep's status column): its option marks in the
    command line's words, the words the docs use, so that nobody reading the file by hand meets a mark."""
    return worded(text, cli_word)


class ConfigError(ValueError):
    """A configuration value is invalid: one line naming where, the key, the value and what was expected.

    Its parts are attributes: ``where`` (the file and table, or the option: ``"s.toml: [system]"``, ``"out"``),
    ``key``, ``value`` (:data:`MISSING` when none), ``expected`` — each ``None`` where the message does not
    have it — and ``options``, the names of the options its advice names (``("out", "overwrite")``). Those are
    marked in the message (:data:`MARK`); ``str(error)`` keeps the marks, so that an error wrapped into another
    keeps them, and each front end words them where it shows the message (:meth:`worded`). Built from parts
    alone (``ConfigError(key=..., value=..., expected=...)``) the message is ``"[where: ]key = value: expected
    ..."``.
    """

    def __init__(self, message: str = "", *, where: Optional[str] = None, key: Optional[str] = None,
                 value=MISSING, expected: Optional[str] = None, options: Optional[tuple[str, ...]] = None):
        if not message and key is not None:
            message = f"{key} = {value!r}" if value is not MISSING else key
            message = f"{message}: expected {expected}" if expected is not None else message
            message = f"{where}: {message}" if where else message
        super().__init__(message)
        self.where, self.key, self.value, self.expected = where, key, value, expected
        self.options = marked_options(message) if options is None else tuple(options)

    @property
    def message(self) -> str:
        """The message as raised, option marks kept."""
        return str(self.args[0]) if self.args else ""

    def worded(self, word: Callable[[str, str], str]) -> str:
        """The message with its options in a front end's words (:func:`worded`)."""
        return worded(self.message, word)

    def reworded(self, message: str) -> "ConfigError":
        """The same error (class and parts) with ``message``: what a layer that adds to an error raises."""
        out = type(self)(message, key=self.key, value=self.value, expected=self.expected)
        out.where, out.options = self.where, tuple(dict.fromkeys((*self.options, *out.options)))
        return out

    def at(self, where: str) -> "ConfigError":
        """The same error found at ``where`` (a file and table): its message prefixed, its parts kept."""
        out = self.reworded(f"{where}: {self.message}")
        out.where = f"{where}: {self.where}" if self.where else where
        return out


def build_config(cls: type, values, where: str):
    """Instantiate the config dataclass ``cls`` from a mapping of its fields.

    Unknown keys and invalid values raise :class:`ConfigError` prefixed with
    ``where`` (e.g. ``"scenarios/x.toml: [system]"``).
    """
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a table, got {values!r}")
    names = field_names(cls)
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} (= {values[unknown[0]]!r}); "
            f"expected one of: {', '.join(sorted(names))}"
        )
    try:
        return cls(**values)
    except ConfigError as e:
        raise e.at(where) from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None
