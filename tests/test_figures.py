"""The figure faults of issue 23, each checked on the figure and by opening the written file."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from test_plots import fake_run  # hand-made run folders

from edgesim.plots.curves import plot_accuracy, plot_runs
from edgesim.plots.sweep import plot_final_accuracy_heatmap, plot_sweep, plot_sweep_curves, plot_tta_vs_bandwidth
from edgesim.results.reading import Sweep
from edgesim.results.writing import csv_text
from edgesim.scenarios.sweep import make_spec, sweep_rows


def make_sweep(tmp_path: Path, local_reaches: bool = True) -> Path:
    """2 bandwidths x 2 powers x 1 seed: a round lasts 1 s / (bandwidth in MHz) + 1 s at 10 dBm."""
    spec = make_spec(None, ["system.bandwidth_hz=5e5,1e7", "system.tx_power_dbm=10,23"], 1, [])
    runs = spec.runs()
    out = tmp_path / "sweep"
    for run in runs:
        v = dict(run.values)
        folder = fake_run(out / run.name, 1e6 / v["system.bandwidth_hz"] + (v["system.tx_power_dbm"] == 10), run.seed)
        if not local_reaches:
            summary = json.loads((folder / "summary.json").read_text())
            summary["algorithms"]["local"]["time_to_accuracy_s"] = {"0.5": None, "0.7": None}
            (folder / "summary.json").write_text(json.dumps(summary))
    (out / "sweep.json").write_text(json.dumps({**spec.to_json(), "runs": [r.name for r in runs]}))
    header, rows = sweep_rows(spec, runs, out, {r.name: "ok" for r in runs})
    (out / "sweep.csv").write_text(csv_text(header, rows))
    return out


@pytest.fixture
def figures(monkeypatch):
    """The figures the plotting functions close, kept open for inspection."""
    kept = []
    monkeypatch.setattr("edgesim.plots.curves.plt.close", lambda fig: kept.append(fig))
    yield kept
    monkeypatch.undo()
    for fig in kept:
        plt.close(fig)


def opened(path: Path):
    """Open a written figure as a reader would: PNG pixels, a PDF header, SVG as XML."""
    if path.suffix == ".png":
        return plt.imread(path)
    if path.suffix == ".pdf":
        data = path.read_bytes()
        assert data.startswith(b"%PDF-") and b"%%EOF" in data[-32:]
        return data
    return ET.parse(path).getroot()


def test_sweep_panels_have_their_own_x_axis(tmp_path, figures):
    sweep = Sweep(make_sweep(tmp_path))
    png = plot_sweep_curves(sweep, tmp_path / "a.png")
    axes = {ax.get_title(): ax for ax in figures[0].axes if ax.get_title()}
    slow = next(ax for t, ax in axes.items() if "500 kHz" in t and "10 dBm" in t)  # 6 rounds of 3 s
    fast = next(ax for t, ax in axes.items() if "10 MHz" in t and "23 dBm" in t)  # 6 rounds of 0.1 s
    assert fast.get_xlim()[1] < 1 < 18 <= slow.get_xlim()[1]  # the 10 MHz panel is not squashed into 18 s
    assert opened(png).shape[1] > 1000


def test_threshold_note_is_below_the_axes_and_the_legend_has_only_drawn_curves(tmp_path, figures):
    sweep = Sweep(make_sweep(tmp_path, local_reaches=False))
    png = plot_tta_vs_bandwidth(sweep, tmp_path / "tta.png", "0.5")
    fig = figures[0]
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["FedAvg", "10 dBm", "23 dBm"]  # Local reaches 50 % nowhere: no entry without a curve
    assert not ax.texts  # nothing written inside the axes, over the curves
    note = next(t for t in fig.texts if "never reached: Local" in t.get_text())
    assert note.get_position()[1] < ax.get_position().y0
    assert opened(png).ndim == 3


def test_heat_map_colour_scale_is_0_to_100_percent(tmp_path, figures):
    sweep = Sweep(make_sweep(tmp_path))  # final accuracies 70-80 %
    png = plot_final_accuracy_heatmap(sweep, tmp_path / "h.png")
    assert figures[0].axes[0].images[0].get_clim() == (0, 100)
    assert opened(png).shape[0] > 100


def test_physics_only_curve_is_not_called_a_test_accuracy(tmp_path, figures):
    run = tmp_path / "phys"
    run.mkdir()
    (run / "rounds.csv").write_text(csv_text(("algorithm", "round", "time_s", "cum_bits_up", "cum_energy_j", "accuracy"),
                                             [("parametric", r, r + 1.0, 1e6 * r, 0.1 * r, 0.1 + 0.1 * r) for r in range(5)]))
    plot_accuracy([run], tmp_path / "p.png")
    assert figures[0].axes[0].get_ylabel() == "Modelled accuracy, parametric curve (%)"
    plot_accuracy([fake_run(tmp_path / "real", 1.0, 0)], tmp_path / "r.png")
    assert figures[1].axes[0].get_ylabel() == "Test accuracy (%)"


def test_every_figure_in_png_pdf_and_svg_with_one_name_each(tmp_path):
    run = fake_run(tmp_path / "run", 1.0, 0)
    paths = plot_runs([run], tmp_path / "figs", formats=("png", "pdf", "svg"))
    assert sorted(p.name for p in paths) == sorted(f"accuracy_vs_{x}.{f}" for x in ("time", "uplink_bits", "energy")
                                                   for f in ("png", "pdf", "svg"))
    for p in paths:
        opened(p)
    again = plot_runs([run], tmp_path / "again", formats=("png", "pdf", "svg"))
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in again]  # no dates: the same bytes
    sweep_paths = plot_sweep(make_sweep(tmp_path), tmp_path / "sweep_figs", formats=("svg", "pdf"))
    assert {p.suffix for p in sweep_paths} == {".svg", ".pdf"} and len(sweep_paths) == 2 * 5
    for p in sweep_paths:
        opened(p)
