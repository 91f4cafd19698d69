"""Several cells through the command line: `edgesim plan` prints the devices per cell and each cell's mean SINR;
a run folder holds cells.csv (its data) and cells.png; bad scenarios are one line (physics-only, small)."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from edgesim.planning import cell_table
from edgesim.scenarios.cli import app
from edgesim.scenarios.schema import load_scenario

runner = CliRunner()

SCENARIO = """
name = "two_cells"
seed = 3
[system]
n_devices = 8
cells = [{ x_m = 0, y_m = 0 }, { x_m = 400, y_m = 0, bandwidth_hz = 2e6 }]
access = "fdma"
[budget]
total_time_s = 40
rounds = 2
[workload]
cycles_per_sample = 1e6
samples_per_device = 100
model_bits = 1e5
[run]
backend = "parametric"
clients_per_round = 4
"""


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "two_cells.toml"
    path.write_text(SCENARIO)
    return path


def test_plan_prints_the_association_and_the_mean_sinr_per_cell(scenario):
    done = runner.invoke(app, ["plan", str(scenario)])
    assert done.exit_code == 0, done.output
    cells = cell_table(load_scenario(scenario).system, 3)
    assert sum(c["devices"] for c in cells) == 8
    assert "Cells: 2 (association 'nearest', placement 'uniform_union', frequency reuse 1" in done.output
    for c in cells:  # reuse 1: the interference can only lower the SINR
        assert c["mean_sinr_db"] < c["mean_snr_db"]
        assert f"{c['devices']:>7} {c['mean_snr_db']:>11.2f} {c['mean_sinr_db']:>12.2f}" in done.output
    as_json = json.loads(runner.invoke(app, ["plan", str(scenario), "--json"]).output)
    assert as_json["cells"] == json.loads(json.dumps(cells))
    reuse = runner.invoke(app, ["plan", str(scenario), "--set", "system.frequency_reuse=2", "--json"])
    for c in json.loads(reuse.output)["cells"]:  # disjoint sub-bands: no interference
        assert c["mean_sinr_db"] == c["mean_snr_db"]


def test_the_cells_file_and_figure(scenario, tmp_path):
    """What a run with several cells writes beside its tables (edgesim.scenarios.run.write_cells): cells.csv, the
    base stations then the devices, and cells.png drawn from it, both listed in the manifest."""
    from edgesim.results.writing import RunFolder, read_manifest
    from edgesim.scenarios.run import write_cells

    folder = RunFolder(tmp_path / "run")
    folder.start()
    folder.write_text("config.toml", SCENARIO)
    sc = load_scenario(scenario)
    write_cells(folder, sc)
    rows = list(csv.DictReader((folder.work / "cells.csv").open()))
    assert [r["kind"] for r in rows] == ["bs"] * 2 + ["device"] * 8
    assert [r["band_hz"] for r in rows[:2]] == ["1000000.0", "2000000.0"]  # cell 1's own band
    cells = cell_table(sc.system, sc.seed)
    assert [int(r["devices"]) for r in rows[:2]] == [c["devices"] for c in cells]
    assert [int(r["cell"]) for r in rows[2:]].count(0) == cells[0]["devices"]
    assert (folder.work / "cells.png").stat().st_size > 0
    assert {"cells.csv", "cells.png"} <= read_manifest(folder.work)


@pytest.mark.slow
def test_a_run_folder_holds_the_cells_and_their_figure(scenario, tmp_path):
    """End to end through `edgesim run` (the default run's test_the_cells_file_and_figure covers the writer)."""
    out = tmp_path / "run"
    done = runner.invoke(app, ["run", str(scenario), "--out", str(out), "-q"])
    assert done.exit_code == 0, done.output
    rows = list(csv.DictReader((out / "cells.csv").open()))
    assert [r["kind"] for r in rows] == ["bs"] * 2 + ["device"] * 8
    assert [r["band_hz"] for r in rows[:2]] == ["1000000.0", "2000000.0"]  # cell 1's own band
    sim_cells = load_scenario(scenario).system
    assert sum(int(r["devices"]) for r in rows[:2]) == sim_cells.n_devices
    assert (out / "cells.png").stat().st_size > 0
    manifest = json.loads((out / "manifest.json").read_text())
    files = manifest if isinstance(manifest, list) else manifest.get("files", manifest)
    assert "cells.csv" in files and "cells.png" in files


@pytest.fixture
def plain_scheme():
    """A scheme registered for the test whose links do not model interference (no set_noise_psd)."""
    from edgesim.access import SCHEMES, AccessScheme, register_access
    from edgesim.config import ACCESS_NAMES
    from edgesim.links import TdmaUplink

    @register_access("plain_test")
    class Plain(AccessScheme):
        """One transfer at a time, deaf to the other cells."""

        def __init__(self, env, cell, options=None):
            super().__init__(env, cell, options)
            self.inner = TdmaUplink(env, cell.bandwidth_hz, cell.noise_psd_w_per_hz)

        def transmit(self, env, device, bits, channel_gain, tx_power_w, on_air=None, *, checked=False):
            return (yield from self.inner.transmit(env, device, bits, channel_gain, tx_power_w, on_air))

    yield "plain_test"
    SCHEMES.pop("plain_test")
    ACCESS_NAMES.remove("plain_test")


def test_a_scheme_without_interference_is_refused_in_one_line(scenario, plain_scheme):
    done = runner.invoke(app, ["plan", str(scenario), "--set", f"system.access={plain_scheme}"])
    assert done.exit_code == 2, done.output
    assert done.stderr.count("\n") == 1 and "access = 'plain_test' with 2 cells: the scheme does not model" in done.stderr
    assert runner.invoke(app, ["plan", str(scenario), "--set", f"system.access={plain_scheme}", "--set",
                               "system.cells=[{x_m=0,y_m=0}]"]).exit_code == 0  # one cell: served


def test_ofdma_blocks_must_fit_every_cells_band(scenario):
    done = runner.invoke(app, ["plan", str(scenario), "--set", "system.access=ofdma", "--set", "system.frequency_reuse=2",
                               "--set", "access.resource_blocks=5"])
    assert done.exit_code == 2 and done.stderr.count("\n") == 1
    assert ("resource_blocks = 5: expected N · rb_bandwidth_hz (= 900000.0 Hz) at most every cell's band (cell 0: "
            "500000.0 Hz, frequency_reuse = 2)") in done.stderr


@pytest.mark.slow
def test_jobs_give_the_same_bytes_with_cells(tmp_path):
    """A learning run of two algorithms over two cells: --jobs 2 writes the bytes of --jobs 1 (the default run's
    test_determinism_and_resume_with_cells covers the clock)."""
    sets = ["--set", "system.cells=[{x_m=0,y_m=0},{x_m=400,y_m=0}]", "--set", "run.rounds=2",
            "--set", "run.algorithms=[fedavg,local]"]
    for jobs in ("1", "2"):
        done = runner.invoke(app, ["run", *sets, "--out", str(tmp_path / jobs), "--jobs", jobs, "-q"])
        assert done.exit_code == 0, done.output
    for name in ("rounds.csv", "devices.csv", "events.csv", "cells.csv"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name
