"""The leaderboard cannot mislead: a threshold counts as reached only once the accuracy stays at or above it for k
rounds (edgesim/results/metrics.py, shared with summary.json), and --rank-by orders by another metric."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from edgesim.plots.report import build, leaders
from edgesim.results.metrics import DEFAULT_SUSTAIN_ROUNDS, first_crossing, sustain_rounds, time_to_accuracy
from edgesim.results.writing import csv_text
from edgesim.scenarios.cli import app

runner = CliRunner()


def test_first_crossing_by_hand():
    accs = [0.30, 0.61, 0.40, 0.50, 0.62, 0.63, 0.65]
    assert first_crossing(accs, 0.6) == 1  # touched once
    assert first_crossing(accs, 0.6, sustain=3) == 4  # held from round 4 on
    assert first_crossing([0.7, math.nan, 0.7, 0.7], 0.6, sustain=3) == 0  # unevaluated rounds are skipped
    assert first_crossing([0.1, 0.7, 0.7], 0.6, sustain=3) is None  # the run ended before it was held
    assert time_to_accuracy([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], accs, 0.6, 3) == 5.0
    with pytest.raises(ValueError, match=r"sustain\(=0\) must be an integer >= 1"):
        first_crossing(accs, 0.6, sustain=0)
    assert sustain_rounds({}) == DEFAULT_SUSTAIN_ROUNDS == 3 and sustain_rounds({"run": {"sustain_rounds": 1}}) == 1


@given(st.lists(st.floats(0, 1), max_size=30), st.floats(0, 1), st.integers(1, 6))
def test_sustain_1_is_the_first_round_at_or_above_and_a_longer_hold_never_comes_earlier(accs, t, k):
    plain = next((i for i, a in enumerate(accs) if a >= t), None)
    assert first_crossing(accs, t, 1) == plain
    held, longer = first_crossing(accs, t, k), first_crossing(accs, t, k + 1)
    if longer is not None:
        assert held is not None and held <= longer
    if held is not None:
        assert all(a >= t for a in accs[held:held + k]) and len(accs[held:held + k]) == k


def run_folder(path, seed: int, curves: dict[str, list[float]], energy_per_round: dict[str, float]):
    """A run folder as edgesim writes it, with hand-made accuracy curves (one round = 1 simulated second)."""
    path.mkdir(parents=True)
    (path / "config.toml").write_text(f'name = "arena"\nseed = {seed}\n[run]\naccuracy_thresholds = [0.6]\n')
    rows = [(alg, r, r + 1.0, (r + 1) * 1e6, (r + 1) * 1e6, (r + 1) * energy_per_round[alg], acc)
            for alg, accs in curves.items() for r, acc in enumerate(accs)]
    (path / "rounds.csv").write_text(csv_text(("algorithm", "round", "time_s", "cum_bits_up", "cum_bits_down",
                                               "cum_energy_j", "accuracy"), rows))
    display = {"fedmix_fedfreq": "FedMix+FedFreq", "fedmatch": "FedMatch"}
    (path / "summary.json").write_text(json.dumps({"algorithms": {a: {"display": display[a]} for a in curves}}))
    return path


@pytest.fixture
def arena(tmp_path):
    """FedMix+FedFreq touches 70 % once (round 2), then falls to 44 %; FedMatch climbs to 65 % and stays (and spends
    half the energy per round)."""
    folders = []
    for seed in (0, 1):
        d = 0.005 * seed
        curves = {"fedmix_fedfreq": [0.30, 0.45, 0.70 + d, 0.47, 0.45, 0.44, 0.44, 0.44, 0.44, 0.44],
                  "fedmatch": [0.20, 0.30, 0.40, 0.50, 0.55, 0.60 + d, 0.62, 0.64, 0.65, 0.65]}
        folders.append(run_folder(tmp_path / f"seed{seed}", seed, curves, {"fedmix_fedfreq": 2.0, "fedmatch": 0.5}))
    return folders


def test_a_method_that_touches_the_threshold_once_ranks_below_one_that_stays_above(arena):
    report = build(arena)
    assert report["primary"] == 0.6 and report["sustain"] == [3]
    assert leaders(report, report["ranks"][0]) == ["fedmatch"]  # FedMix+FedFreq never held 60 %: unranked
    touched = build(arena, sustain=1)  # the old rule: the first touch counts
    assert leaders(touched, touched["ranks"][0]) == ["fedmix_fedfreq", "fedmatch"]


@pytest.mark.parametrize("rank_by, first", [("time", "fedmatch"), ("final", "fedmatch"), ("best", "fedmix_fedfreq"),
                                            ("energy", "fedmatch"), ("bits", "fedmatch")])
def test_rank_by_each_metric(arena, rank_by, first):
    report = build(arena, rank_by=rank_by, sustain=None)
    assert leaders(report, report["ranks"][0])[0] == first


def test_rank_by_and_sustain_on_the_command_line(arena, tmp_path):
    def order(*options):
        out = tmp_path / f"rep{len(list(tmp_path.iterdir()))}"
        done = runner.invoke(app, ["report", *map(str, arena), "--out", str(out), *options])
        assert done.exit_code == 0, done.output
        md = (out / "leaderboard.md").read_text()
        return md, [line.split(" | ")[1] for line in md.splitlines() if line.startswith(("| 1 |", "| 2 |"))]

    md, ranked = order()
    assert ranked == ["FedMatch"] and "stays at or above the threshold for 3 rounds" in md
    md, ranked = order("--sustain", "1")  # the first touch counts: FedMix+FedFreq reaches 60 % first (3 s vs 6 s)
    assert ranked == ["FedMix+FedFreq", "FedMatch"] and "for 1 round " in md
    md, ranked = order("--sustain", "1", "--rank-by", "energy")  # but FedMatch spends less to get there (3 J vs 6 J)
    assert ranked == ["FedMatch", "FedMix+FedFreq"] and "Ranked by device energy to 0.6" in md
    md, ranked = order("--rank-by", "best")
    assert ranked == ["FedMix+FedFreq", "FedMatch"] and "Ranked by best accuracy." in md
    bad = runner.invoke(app, ["report", *map(str, arena), "--out", str(tmp_path / "c"), "--rank-by", "speed"])
    assert bad.exit_code == 2 and bad.stderr.strip() == "error: --rank-by 'speed': expected one of time, energy, bits, final, best"
    bad = runner.invoke(app, ["report", *map(str, arena), "--out", str(tmp_path / "d"), "--sustain", "0"])
    assert bad.exit_code == 2 and "--sustain 0: expected a number of rounds, an integer >= 1" in bad.stderr
