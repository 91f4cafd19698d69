"""Issue 22: every algorithm error is one line from `plan` and from `run` alike, before any data is loaded.

Each scenario below names a data folder that does not exist: an error about the
algorithm (and not about the data) shows that the check ran before any data was
read; the folder it would write is checked to be absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_safety import one_error_line, run, snapshot

BASE = """
name = "algs"
seed = 1

[system]
n_devices = 4
bandwidth_hz = 1e6
cpu_freq_hz = 1e9

[budget]
total_time_s = 20
rounds = 2

[workload]
cycles_per_sample = 1e6
samples_per_device = 50
model_bits = 1e6

[data]
dataset = "fashion_mnist"
data_dir = "no-such-data"
partition = "{partition}"

[train]
model = "cnn"

[run]
algorithms = [{algorithms}]
clients_per_round = 2
{tables}
"""


def scenario(tmp_path: Path, algorithms: str, tables: str = "", partition: str = "dirichlet") -> Path:
    p = tmp_path / "algs.toml"
    p.write_text(BASE.format(algorithms=algorithms, tables=tables, partition=partition))
    return p


CASES = [  # (algorithms, tables, partition, fragments of the one line)
    ('"um_pfssl"', "", "dirichlet", ["um_pfssl", "helpers = 5", "at most n_devices - 1 = 3"]),
    ('"fedavg", "fedmix"', "", "dirichlet", ["fedmix", "labelled set at the server", "'dirichlet'"]),
    ('"fedavg", "fedmatch"', "", "dirichlet", ["fedmatch", "labelled set at the server"]),
    ('"fedmatch_lc"', '[algorithms.fedmatch_lc]\nlabels = "server"', "labels_at_server",
     ["[algorithms.fedmatch_lc]", "labels = 'server'", "'fedmatch'"]),
    ('"lg_fedavg"', "[algorithms.lg_fedavg]\nlg_global_layers = 5", "dirichlet",
     ["[algorithms.lg_fedavg]", "lg_global_layers = 5", "4 weight layers", "'cnn'"]),
    ('"fedavg"', "[algorithms.fedavg]\nthreshold = 0.5", "dirichlet",
     ["[algorithms.fedavg]", "threshold = 0.5", "not used"]),
    ('"feddure_no_creg"', "[algorithms.feddure_no_creg]\ncreg = true", "dirichlet",
     ["[algorithms.feddure_no_creg]", "creg = True", "'feddure'"]),
    ('"fixavg"', '[algorithms.fixavg]\nobjective = "supervised"', "dirichlet",
     ["[algorithms.fixavg]", "objective = 'supervised'", "'fedavg'"]),
    ('"fedper"', '[algorithms.fedper]\nlocal = "none"', "dirichlet", ["[algorithms.fedper]", "local = 'none'", "'fedavg'"]),
    ('"fedmatch"', "[algorithms.fedmatch]\nn_helpers = 100", "labels_at_server",
     ["[algorithms.fedmatch]", "n_helpers = 100", "at most n_devices - 1 = 3"]),
]


@pytest.mark.parametrize("algorithms, tables, partition, fragments", CASES)
def test_plan_and_run_refuse_the_same_algorithm_error_in_one_line(tmp_path, monkeypatch, algorithms, tables,
                                                                   partition, fragments):
    monkeypatch.chdir(tmp_path)
    path = scenario(tmp_path, algorithms, tables, partition)
    before = snapshot(tmp_path)
    planned = one_error_line(run("plan", path))
    ran = one_error_line(run("run", path, "--out", "R", "-q"))
    assert planned == ran
    assert str(path) in ran and all(f in ran for f in fragments), ran
    assert "no-such-data" not in ran  # refused before any data is read
    assert snapshot(tmp_path) == before


def test_variants_keep_their_orthogonal_options(tmp_path):
    """FedPer + FixMatch (the UM-pFSSL paper's baseline) is no other registered algorithm: allowed; so is a
    FixMatch option for FixAvg and a FedProx mu for FedAvg."""
    from edgesim.scenarios.schema import load_scenario

    tables = ('[algorithms.fedper]\nobjective = "fixmatch"\n[algorithms.fixavg]\nthreshold = 0.5\n'
              "[algorithms.fedavg]\nmu = 0.1\n")
    sc = load_scenario(scenario(tmp_path, '"fedper", "fixavg", "fedavg"', tables))
    assert sc.learning["algorithms"]["fedper"].objective == "fixmatch"


def test_fedbe_without_room_for_its_server_set_is_one_line_before_any_algorithm_runs(tmp_path, monkeypatch,
                                                                                     tiny_scenario):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    line = one_error_line(run("run", tiny_scenario, "--out", "R", "-q", "--set", 'run.algorithms=["fedavg", "fedbe"]',
                              "--set", "algorithms.fedbe.server_samples=100000"))
    assert "[algorithms.fedbe]" in line and "100000" in line and "server" in line
    assert snapshot(tmp_path) == before
