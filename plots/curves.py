"""Accuracy against simulated time, uplink bits and energy — from ``rounds.csv`` of one or more runs.

Figures are sized for a paper column (3.4 in wide), with units on every axis and
a legend that names the algorithms. Several runs of the same algorithm (seeds)
are drawn as their mean with a min–max band, on a common time grid.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Iterable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

COLUMN_WIDTH_IN = 3.4
X_AXES = {
    "time_s": ("Simulated time (s)", 1.0),
    "cum_bits_up": ("Cumulative uplink (Mbit)", 1e-6),
    "cum_energy_j": ("Cumulative device energy (J)", 1.0),
}


def read_rounds(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    """``rounds.csv`` of a run → {algorithm: {column: array}} (numeric columns only)."""
    path = Path(run_dir) / "rounds.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no rounds.csv — is {run_dir} a finished run folder?")
    cols: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for k, v in row.items():
                if k == "algorithm":
                    continue
                cols[row["algorithm"]][k].append(float(v) if v not in ("", None) else np.nan)
    return {alg: {k: np.asarray(v, dtype=float) for k, v in c.items()} for alg, c in cols.items()}


def _with_origin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = ~np.isnan(y)
    return x[keep], y[keep]


def plot_accuracy(
    run_dirs: Iterable[Path], out_png: Path, x: str = "time_s", metric: str = "accuracy", title: str | None = None
) -> Path:
    """Accuracy (``metric``) against ``x`` per algorithm; runs of one algorithm form a mean and a band."""
    if x not in X_AXES:
        raise ValueError(f"x(={x!r}) must be one of {sorted(X_AXES)}")
    xlabel, scale = X_AXES[x]
    series: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    for run_dir in run_dirs:
        for alg, cols in read_rounds(run_dir).items():
            if metric in cols and x in cols:
                series[alg].append(_with_origin(cols[x] * scale, cols[metric]))
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 2.6), dpi=200)
    for i, (alg, runs) in enumerate(sorted(series.items())):
        color = f"C{i}"
        if len(runs) == 1:
            xs, ys = runs[0]
            ax.plot(xs, ys, color=color, lw=1.2, label=alg)
            continue
        grid = np.linspace(0, min(r[0].max() for r in runs if len(r[0])), 200)
        stack = np.array([np.interp(grid, xs, ys, left=np.nan) for xs, ys in runs])
        ax.plot(grid, np.nanmean(stack, 0), color=color, lw=1.2, label=f"{alg} (n={len(runs)})")
        ax.fill_between(grid, np.nanmin(stack, 0), np.nanmax(stack, 0), color=color, alpha=0.2, lw=0)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel("Mean test accuracy" if metric == "accuracy" else metric.replace("_", " "), fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3, lw=0.5)
    ax.set_ylim(0, 1)
    ax.set_xlim(left=0)
    if title:
        ax.set_title(title, fontsize=8)
    ax.legend(fontsize=6.5, frameon=False)
    fig.tight_layout()
    out_png = Path(out_png)
    fig.savefig(out_png)
    plt.close(fig)
    return out_png
