"""rounds.csv and devices.csv grow row by row while a run goes (edgesim/results/tables.py LiveTables,
edgesim/results/writing.py LiveCsv): flushed at each round, never a torn line, and --resume keeps working."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import edgesim
from edgesim.results.reading import read_live_csv

SMALL = dict(system={"n_devices": 4}, budget={"rounds": 4},
             run={"algorithms": ["fedavg", "local"], "clients_per_round": 2, "checkpoint_every": 1})


def test_the_tables_grow_with_each_round_and_a_reader_never_sees_a_torn_line(tmp_path):
    out = tmp_path / "run"
    live = Path(str(out) + ".incomplete")
    seen, torn, stop = [], [], threading.Event()

    def on_round(algorithm, record):  # called once the round's rows are written
        header, rows = read_live_csv(live / "rounds.csv")
        _, devices = read_live_csv(live / "devices.csv")
        seen.append((algorithm, record.round_index, len(rows), rows[-1][:2], len(devices)))

    def reader():  # reads as fast as it can while the run writes
        while not stop.is_set():
            try:
                data = (live / "rounds.csv").read_bytes()
            except OSError:
                continue
            lines = data.split(b"\n")
            for line in lines[:-1]:  # every complete line has the header's field count
                if line and line.count(b",") != lines[0].count(b","):
                    torn.append(line)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        edgesim.run(None, out, seed=2, quiet=True, on_round=on_round, **SMALL)
    finally:
        stop.set()
        thread.join()
    assert not torn
    assert [(a, r, n, row) for a, r, n, row, _ in seen] == [
        (a, r, n, [a, str(r)]) for n, (a, r) in enumerate(((a, r) for a in ("fedavg", "local") for r in range(4)), 1)]
    assert [d for *_, d in seen] == [2, 4, 6, 8, 12, 16, 20, 24]  # fedavg trains 2 devices a round, Local all 4
    final = (out / "rounds.csv").read_text().splitlines()
    assert len(final) == 1 + 8


def test_a_killed_run_keeps_its_rows_and_resumes_to_the_same_tables(tmp_path):
    def stop_after_two(algorithm, record):
        if algorithm == "local" and record.round_index == 1:
            raise KeyboardInterrupt

    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        edgesim.run(None, out, seed=2, quiet=True, on_round=stop_after_two, **SMALL)
    header, rows = read_live_csv(Path(str(out) + ".incomplete") / "rounds.csv")
    assert [r[:2] for r in rows] == [["fedavg", str(i)] for i in range(4)] + [["local", "0"], ["local", "1"]]
    edgesim.run(None, out, seed=2, quiet=True, resume=True, **SMALL)
    again = edgesim.run(None, tmp_path / "straight", seed=2, quiet=True, **SMALL)
    for table in ("rounds.csv", "devices.csv"):
        assert (out / table).read_bytes() == (again.path / table).read_bytes(), table
