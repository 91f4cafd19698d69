"""How edgesim's figures look: the paper and slides styles, the figure width, and one line style per algorithm.

- Fonts are embedded as TrueType (Type 42) in PDF and PostScript, and SVG keeps text as text
  (``svg.fonttype = "none"``): IEEE PDF eXpress rejects the Type 3 fonts matplotlib embeds by default
  (:data:`FONT_RC`, applied whenever a figure is saved).
- Colours are Okabe and Ito's colour-blind-safe palette (Okabe & Ito, "Color Universal Design", 2008;
  Wong, Nature Methods 8:441, 2011), yellow last (faint on white). Each algorithm also gets its own line
  style and marker, so curves stay apart in grey print: the i-th algorithm of a study (the papers' order
  first, then by name, over the whole study so that every figure of it agrees) gets colour i mod 8,
  line style i mod 4 and marker i mod 10 — distinct triples for up to 40 algorithms.
- ``paper`` (default): a 3.4 in column (IEEE two-column), fonts 6–8 pt as drawn. ``slides``: 5.5 in wide,
  fonts 1.8 times and lines 1.5 times as large. ``width_in`` sets the column width of either; every
  figure's size scales with it (a full-page figure is 7.0/3.4 of it), its fonts stay the style's.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Optional

from edgesim.config import ConfigError

COLUMN_WIDTH_IN = 3.4
PAGE_WIDTH_IN = 7.0

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
ALGORITHM_ORDER = ("dofed_spp", "dofedspp", "dofed-spp", "fedavg", "fedprox", "fedbn", "fedfomo", "fedbe", "local")

FONT_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none"}


@dataclass(frozen=True)
class FigureStyle:
    """``width_in``: the column width figures are sized from (in); ``font_scale``, ``line_scale``: multipliers
    of the font sizes (pt) and line widths the figures are drawn with."""

    name: str
    width_in: float
    font_scale: float = 1.0
    line_scale: float = 1.0


STYLES = {
    "paper": FigureStyle("paper", COLUMN_WIDTH_IN),
    "slides": FigureStyle("slides", 5.5, font_scale=1.8, line_scale=1.5),
}
_CURRENT: contextvars.ContextVar[FigureStyle] = contextvars.ContextVar("edgesim_figure_style", default=STYLES["paper"])


def figure_style(name: str = "paper", width_in: Optional[float] = None) -> FigureStyle:
    """The style ``name`` (``paper`` or ``slides``), with its width set to ``width_in`` when given;
    :class:`ConfigError` naming the option for anything else."""
    if name not in STYLES:
        raise ConfigError(f"⟨style=⟩{name!r}: expected one of {', '.join(STYLES)}")
    style = STYLES[name]
    if width_in is not None:
        if not (isinstance(width_in, (int, float)) and 1.0 <= width_in <= 20.0):
            raise ConfigError(f"⟨width=⟩{width_in!r}: expected a figure width in inches between 1 and 20 (3.4 is an "
                              "IEEE column, 7.0 a page)")
        style = replace(style, width_in=float(width_in))
    return style


@contextlib.contextmanager
def use_style(name: str = "paper", width_in: Optional[float] = None) -> Iterator[FigureStyle]:
    """Draw the figures made inside the ``with`` block in that style (context-local, so nothing leaks)."""
    token = _CURRENT.set(figure_style(name, width_in))
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)


def set_style(name: str = "paper", width_in: Optional[float] = None) -> FigureStyle:
    """Draw every later figure of this context in that style (the command line's ``--style``/``--width``)."""
    _CURRENT.set(figure_style(name, width_in))
    return _CURRENT.get()


def current_style() -> FigureStyle:
    return _CURRENT.get()


def figure_size(width_in: float, height_in: float) -> tuple[float, float]:
    """A figure drawn as ``width_in`` x ``height_in`` for a 3.4 in column, scaled to the current style's width."""
    k = current_style().width_in / COLUMN_WIDTH_IN
    return width_in * k, height_in * k


def fs(points: float) -> float:
    """A font size (pt) in the current style."""
    return points * current_style().font_scale


def lw(points: float) -> float:
    """A line width (pt) in the current style."""
    return points * current_style().line_scale


def study_order(algorithms: Iterable[str]) -> list[str]:
    """The algorithms of a study in their figure order: the papers' order first, then by name."""
    known = {a: i for i, a in enumerate(ALGORITHM_ORDER)}
    return sorted(set(algorithms), key=lambda a: (known.get(a, len(known)), a))


def algorithm_styles(algorithms: Iterable[str]) -> dict[str, dict]:
    """{algorithm: {color, linestyle, marker}} over a study's algorithms (module docstring); keyword arguments of
    ``Axes.plot``."""
    return {a: {"color": OKABE_ITO[i % len(OKABE_ITO)], "linestyle": LINESTYLES[i % len(LINESTYLES)],
                "marker": MARKERS[i % len(MARKERS)]}
            for i, a in enumerate(study_order(algorithms))}
