"""Every figure's data as a CSV beside it: what is drawn, read back from the figure's own artists.

One row per drawn point, columns ``panel`` (the axes' title, or ``1``, ``2``, ... when untitled),
``x_label``, ``y_label``, ``series`` (the legend label; ``band`` rows are the filled min–max
polygons, ``bar`` the bars, ``cell`` the heat-map cells), ``x``, ``y`` and ``value`` (a heat-map
cell's value, a bar's error, else empty). Read from the artists, so the CSV holds exactly the
numbers of the figure in the units of its axes (e.g. accuracy in percent, uplink in Mbit), and a
figure added later gets its CSV with no extra code. Bars and cells are given in data coordinates:
a bar's ``x`` is its centre and ``y`` its height; a cell's ``x``/``y`` are its column/row index
(the tick labels name them).
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle

HEADER = ("panel", "x_label", "y_label", "series", "x", "y", "value")


def _num(v) -> str:
    v = float(v)
    return "" if not math.isfinite(v) else repr(v)


def figure_rows(fig) -> list[tuple]:
    """The rows of :data:`HEADER` for every line, band, bar, scatter and image of ``fig``'s axes."""
    rows = []
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    for k, ax in enumerate(axes, start=1):
        panel = ax.get_title() or str(k)
        xl, yl = ax.get_xlabel(), ax.get_ylabel()
        for line in ax.get_lines():
            label = str(line.get_label())
            if label.startswith("_child") or label.startswith("_line"):
                label = ""
            xs, ys = (np.asarray(a, dtype=float).ravel() for a in line.get_data())
            rows += [(panel, xl, yl, label, _num(x), _num(y), "") for x, y in zip(xs, ys)]
        for coll in ax.collections:
            if isinstance(coll, PolyCollection):
                label = coll.get_label() if not str(coll.get_label()).startswith("_") else ""
                for path in coll.get_paths():
                    rows += [(panel, xl, yl, f"band {label}".strip(), _num(x), _num(y), "")
                             for x, y in path.vertices]
            elif isinstance(coll, PathCollection):
                label = coll.get_label() if not str(coll.get_label()).startswith("_") else ""
                rows += [(panel, xl, yl, label, _num(x), _num(y), "") for x, y in coll.get_offsets()]
        for container in ax.containers:
            label = container.get_label() if not str(container.get_label()).startswith("_") else "bar"
            for patch in getattr(container, "patches", []):
                if isinstance(patch, Rectangle):
                    rows.append((panel, xl, yl, label, _num(patch.get_x() + patch.get_width() / 2),
                                 _num(patch.get_height()), ""))
        for image in ax.images:
            if isinstance(image, AxesImage):
                data = np.ma.filled(np.ma.asarray(image.get_array(), dtype=float), np.nan)
                if data.ndim == 2:
                    rows += [(panel, xl, yl, "cell", str(j), str(i), _num(data[i, j]))
                             for i in range(data.shape[0]) for j in range(data.shape[1])]
    return rows


def figure_csv(fig) -> str:
    """``fig``'s data (:func:`figure_rows`) as CSV text with :data:`HEADER`."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(figure_rows(fig))
    return buf.getvalue()
