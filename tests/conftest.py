"""Shared fixtures: a tiny scenario that runs end to end in seconds, and the shared data folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Bytecode is written, as Python does by default, even where PYTHONDONTWRITEBYTECODE is set (as on the development
# machines): the suite starts ~100 interpreters (`edgesim` commands, --jobs and client workers, plugin installs),
# each of which would compile edgesim's modules again (~0.25 s of CPU), and each xdist worker its test modules. Into
# __pycache__/ folders, which git ignores. Before torch and edgesim are imported; the workers and subprocesses
# inherit the environment (docs/extend/testing.md).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import pytest  # noqa: E402 - after the bytecode setting
import torch  # noqa: E402 - after the bytecode setting

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# The shipped scenarios name no data folder (users pass --data-dir or EDGESIM_DATA): the tests' copy.
if SHARED_DATA.is_dir():
    os.environ.setdefault("EDGESIM_DATA", str(SHARED_DATA))

# Runs and sweeps draw no figures here unless a test asks (`plots=True`, `--plots`): drawing is ~0.3 s of CPU a run,
# ~70 s of the suite's; the tests of the figures ask for them (docs/extend/testing.md). Subprocesses inherit it.
os.environ.setdefault("EDGESIM_PLOTS", "0")

# Tests share a 2-core machine; one intra-op thread keeps tiny models fast and runs reproducible.
torch.set_num_threads(1)

TINY_SCENARIO = """
name = "tiny"
seed = 3

[system]
n_devices = 6
bandwidth_hz = 1e6
cpu_freq_hz = 1e9

[budget]
total_time_s = 30
rounds = 3

[workload]
cycles_per_sample = 1e7
samples_per_device = 50
model_bits = "auto"

[data]
dataset = "digits"
partition = "dirichlet"
alpha = 1.0

[train]
model = "cnn"
lr = 0.05
batch_size = 16

[run]
algorithms = ["fedavg", "fedprox", "local"]
clients_per_round = 3
label_quality = false  # the labelling diagnostic, ~20 % of a tiny run's CPU: on where a test reads it
"""
NO_LABEL_QUALITY = "label_quality = false  # the labelling diagnostic, ~20 % of a tiny run's CPU: on where a test reads it\n"


@pytest.fixture
def tiny_scenario(tmp_path) -> Path:
    p = tmp_path / "tiny.toml"
    p.write_text(TINY_SCENARIO)
    return p


@pytest.fixture
def tiny_scenario_measured(tiny_scenario) -> Path:
    """The tiny scenario with the labelling diagnostic at its default (on), for the tests that read it."""
    tiny_scenario.write_text(tiny_scenario.read_text().replace(NO_LABEL_QUALITY, ""))
    return tiny_scenario


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "fashion-mnist").exists():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
