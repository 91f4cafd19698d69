"""docs/use/quickstart.md runs as written: every `edgesim` command of its bash blocks, in order, in a fresh folder, at a
small scale (two rounds of four devices: the `--set`s below are appended to `run` and `sweep`), and each step leaves
what the page says it does."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from cli_here import main_here

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--set", "budget.rounds=2", "--set", "system.n_devices=4", "--set", "run.clients_per_round=2"]


def quickstart_commands() -> list[list[str]]:
    text = (REPO / "docs" / "use" / "quickstart.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("edgesim "):
                commands.append(shlex.split(line))
    return commands


def test_the_quick_start_names_install_run_sweep_report_in_order():
    verbs = [c[1] for c in quickstart_commands()]
    assert verbs == ["plan", "run", "sweep", "report", "plot"]
    assert "pip install -q -c constraints.txt" in (REPO / "docs" / "use" / "quickstart.md").read_text()


def test_the_quick_start_runs_as_written_at_a_small_scale(tmp_path, monkeypatch):  # the only test of the page
    """Each command through the entry point's own ``main()`` in ``tmp_path`` (``main_here``: in this process, ~2 s of
    CPU a command less than an interpreter each), with the figures a user gets (no ``EDGESIM_PLOTS``)."""
    monkeypatch.delenv("EDGESIM_PLOTS", raising=False)
    for command in quickstart_commands():
        args = command[1:] + (SMALL if command[1] in ("run", "sweep") else []) + (
            ["--jobs", "1"] if command[1] == "sweep" else [])
        done = main_here(*args, cwd=tmp_path, timeout_s=900)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    for made in ("runs/first/rounds.csv", "runs/first/accuracy_vs_time.png", "runs/first/accuracy_vs_time.csv",
                 "runs/first/config.toml", "sweeps/bandwidth/sweep.csv", "reports/bandwidth/leaderboard.md",
                 "runs/first/accuracy_vs_time.pdf", "runs/first/accuracy_vs_time.svg"):
        assert (tmp_path / made).is_file(), made
