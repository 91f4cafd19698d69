"""Issue 40: a diverged algorithm is named by every reader (``report``, ``plot``, ``edgesim.load_runs``) through the
one rule of :func:`edgesim.results.reading.read_divergence`: ``summary.json``'s mark, or a non-finite accuracy or an
infinite loss in ``rounds.csv``; its rows before it are kept, it is marked and never ranked."""

from __future__ import annotations

import csv
import json
import shutil
import warnings
from pathlib import Path

import pytest
from test_safety import PHYSICS, one_error_line, run

from edgesim.results.reading import DivergedWarning, read_divergence, read_rounds

NOTE = "wild: training diverged on device 3 in round 1 (mean loss = nan); lower train.lr (= 1) or check the data"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """One physics-only run folder (4 rounds of the parametric curve), written once for the module."""
    root = tmp_path_factory.mktemp("diverged")
    (root / "phys.toml").write_text(PHYSICS)
    result = run("run", root / "phys.toml", "--out", root / "base", "-q")
    assert result.exit_code == 0, result.output
    return root / "base"


def variant(base: Path, where: Path, seed: int, edit) -> Path:
    """A copy of ``base`` as seed ``seed`` whose rounds.csv holds two algorithms, ``steady`` and ``wild`` (the
    parametric rows twice, ``wild`` a little behind), then ``edit(rows, summary)`` applied."""
    shutil.copytree(base, where)
    config = (where / "config.toml").read_text()
    (where / "config.toml").write_text(config.replace("seed = 1\n", f"seed = {seed}\n", 1))
    with open(where / "rounds.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0])
    rows = ([{**r, "algorithm": "steady"} for r in rows]
            + [{**r, "algorithm": "wild", "accuracy": str(float(r["accuracy"]) * 0.9)} for r in rows])
    summary = json.loads((where / "summary.json").read_text())
    summary["algorithms"] = {"steady": {**summary["algorithms"]["parametric"], "display": "Steady"},
                             "wild": {**summary["algorithms"]["parametric"], "display": "Wild"}}
    rows = edit(rows, summary)
    with open(where / "rounds.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]) if rows else header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    (where / "summary.json").write_text(json.dumps(summary))
    return where


def nan_accuracy_at(round_index: int, column: str = "accuracy", text: str = "nan"):
    def edit(rows, summary):
        for r in rows:
            if r["algorithm"] == "wild" and int(r["round"]) == round_index:
                r[column] = text
        return rows
    return edit


def marked_in_summary(rows, summary):
    """What edgesim writes: the diverged round has no row, summary.json says why."""
    summary["algorithms"]["wild"]["diverged"] = NOTE
    return [r for r in rows if not (r["algorithm"] == "wild" and int(r["round"]) >= 1)]


@pytest.fixture
def two_seeds(base, tmp_path) -> list[Path]:
    """Seed 1: wild's accuracy is nan from round 2 (a writer that does not stop); seed 2: summary.json marks wild
    diverged in round 1, as edgesim run writes it."""
    return [variant(base, tmp_path / "s1", 1, nan_accuracy_at(2)), variant(base, tmp_path / "s2", 2, marked_in_summary)]


def test_the_rule_reads_both_marks_and_keeps_the_rows_before(two_seeds):
    s1, s2 = two_seeds
    d1, d2 = read_divergence(s1)["wild"], read_divergence(s2)["wild"]
    assert (d1.round, d2.round) == (2, 1) and "accuracy = nan" in d1.why and d2.why == NOTE
    assert list(read_rounds(s1)["wild"]["round"]) == [0, 1] and list(read_rounds(s2)["wild"]["round"]) == [0]
    assert list(read_rounds(s1)["steady"]["round"]) == [0, 1, 2, 3] and "steady" not in read_divergence(s1)


@pytest.mark.parametrize("column, text, diverged", [
    ("accuracy", "inf", True), ("accuracy", "-inf", True), ("accuracy", "", False),  # empty: a round not evaluated
    ("train_loss", "inf", True), ("train_loss", "-inf", True), ("train_loss", "nan", False),  # NaN: nothing trained
])
def test_which_values_show_divergence(base, tmp_path, column, text, diverged):
    def edit(rows, summary):
        return nan_accuracy_at(2, column, text)([{**r, "train_loss": "0.5"} for r in rows], summary)

    got = read_divergence(variant(base, tmp_path / "v", 1, edit))
    assert ("wild" in got) == diverged
    if diverged:
        assert got["wild"].round == 2 and f"{column} = {text}" in got["wild"].why


def test_report_names_it_and_marks_it_unranked(two_seeds, tmp_path):
    result = run("report", *two_seeds, "--out", tmp_path / "rep", "--rank-by", "final")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    warnings_ = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings_ == [f"warning: wild diverged in {two_seeds[0]} (from round 2), {two_seeds[1]} (from round 1): "
                         "marked in the leaderboard, not ranked"]
    md = (tmp_path / "rep" / "leaderboard.md").read_text()
    assert "|  | Wild (diverged) |" in md and "| 1 | Steady |" in md
    assert "Diverged, so not ranked (its cells hold its rounds before that): Wild in seed 1 from round 2, seed 2 " \
           "from round 1." in md
    rows = list(csv.DictReader(open(tmp_path / "rep" / "leaderboard.csv")))
    wild = [r for r in rows if r["algorithm"] == "wild"]
    assert wild and all(r["rank"] == "" and r["diverged"] == "seed 1 from round 2, seed 2 from round 1" for r in wild)
    steady = [r for r in rows if r["algorithm"] == "steady" and r["metric"] == "final_accuracy"]
    assert steady[0]["rank"] == "1" and steady[0]["diverged"] == ""
    paired = (tmp_path / "rep" / "paired.csv").read_text()
    assert "wild" not in paired  # a diverged algorithm is never paired against the leader


def test_report_on_an_algorithm_that_diverged_before_any_result(base, tmp_path):
    """Diverged in round 0 in every seed: no row at all, yet a leaderboard row says so (it was left out silently)."""
    def at_zero(rows, summary):
        summary["algorithms"]["wild"]["diverged"] = NOTE.replace("in round 1", "in round 0")
        return [r for r in rows if r["algorithm"] != "wild"]

    folder = variant(base, tmp_path / "s1", 1, at_zero)
    result = run("report", folder, "--out", tmp_path / "rep")
    assert result.exit_code == 0, result.output
    assert f"warning: wild diverged in {folder} (from round 0)" in result.stderr
    assert "|  | Wild (diverged) | — |" in (tmp_path / "rep" / "leaderboard.md").read_text()


def test_plot_marks_it_in_the_legend_and_says_so(two_seeds, tmp_path):
    result = run("plot", *two_seeds, "--out", tmp_path / "fig")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert f"warning: wild diverged in {two_seeds[0]} (from round 2)" in result.stderr
    assert "drawn up to that round, marked (diverged) in the legend" in result.stderr
    data = (tmp_path / "fig" / "accuracy_vs_time.csv").read_text()
    assert "Wild (diverged)" in data


def test_load_runs_warns_marks_and_drops_the_same_rows(two_seeds):
    import edgesim

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = edgesim.load_runs(two_seeds)
    said = [str(w.message) for w in caught if issubclass(w.category, DivergedWarning)]
    assert len(said) == 2 and all(s.startswith("wild diverged in ") for s in said)
    wild = df[df["algorithm"] == "wild"]
    assert sorted(zip(wild["seed"], wild["round"])) == [(1, 0), (1, 1), (2, 0)]
    assert set(wild["diverged_round"]) == {2, 1} and df[df["algorithm"] == "steady"]["diverged_round"].isna().all()
    assert df["accuracy"].notna().all()


def test_every_algorithm_diverged_is_one_line(base, tmp_path):
    def all_at_zero(rows, summary):
        for alg in ("steady", "wild"):
            summary["algorithms"][alg]["diverged"] = f"{alg}: training diverged on device 0 in round 0"
        return []

    folder = variant(base, tmp_path / "s1", 1, all_at_zero)
    for command in ("report", "plot"):
        line = one_error_line(run(command, folder, "--out", tmp_path / command))
        assert "every algorithm of this run diverged before its first result" in line and "steady diverged" in line


def test_pfedme_s_divergence_names_its_inner_step_size_and_the_bound(tmp_path):
    """pFedMe's inner steps diverge when personal_lr·(L + lam) ≥ 2 whatever lr is: the message names both."""
    from edgesim.scenarios.algorithm_run import divergence_message
    from edgesim.scenarios.schema import load_scenario

    path = tmp_path / "p.toml"
    path.write_text('[train]\nlr = 0.05\n[algorithms.pfedme]\npersonal_lr = 0.1\nlam = 15\n[run]\nalgorithms = ["pfedme"]\n')
    sc = load_scenario(path)
    line = divergence_message(sc, "pfedme", "pfedme: training diverged on device 0 in round 4 (mean loss = nan)")
    assert line == ("pfedme: training diverged on device 0 in round 4 (mean loss = nan); lower train.lr (= 0.05) or "
                    "[algorithms.pfedme] personal_lr (= 0.1; the inner steps need personal_lr * (L + lam) < 2, L the loss's curvature: "
                    "lam = 15 leaves L < 5) or check the data")  # 2 / 0.1 - 15 = 5
    fedavg = divergence_message(sc, "fedavg", "fedavg: training diverged on device 0 in round 1 (mean loss = nan)")
    assert "personal_lr" not in fedavg
