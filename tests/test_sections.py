"""Scenario.learning: the learning sections resolved once into types (scenarios/sections.py), never read by string
key in edgesim's own code."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import edgesim
from edgesim.compression import NO_COMPRESSION
from edgesim.learning.config import DataConfig, RunConfig, TrainConfig
from edgesim.scenarios.schema import load_scenario
from edgesim.scenarios.sections import LearningSections

REPO = Path(__file__).resolve().parents[1]


def test_the_sections_are_typed_and_every_trained_algorithm_has_its_options_and_codec(tiny_scenario):
    sc = load_scenario(tiny_scenario, ["algorithms.fedprox.mu=0.5", 'compression.uplink.method="fp16"'])
    learning = sc.learning
    assert isinstance(learning, LearningSections)
    assert isinstance(learning.data, DataConfig) and isinstance(learning.train, TrainConfig)
    assert isinstance(learning.run, RunConfig) and learning.run.algorithms == ["fedavg", "fedprox", "local"]
    assert set(learning.configs) == {"fedavg", "fedprox", "local"}
    assert learning.options("fedprox").mu == 0.5  # its table's
    assert learning.options("fedavg") == type(learning.options("fedavg"))()  # its defaults, filled once
    assert set(learning.algorithms) == {"fedprox"}  # the tables the scenario gives, as written
    assert learning.codec("fedavg").uplink.method == "fp16" and learning.codec("fedavg").downlink.is_none
    with pytest.raises(dataclasses.FrozenInstanceError):
        learning.run = None


def test_a_warm_starts_algorithm_is_resolved_too(tiny_scenario):
    sc = load_scenario(tiny_scenario, ['run.warm_start={algorithm = "fedavg", rounds = 1}',
                                       'run.algorithms=["fedprox"]'])
    assert set(sc.learning.configs) == {"fedprox", "fedavg"}


def test_plan_only_and_physics_only_scenarios(tmp_path):
    plan_only = load_scenario(None, learning=False)
    assert plan_only.learning == LearningSections() and not plan_only.learning and plan_only.learning.run is None
    phys = tmp_path / "p.toml"
    phys.write_text('[workload]\nmodel_bits = 1e6\nsamples_per_device = 500\n[run]\nbackend = "parametric"\n'
                    'clients_per_round = 2\n')
    sc = edgesim.load_scenario(str(phys))
    assert sc.physics_only and sc.learning.configs == {} and sc.learning.compression is None
    assert sc.learning.codec("parametric") == NO_COMPRESSION


def test_older_callers_may_still_read_the_sections_as_a_mapping(tiny_scenario):
    sc = load_scenario(tiny_scenario)
    assert sc.learning["run"] is sc.learning.run and sc.learning.get("data") is sc.learning.data
    assert list(sc.learning) == ["data", "train", "run", "algorithms", "compression", "variants", "codecs"]
    with pytest.raises(KeyError):
        sc.learning["configs"]  # the resolved parts are attributes only


def test_edgesim_reads_no_learning_section_by_string_key():
    """scenarios/, learning/ and edgesim/'s own modules read Scenario.learning's attributes (issue 47)."""
    found = []
    for folder in ("scenarios", "learning", "edgesim", "plots"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\.learning(\[|\.get\()", line) and not line.lstrip().startswith(("#", "(``")):
                    found.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
