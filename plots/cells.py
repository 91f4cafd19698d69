"""The cells of a run with several cells (``cells.png``): base stations, their discs and the devices coloured by the
cell that serves them, drawn from the run folder's ``cells.csv`` (its data) and ``config.toml`` (the disc radius)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from edgesim.plots.save import save_figure
from edgesim.plots.style import FONT_RC, OKABE_ITO, figure_size, fs
from edgesim.results.files import CELLS, CELLS_FIGURE
from edgesim.results.reading import read_config, read_csv_rows


def _colour(cell: int) -> str:
    return OKABE_ITO[cell % (len(OKABE_ITO) - 1)]  # yellow (the last) is faint on white: not used


def plot_cells(run_dir: Path, formats: Iterable[str] = ("png",), title: str = "") -> list[Path]:
    """``cells.<format>`` in ``run_dir`` from its ``cells.csv``: each base station (a triangle, its disc of
    ``cell_radius_m`` dashed), each device a dot in its serving cell's colour; the legend gives each cell's devices
    and mean SINR in round 0. Returns the files written."""
    run_dir = Path(run_dir)
    _, rows = read_csv_rows(run_dir / CELLS)
    radius_m = float(read_config(run_dir).get("system", {}).get("cell_radius_m", 250.0))
    fig, ax = plt.subplots(figsize=figure_size(3.4, 3.2), dpi=200)
    for row in rows:
        if row["kind"] != "bs":
            continue
        c, x, y = int(row["cell"]), float(row["x_m"]), float(row["y_m"])
        mine = [r for r in rows if r["kind"] == "device" and int(r["cell"]) == c]
        sinr = f", {float(row['mean_sinr_db']):.1f} dB" if row["mean_sinr_db"] else ""
        ax.scatter([float(r["x_m"]) for r in mine], [float(r["y_m"]) for r in mine], s=6, color=_colour(c),
                   label=f"cell {c}: {len(mine)} devices{sinr}")
        ax.add_patch(plt.Circle((x, y), radius_m, fill=False, linestyle="--", linewidth=0.5, color=_colour(c)))
        ax.scatter([x], [y], marker="^", s=30, color="k", zorder=3)
    ax.set_aspect("equal")
    ax.autoscale_view()
    ax.set_xlabel("x (m)", fontsize=fs(7))
    ax.set_ylabel("y (m)", fontsize=fs(7))
    ax.tick_params(labelsize=fs(6))
    ax.legend(fontsize=fs(5), frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title="serving cell, mean SINR", title_fontsize=fs(5))
    ax.set_title(title or "cells (base stations ▲)", fontsize=fs(7))
    fig.tight_layout()
    out = []
    try:
        for f in formats:
            p = run_dir / f"{CELLS_FIGURE}.{f}"
            with matplotlib.rc_context({"svg.hashsalt": "edgesim", **FONT_RC}):
                save_figure(fig, p, metadata={"Date": None} if f == "svg" else ({"CreationDate": None} if f == "pdf"
                                                                                 else None))
            out.append(p)
    finally:
        plt.close(fig)
    return out
