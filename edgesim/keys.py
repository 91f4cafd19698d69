"""Scenario keys described once: each field's meaning, unit and allowed values live in its metadata, and that one
description both checks a value and writes the key reference.

A config dataclass declares a key as ``name: T = key(default, "meaning", unit="Hz", allowed=Interval(...))``
(:func:`key`); its ``__post_init__`` calls :func:`check_keys`, which checks every such field with its
:class:`Allowed` rule, and ``docs/scenario_reference.md`` (:mod:`edgesim.scenarios.reference`) prints the same
rule's :meth:`Allowed.text` — so the documented range is the checked one, as scikit-learn's
``_parameter_constraints`` drive both its validation and its docs. Checks that span fields (``min_distance_m <
cell_radius_m``) stay in ``__post_init__`` after :func:`check_keys`. A rule refuses a value with the same
:class:`edgesim.config.ConfigError` (key, value, expected) the hand-written checks gave.

Torch-free, standard library only; the check helpers of :mod:`edgesim.config` are imported when a rule runs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional

META = "edgesim.key"  # the metadata entry of a described field: a KeyDoc


def _g(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Allowed:
    """What a key accepts: :meth:`check` refuses anything else (``ValueError`` naming key, value and what was
    expected), :meth:`text` says it in the reference's words. ``optional``: unset (``None``) is accepted too."""

    optional: bool = dataclasses.field(default=False, kw_only=True)

    def check(self, name: str, value: Any, cfg: Any) -> None:
        if value is None and self.optional:
            return
        self._check(name, value, cfg)

    def _check(self, name: str, value: Any, cfg: Any) -> None:  # pragma: no cover - every rule overrides it
        raise NotImplementedError

    def text(self) -> str:
        return self._text() + (", or unset" if self.optional else "")

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
class Number(Allowed):
    """A finite number, ``> minimum`` (``strict``) or ``>= minimum``; ``below``: also ``< below``."""

    minimum: Optional[float] = None
    strict: bool = False
    below: Optional[float] = None

    def _check(self, name, value, cfg):
        from edgesim.config import check_number, fail

        check_number(name, value, minimum=self.minimum, strict=self.strict)
        if self.below is not None and value >= self.below:
            fail(name, value, f"a number in [{_g(self.minimum)}, {_g(self.below)})")

    def _text(self):
        if self.minimum is None:
            return "finite"
        if self.below is not None:
            return f"[{_g(self.minimum)}, {_g(self.below)})"
        return f"{'>' if self.strict else '>='} {_g(self.minimum)}"


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
        from edgesim.config import check_number, check_range, per_device

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
    the word ``"auto"`` too."""

    minimum: int = 0
    maximum: Optional[int] = None
    why: str = ""
    auto: bool = False

    def _check(self, name, value, cfg):
        from edgesim.config import check_int, fail

        if self.auto and value == "auto":
            return
        if self.auto and (isinstance(value, bool) or not isinstance(value, int) or value < self.minimum):
            fail(name, value, f'an integer >= {self.minimum} or "auto"')
        check_int(name, value, self.minimum)
        if self.maximum is not None and value > self.maximum:
            why = f" ({self.why})" if self.why else ""
            fail(name, value, f"an integer in [{self.minimum}, {self.maximum}]{why}")

    def _text(self):
        bound = f"integer in [{self.minimum}, {self.maximum}]" if self.maximum is not None else \
            f"integer >= {self.minimum}"
        return bound + (' or "auto"' if self.auto else "")


@dataclass(frozen=True)
class Choice(Allowed):
    """One of ``choices``: a tuple, or a registry's names — a function of the value given (which may load the
    plugins that register it) returning them, ``registered`` saying in the reference what plugins may add."""

    choices: Any = ()
    registered: str = ""

    def names(self, value: Any = "") -> tuple:
        return tuple(self.choices(value if isinstance(value, str) else "")) if callable(self.choices) else \
            tuple(self.choices)

    def _check(self, name, value, cfg):
        from edgesim.config import check_choice

        check_choice(name, value, self.names(value))

    def _text(self):
        words = [f'"{c}"' for c in self.names()] + ([self.registered] if self.registered else [])
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


@dataclass(frozen=True)
class Flag(Allowed):
    """``true`` or ``false``."""

    def _check(self, name, value, cfg):
        from edgesim.config import fail

        if not isinstance(value, bool):
            fail(name, value, "true or false")

    def _text(self):
        return "true or false"


@dataclass(frozen=True)
class Described(Allowed):
    """A value whose check is written out in the class's ``__post_init__`` (a registered name, a list of them, a
    table): ``words`` says what it accepts; :func:`check_keys` leaves it to that code."""

    words: str = ""

    def _check(self, name, value, cfg):
        return None

    def _text(self):
        return self.words


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


def check_keys(cfg: Any) -> None:
    """Check every described field of ``cfg`` with its rule, in field order (the first bad one raises)."""
    for f in dataclasses.fields(cfg):
        doc = key_doc(f)
        if doc is not None:
            doc.allowed.check(f.name, getattr(cfg, f.name), cfg)
