"""benchmarks/arena_table.py, the script that writes docs/studies/arena.md's tables from an ``edgesim report`` folder."""

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "arena_table", Path(__file__).resolve().parents[1] / "benchmarks" / "arena_table.py")
arena_table = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(arena_table)


def _paired(algorithm, bandwidth_hz, mean, low, high, excludes, reference_is="baseline", metric="final_accuracy"):
    return {"system.bandwidth_hz": str(bandwidth_hz), "system.tx_power_dbm": "23", "metric": metric,
            "algorithm": algorithm, "reference": "fedavg_labeled", "reference_is": reference_is,
            "mean_difference": str(mean), "ci_low": str(low), "ci_high": str(high),
            "interval_excludes_zero": str(excludes)}


def test_paired_table_in_points_bold_where_the_interval_excludes_zero():
    paired = [
        _paired("fixavg", 1e6, -0.082, -0.121, -0.042, True),
        _paired("fixavg", 1e5, -0.162, -0.341, 0.017, False),
        _paired("fedmatch_lc", 1e6, 0.011, -0.013, 0.036, False),
        _paired("fixavg", 1e6, 0.5, 0.4, 0.6, True, reference_is="leader"),  # against the leader: not this table
        _paired("fixavg", 1e6, 9.0, 9.0, 9.0, True, metric="time_to_accuracy_s"),
    ]
    display = {"fixavg": "FixAvg", "fedmatch_lc": "FedMatch", "fedavg_labeled": "FedAvg*"}
    lines = arena_table.paired_table(paired, ["fedavg_labeled", "fixavg", "fedmatch_lc"], display).splitlines()
    assert lines[0] == "| − FedAvg* (points) | 0.1 MHz, 23 dBm | 1 MHz, 23 dBm |"
    assert lines[2] == "| FixAvg | −16.2 [−34.1, +1.7] | **−8.2 [−12.1, −4.2]** |"
    assert lines[3] == "| FedMatch | — | +1.1 [−1.3, +3.6] |"  # no pair at 0.1 MHz; the baseline has no row
    assert len(lines) == 4


def test_paired_table_needs_a_baseline():
    with pytest.raises(SystemExit, match="--baseline"):
        arena_table.paired_table([_paired("fixavg", 1e6, 0.1, 0.0, 0.2, False, reference_is="leader")], ["fixavg"], {})


def test_a_folder_without_a_report_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="leaderboard.csv not found"):
        arena_table.main([str(tmp_path), "--threshold", "0.7", "--algorithms", "fedavg"])
