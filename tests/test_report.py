"""Honest aggregation: scenario fingerprints, intervals over seeds, paired differences, thresholds after the fact,
``edgesim report`` and ``plot`` refusing to average different scenarios."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from conftest import TINY_SCENARIO
from typer.testing import CliRunner

from edgesim.results.fingerprint import scenario_differences, scenario_fingerprint
from edgesim.results.metrics import crossing
from edgesim.results.reading import RunFolderError, expand, load_run
from edgesim.results.stats import check_one_scenario, group_runs, mean_interval, paired_difference
from edgesim.scenarios.cli import app
from edgesim.scenarios.sweep import make_spec, run_sweep

runner = CliRunner()
FAST = ["run.algorithms=['fedavg', 'local']", "budget.rounds=3"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    scenario = tmp_path_factory.mktemp("scenario") / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    out = tmp_path_factory.mktemp("sweeps") / "s"
    result = run_sweep(make_spec(scenario, ["system.bandwidth_hz=2.5e5,1e6"], 2, FAST), out, jobs=1,
                       progress=False, plots=False)
    assert not result.failed
    return out


# --------------------------------------------------------------------------- pure functions


def test_fingerprint_ignores_seed_source_versions_and_threads_only():
    a = {"name": "x", "seed": 1, "source": "a.toml", "versions": {"torch": "1"}, "system": {"bandwidth_hz": 1e6},
         "run": {"threads": 1, "rounds": 3}}
    b = {**a, "seed": 2, "source": "b.toml", "versions": {"torch": "2"}, "run": {"threads": 4, "rounds": 3}}
    assert scenario_fingerprint(a) == scenario_fingerprint(b)
    c = {**a, "system": {"bandwidth_hz": 2e6}}
    assert scenario_fingerprint(a) != scenario_fingerprint(c)
    assert scenario_differences(a, c) == [("system.bandwidth_hz", 1e6, 2e6)]
    assert scenario_differences(a, {**a, "run": {"threads": 1}}) == [("run.rounds", 3, None)]


def test_mean_interval_by_hand():
    iv = mean_interval([1.0, 2.0, 3.0])
    assert iv.mean == 2.0 and iv.n == 3
    assert iv.high - iv.mean == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)  # t(0.975, 2) = 4.302653 (tables), s = 1
    one = mean_interval([5.0])
    assert one.mean == 5.0 and math.isnan(one.low) and one.n == 1
    assert mean_interval([]).n == 0 and math.isnan(mean_interval([]).mean)
    assert mean_interval([1.0, float("nan"), 3.0]).n == 2 and mean_interval([1.0, float("nan")]).n_total == 2


def test_an_interval_reads_as_a_table_cell():
    assert mean_interval([1.0, 2.0, 3.0]).text() == "2 ± 2.5"  # t(0.975, 2) · 1 / √3 = 2.484
    assert mean_interval([1.0, math.nan]).text() == "1 (1/2)"
    assert mean_interval([math.nan, math.nan]).text() == "— (0/2)"
    assert mean_interval([0.12345, 0.12355]).text(2) == "0.12 ± 0.00064"  # t(0.975, 1) = 12.706 · s (7.07e-5) / √2


def test_interval_narrows_with_more_seeds_of_the_same_spread():
    few = mean_interval([0.0, 1.0] * 2)
    many = mean_interval([0.0, 1.0] * 20)
    assert many.high - many.low < few.high - few.low


def test_paired_difference_removes_the_shared_seed_noise():
    """Two methods that differ by a constant 0.01 on seeds whose level varies a lot: the paired interval is
    tight and excludes 0; the unpaired intervals overlap."""
    base = {0: 0.5, 1: 0.7, 2: 0.6, 3: 0.9}
    a = {s: v + 0.01 + 0.001 * s for s, v in base.items()}
    d = paired_difference(a, base)
    assert d.mean == pytest.approx(0.0115) and d.excludes_zero and d.n == 4
    ia, ib = mean_interval(list(a.values())), mean_interval(list(base.values()))
    assert ia.low < ib.high  # unpaired: not resolved
    assert not paired_difference({0: 1.0}, {0: 0.0}).excludes_zero  # one seed: no interval


def test_crossing_is_the_rule_of_summary_json(sweep):
    for run_dir in [f.folder for f in expand([sweep])]:
        summary = json.loads((run_dir / "summary.json").read_text())
        run = load_run(run_dir)
        for alg, cols in run.series.items():
            for t, expected in summary["algorithms"][alg]["time_to_accuracy_s"].items():
                c = crossing(cols, float(t))
                assert (c["time_s"] if c else None) == expected


# --------------------------------------------------------------------------- groups


def test_runs_group_by_scenario_and_refuse_to_mix(sweep):
    runs = [load_run(f.folder) for f in expand([sweep])]
    groups = group_runs(runs)
    assert [sorted(g.seeds) for g in groups] == [[3, 4], [3, 4]]
    assert [g.point for g in groups] == [{"system.bandwidth_hz": 250000.0}, {"system.bandwidth_hz": 1000000.0}]
    check_one_scenario(groups[0].runs)
    with pytest.raises(RunFolderError, match=r"not seeds of one scenario: system\.bandwidth_hz = 250000\.0"):
        check_one_scenario(runs)
    with pytest.raises(RunFolderError, match="same scenario and seed"):
        group_runs([runs[0], runs[0]])


def test_plot_refuses_runs_of_different_scenarios_and_separates_on_request(sweep, tmp_path):
    runs = [f.folder for f in expand([sweep])]
    mixed = [str(runs[0]), str(runs[-1])]
    result = runner.invoke(app, ["plot", *mixed, "--out", str(tmp_path / "p")])
    assert result.exit_code == 2 and "not seeds of one scenario" in result.stderr and "system.bandwidth_hz" in result.stderr
    assert not (tmp_path / "p").exists()
    result = runner.invoke(app, ["plot", *mixed, "--out", str(tmp_path / "q"), "--separate"])
    assert result.exit_code == 0, result.output
    assert len([p for p in (tmp_path / "q").iterdir() if p.is_dir()]) == 2
    seeds = [str(p) for p in runs if "2.5e5" in p.name]
    assert runner.invoke(app, ["plot", *seeds, "--out", str(tmp_path / "r")]).exit_code == 0


def test_plot_sweep_takes_a_threshold_the_runs_did_not_compute(sweep, tmp_path):
    result = runner.invoke(app, ["plot", str(sweep), "--out", str(tmp_path / "f"), "--threshold", "0.37"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "f" / "tta_vs_bandwidth.png").stat().st_size > 0


# --------------------------------------------------------------------------- the report


def test_report_writes_a_tidy_leaderboard_with_intervals_and_ranks(sweep, tmp_path):
    out = tmp_path / "rep"
    result = runner.invoke(app, ["report", str(sweep), "--out", str(out), "--threshold", "0.2", "--threshold", "0.45"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(open(out / "leaderboard.csv")))
    keys = {(r["fingerprint"], r["algorithm"], r["metric"], r["threshold"]) for r in rows}
    assert len(keys) == len(rows)  # tidy: one row per group × algorithm × metric × threshold
    assert {r["system.bandwidth_hz"] for r in rows} == {"250000.0", "1000000.0"}
    assert {r["metric"] for r in rows} >= {"time_to_accuracy_s", "bits_up_to_accuracy", "energy_to_accuracy_j",
                                           "final_accuracy", "total_bits_up", "total_bits_down", "total_energy_j",
                                           "final_accuracy_var"}
    final = [r for r in rows if r["metric"] == "final_accuracy"]
    assert all(r["n_seeds"] == "2" and r["n"] == "2" and float(r["ci_low"]) <= float(r["mean"]) <= float(r["ci_high"])
               for r in final)
    for group in {r["fingerprint"] for r in final}:
        ranked = sorted((r for r in final if r["fingerprint"] == group), key=lambda r: int(r["rank"]))
        assert [float(r["mean"]) for r in ranked] == sorted((float(r["mean"]) for r in ranked), reverse=True)
    # the mean over seeds is the mean of the runs' own numbers
    summaries = [json.loads((p / "summary.json").read_text()) for p in [f.folder for f in expand([sweep])] if "2.5e5" in p.name]
    fedavg = [r for r in final if r["algorithm"] == "fedavg" and r["system.bandwidth_hz"] == "250000.0"][0]
    assert float(fedavg["mean"]) == pytest.approx(sum(s["algorithms"]["fedavg"]["final_accuracy"] for s in summaries) / 2)
    paired = list(csv.DictReader(open(out / "paired.csv")))
    assert paired and all(r["interval_excludes_zero"] in ("True", "False") for r in paired)
    md = (out / "leaderboard.md").read_text()
    assert md.startswith("# Leaderboard") and "| rank | algorithm |" in md and "Paired differences" in md
    assert (out / "accuracy_vs_time_extremes.png").stat().st_size > 0
    assert (out / "tta_vs_bandwidth.png").stat().st_size > 0
    # a second report into the same folder replaces its own files (with --overwrite: issue 52.6)
    assert runner.invoke(app, ["report", str(sweep), "--out", str(out), "--overwrite"]).exit_code == 0


def test_report_pairs_every_algorithm_against_a_named_baseline_too(sweep, tmp_path):
    """--baseline B: beside the leader's rows, one row per other algorithm × metric against B, with B's own seeds."""
    out = tmp_path / "rep"
    result = runner.invoke(app, ["report", str(sweep), "--out", str(out), "--threshold", "0.2", "--baseline", "local"])
    assert result.exit_code == 0, result.output
    paired = list(csv.DictReader(open(out / "paired.csv")))
    against = [r for r in paired if r["reference_is"] == "baseline"]
    assert against and {r["reference"] for r in against} == {"local"} and "local" not in {r["algorithm"] for r in against}
    # the difference is the mean over seeds of the runs' own paired differences
    runs = [json.loads((p / "summary.json").read_text())["algorithms"] for p in [f.folder for f in expand([sweep])] if "2.5e5" in p.name]
    row = [r for r in against if r["algorithm"] == "fedavg" and r["metric"] == "final_accuracy"
           and r["system.bandwidth_hz"] == "250000.0"][0]
    diffs = [s["fedavg"]["final_accuracy"] - s["local"]["final_accuracy"] for s in runs]
    assert float(row["mean_difference"]) == pytest.approx(sum(diffs) / 2)
    assert "Paired differences against the baseline" in (out / "leaderboard.md").read_text()
    # an algorithm no run holds: one line naming it and what the runs hold, and no report folder
    bad = runner.invoke(app, ["report", str(sweep), "--out", str(tmp_path / "b"), "--baseline", "fedmix"])
    assert bad.exit_code == 2 and "--baseline 'fedmix'" in bad.stderr and "fedavg" in bad.stderr
    assert "Traceback" not in bad.output and not (tmp_path / "b").exists()


def test_report_refuses_an_out_that_holds_a_users_file_and_bad_thresholds(sweep, tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "leaderboard.csv").write_text("my own table\n")
    result = runner.invoke(app, ["report", str(sweep), "--out", str(user)])
    assert result.exit_code == 2 and "leaderboard.csv" in result.stderr and "Traceback" not in result.output
    assert (user / "leaderboard.csv").read_text() == "my own table\n"
    bad = runner.invoke(app, ["report", str(sweep), "--out", str(tmp_path / "x"), "--threshold", "80"])
    assert bad.exit_code == 2 and "--threshold '80'" in bad.stderr and not (tmp_path / "x").exists()
    missing = runner.invoke(app, ["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "y")])
    assert missing.exit_code == 2 and "no such folder" in missing.stderr


def test_the_report_never_imports_torch():
    import subprocess
    import sys

    probe = ("import sys, edgesim.results.stats, edgesim.plots.report, edgesim.plots.report_figures, edgesim.scenarios.report\n"
             "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[1]).returncode == 0


def test_report_and_plot_skip_the_empty_accuracy_cells_of_unevaluated_rounds(sweep, tmp_path):
    """[run] eval_every > 1 leaves a round's accuracy cells empty: the report's extremes figure, its leaderboard and
    `edgesim plot`'s curves use the evaluated rounds only (no NaN gap, no failure). The sweep's rounds.csv with
    round 1 made unevaluated (every accuracy column emptied)."""
    import shutil

    import numpy as np

    copy = tmp_path / "s"
    shutil.copytree(sweep, copy)
    for run in [f.folder for f in expand([copy])]:
        with open(run / "rounds.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            if row["round"] == "1":
                row.update({k: "" for k in row if "accuracy" in k})
        with open(run / "rounds.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    result = runner.invoke(app, ["report", str(copy), "--out", str(tmp_path / "rep"), "--threshold", "0.2"])
    assert result.exit_code == 0, result.output
    drawn = list(csv.DictReader(open(tmp_path / "rep" / "accuracy_vs_time_extremes.csv")))
    for key in {(r["panel"], r["series"]) for r in drawn}:  # a NaN is an empty cell: only before the first round
        ys = [r["y"] for r in drawn if (r["panel"], r["series"]) == key]
        started = ys[[y != "" for y in ys].index(True):]
        assert len(started) > 1 and all(math.isfinite(float(y)) for y in started), key  # no gap after it
    final = [r for r in csv.DictReader(open(tmp_path / "rep" / "leaderboard.csv")) if r["metric"] == "final_accuracy"]
    assert final and all(math.isfinite(float(r["mean"])) for r in final)
    one = [f.folder for f in expand([copy])][0]
    result = runner.invoke(app, ["plot", str(one), "--out", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    curve = [r for r in csv.DictReader(open(tmp_path / "p" / "accuracy_vs_time.csv")) if r["series"] == "FedAvg"]
    times = load_run(one).series["fedavg"]["time_s"]
    assert [float(r["x"]) for r in curve] == pytest.approx([times[0], times[2]])  # rounds 0 and 2: round 1 skipped
    assert all(np.isfinite(float(r["y"])) for r in curve)
