"""Issue 40: ``run.max_time_s`` is worded as the code applies it — no round starts once the algorithm's clock is at
or past it (``>=``: a round ending exactly then is the last), and the round in progress ends as it would, past it."""

from __future__ import annotations

import csv
from pathlib import Path

from test_safety import PHYSICS

from edgesim.scenarios.reference import KEY_DOCS
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

REPO = Path(__file__).resolve().parents[1]


def ends(tmp_path: Path, name: str, max_time_s=None) -> list[float]:
    (tmp_path / "phys.toml").write_text(PHYSICS)
    sets = ["budget.rounds=6"] + ([f"run.max_time_s={max_time_s!r}"] if max_time_s is not None else [])
    folder = run_scenario(load_scenario(tmp_path / "phys.toml", sets), tmp_path / name)
    return [float(r["time_s"]) for r in csv.DictReader(open(folder / "rounds.csv"))]


def test_a_round_ending_exactly_at_max_time_s_is_the_last(tmp_path):
    free = ends(tmp_path, "free")
    assert len(free) == 6
    assert ends(tmp_path, "exact", free[1]) == free[:2]  # clock == max_time_s: no round starts (>=, not >)


def test_the_round_in_progress_ends_past_max_time_s(tmp_path):
    free = ends(tmp_path, "free")
    cut = (free[1] + free[2]) / 2  # within round 2
    got = ends(tmp_path, "cut", cut)
    assert got == free[:3] and got[-1] > cut  # round 2 started before the limit and ran to its end


def test_the_words_say_that_rule():
    meaning = KEY_DOCS["run.max_time_s"][0]
    assert "at or past" in meaning and "in progress ends as it would" in meaning and "passes" not in meaning
    page = (REPO / "docs" / "use" / "scenario_reference.md").read_text()
    assert meaning in page
    for f in ("arena_dofed_normal", "arena_dofed_subset", "arena_labels_at_clients", "arena_labels_at_server"):
        text = (REPO / "scenarios" / f"{f}.toml").read_text()
        assert "stops at\n# 20 rounds or 600 simulated seconds" not in text and "at or past 600 simulated seconds" in text
    assert "at or past 600 simulated seconds" in (REPO / "docs" / "studies" / "arena.md").read_text()
