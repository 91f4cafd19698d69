"""Input checks shared by the formula modules: bad input raises ``ValueError`` quoting the value."""

from __future__ import annotations

import math


def finite(name: str, value: float) -> float:
    """``value`` as a float, or ``ValueError`` if it is NaN or infinite."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name}(={value}) must be a finite number")
    return value


def positive(name: str, value: float) -> float:
    """``value`` as a float, or ``ValueError`` unless it is finite and > 0."""
    value = finite(name, value)
    if value <= 0:
        raise ValueError(f"{name}(={value}) must be > 0")
    return value


def non_negative(name: str, value: float) -> float:
    """``value`` as a float, or ``ValueError`` unless it is finite and >= 0."""
    value = finite(name, value)
    if value < 0:
        raise ValueError(f"{name}(={value}) must be >= 0")
    return value


def count(name: str, value: int, minimum: int = 0) -> int:
    """``value`` as an int, or ``ValueError`` unless it is an integer >= ``minimum``."""
    try:
        ok = not isinstance(value, bool) and int(value) == value and value >= minimum
    except (TypeError, ValueError, OverflowError):  # inf, NaN, None, "x": not a count either
        ok = False
    if not ok:
        raise ValueError(f"{name}(={value}) must be an integer >= {minimum}")
    return int(value)
