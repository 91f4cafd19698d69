"""Figures from run and sweep folders: hand-made folders, so every number behind a figure is known."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from typer.testing import CliRunner

from edgesim.plots.curves import (
    algorithm_colors,
    collect,
    display_name,
    draw_accuracy,
    mean_band,
    plot_accuracy,
    plot_runs,
)
from edgesim.plots.sweep import choose_threshold, plot_sweep, value_label
from edgesim.results.reading import Sweep, display_names
from edgesim.results.writing import csv_text
from edgesim.scenarios.cli import app
from edgesim.scenarios.sweep import make_spec, sweep_rows

runner = CliRunner()
HEADER = ("algorithm", "round", "time_s", "cum_bits_up", "cum_energy_j", "accuracy")


DISPLAY = {"fedavg": "FedAvg", "local": "Local"}


def fake_run(folder: Path, round_s: float, seed: int, n: int = 6, display: bool = True) -> Path:
    """A run folder whose FedAvg gains 0.1 per round (+0.01 per seed) and whose Local never uploads.

    ``display``: summary.json names the algorithms' display names, as a run writes them (older folders do not).
    """
    folder.mkdir(parents=True)
    rows = []
    for alg, bits, acc0 in (("fedavg", 1e6, 0.2), ("local", 0.0, 0.3)):
        for r in range(n):
            rows.append((alg, r, (r + 1) * round_s, (r + 1) * bits, (r + 1) * 0.5, acc0 + 0.1 * r + 0.01 * seed))
    (folder / "rounds.csv").write_text(csv_text(HEADER, rows))
    algs = {}
    for alg, bits, acc0 in (("fedavg", 1e6, 0.2), ("local", 0.0, 0.3)):
        accs = [acc0 + 0.1 * r + 0.01 * seed for r in range(n)]
        tta = {t: next(((r + 1) * round_s for r, a in enumerate(accs) if a >= float(t)), None) for t in ("0.5", "0.7")}
        algs[alg] = {"final_accuracy": accs[-1], "last_accuracy": accs[-1], "time_to_accuracy_s": tta,
                     "total_bits_up": n * bits, "total_bits_down": n * bits, "total_energy_j": n * 0.5,
                     "simulated_time_s": n * round_s, "rounds": n, **({"display": DISPLAY[alg]} if display else {})}
    (folder / "summary.json").write_text(json.dumps({"algorithms": algs}))
    return folder


@pytest.fixture
def sweep_dir(tmp_path) -> Path:
    """2 bandwidths x 2 powers x 2 seeds; a round lasts 1 s / (bandwidth in MHz) + 1 s at 10 dBm."""
    spec = make_spec(None, ["system.bandwidth_hz=5e5,1e6", "system.tx_power_dbm=10,23"], 2, [])
    runs = spec.runs()
    out = tmp_path / "sweep"
    for run in runs:
        v = dict(run.values)
        fake_run(out / run.name, 1e6 / v["system.bandwidth_hz"] + (v["system.tx_power_dbm"] == 10), run.seed)
    (out / "sweep.json").write_text(json.dumps({**spec.to_json(), "runs": [r.name for r in runs]}))
    header, rows = sweep_rows(spec, runs, out, {r.name: "ok" for r in runs})
    (out / "sweep.csv").write_text(csv_text(header, rows))
    return out


def test_mean_band_of_two_runs_by_hand():
    grid, mean, lo, hi = mean_band([(np.array([1.0, 2.0]), np.array([0.2, 0.4])),
                                    (np.array([1.0, 3.0]), np.array([0.4, 0.8]))], n=3)
    # common grid 1 .. 2 (the shorter run's end); the second run at x=2 is 0.4 + 0.4 * (1/2) = 0.6
    assert grid.tolist() == [1.0, 1.5, 2.0]
    assert np.allclose(mean, [0.3, 0.4, 0.5]) and np.allclose(lo, [0.2, 0.3, 0.4]) and np.allclose(hi, [0.4, 0.5, 0.6])


def test_an_algorithm_that_never_uploads_is_named_not_drawn(tmp_path):
    runs = [fake_run(tmp_path / f"s{s}", 2.0, s) for s in (0, 1)]
    series = collect(runs, "cum_bits_up")
    assert series["fedavg"][0][0].tolist() == [1, 2, 3, 4, 5, 6]  # Mbit
    fig, ax = plt.subplots()
    assert draw_accuracy(ax, series, algorithm_colors(series), names=display_names(runs)) == ["local"]
    assert [line.get_label() for line in ax.get_lines()] == ["FedAvg (2 runs)"]
    plt.close(fig)


def test_run_figures_have_units_and_names(tmp_path):
    runs = [fake_run(tmp_path / f"s{s}", 2.0, s) for s in (0, 1)]
    paths = plot_runs(runs, tmp_path / "figs")
    assert [p.name for p in paths] == ["accuracy_vs_time.png", "accuracy_vs_uplink_bits.png", "accuracy_vs_energy.png"]
    for p in paths:
        assert p.stat().st_size > 10_000
        w, h = plt.imread(p).shape[1::-1]
        assert abs(w / 200 - 3.4) < 0.05  # a paper column at 200 dpi
    assert display_names(runs) == DISPLAY and display_name("mystery", DISPLAY) == "mystery"


def _legend_of_plot_accuracy(run_dirs, tmp_path, monkeypatch) -> list[str]:
    shown = []
    monkeypatch.setattr("edgesim.plots.curves.plt.close", lambda fig: shown.append(fig))
    plot_accuracy(run_dirs, tmp_path / "a.png")
    legend = shown[0].axes[0].get_legend()
    texts = [t.get_text() for t in legend.get_texts()] + [t.get_text() for t in shown[0].axes[0].texts]
    plt.close(shown[0])
    return texts


def test_the_legend_shows_the_display_names_from_summary_json(tmp_path, monkeypatch):
    runs = [fake_run(tmp_path / f"s{s}", 2.0, s) for s in (0, 1)]
    assert _legend_of_plot_accuracy(runs, tmp_path, monkeypatch) == ["FedAvg (2 runs)", "Local (2 runs)"]
    old = fake_run(tmp_path / "old", 2.0, 0, display=False)  # a folder from before display names: raw names
    assert display_names([old]) == {}
    assert _legend_of_plot_accuracy([old], tmp_path, monkeypatch) == ["fedavg", "local"]
    assert display_names([tmp_path / "nowhere"]) == {}


def test_sweep_reads_back_and_picks_a_reached_threshold(sweep_dir):
    sweep = Sweep(sweep_dir)
    assert sweep.keys == ["system.bandwidth_hz", "system.tx_power_dbm"]
    assert sweep.algorithms == ["fedavg", "local"] and sweep.thresholds == ["0.5", "0.7"]
    assert sweep.names == DISPLAY
    assert sweep.metric((1e6, 23), "fedavg_time_to_0.5_s") == [4.0, 4.0]  # 4 rounds of 1 s
    assert sweep.metric((5e5, 10), "fedavg_time_to_0.5_s") == [12.0, 12.0]  # 4 rounds of 3 s
    assert choose_threshold(sweep, ["fedavg", "local"]) == "0.7"
    assert value_label("system.bandwidth_hz", 5e5) == "500 kHz" and value_label("system.tx_power_dbm", 23) == "23 dBm"


def test_sweep_figures_and_the_plot_command(sweep_dir, tmp_path):
    names = {p.name for p in plot_sweep(sweep_dir, tmp_path / "figs")}
    assert names == {"accuracy_vs_time.png", "accuracy_vs_uplink_bits.png", "accuracy_vs_energy.png",
                     "tta_vs_bandwidth.png", "final_accuracy_heatmap.png"}
    result = runner.invoke(app, ["plot", str(sweep_dir), str(sweep_dir / "system.bandwidth_hz=1e6,system.tx_power_dbm=23,seed=0"),
                                 "--out", str(tmp_path / "cli"), "--threshold", "0.5"])
    assert result.exit_code == 0, result.output
    written = result.stdout.split()
    assert len(set(written)) == 5 + 3 and all(Path(p).exists() for p in written)
    assert (tmp_path / "cli" / "sweep" / "tta_vs_bandwidth.png").exists()  # several sources: the sweep's own folder
    bad = runner.invoke(app, ["plot", str(tmp_path)])
    assert bad.exit_code == 2 and "neither a run folder" in bad.stderr
    # a threshold the runs did not compute is computed now from their rounds.csv (by summary.json's rule)
    late = runner.invoke(app, ["plot", str(sweep_dir), "--threshold", "0.95", "--out", str(tmp_path / "late")])
    assert late.exit_code == 0, late.output
    assert (tmp_path / "late" / "tta_vs_bandwidth.png").exists()
    bad = runner.invoke(app, ["plot", str(sweep_dir), "--threshold", "1.5", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "threshold" in bad.stderr and not (tmp_path / "bad").exists()
