"""The worked example of docs/extend/writing_an_association_rule.md: its rule, imported from the page's module, serves
the devices of two cells, at most ceil(n / C) each; its package's entry point is in edgesim's group."""

from __future__ import annotations

import importlib
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from documented_plugin import write_package

from edgesim.cells import ASSOCIATIONS, Layout, associate
from edgesim.channel import ChannelModel
from edgesim.config import ASSOCIATION_NAMES, SystemConfig
from edgesim.learning.entry_points import GROUPS

DOC = Path(__file__).resolve().parents[1] / "docs" / "extend" / "writing_an_association_rule.md"


@pytest.fixture
def balanced(tmp_path, monkeypatch):
    pkg = write_package(DOC, tmp_path, {"edgesim_balanced.py", "pyproject.toml"})
    monkeypatch.syspath_prepend(str(pkg))
    importlib.import_module("edgesim_balanced")
    yield pkg
    ASSOCIATIONS.pop("balanced", None)
    if "balanced" in ASSOCIATION_NAMES:
        ASSOCIATION_NAMES.remove("balanced")
    sys.modules.pop("edgesim_balanced", None)


def test_the_documented_rule_balances_the_cells(balanced):
    # Four devices 10, 20, 30 and 40 m from base station 0, about 1 km from base station 1: all nearest to cell 0;
    # balanced, at most ceil(4 / 2) = 2 a cell: the two strongest (10 m, 20 m) stay, the two others go to cell 1.
    p = np.array([[10.0, 0.0], [40.0, 0.0], [20.0, 0.0], [30.0, 0.0]])
    s = np.array([[0.0, 0.0], [1000.0, 0.0]])
    d = np.hypot(p[:, None, 0] - s[None, :, 0], p[:, None, 1] - s[None, :, 1])
    layout = Layout(p, s, d, 10 ** (-(128.1 + 37.6 * np.log10(d / 1000.0)) / 10), np.ones(2))
    system = SystemConfig(n_devices=4, cells=[{"x_m": 0, "y_m": 0}, {"x_m": 1000, "y_m": 0}],
                          association="balanced")
    assert associate(SystemConfig(n_devices=4, cells=system.cells), layout) == (0, 0, 0, 0)  # nearest
    assert associate(system, layout) == (0, 1, 0, 1)
    # in a run's channel: at most ceil(9 / 2) = 5 devices a cell
    channel = ChannelModel(SystemConfig(n_devices=9, cells=system.cells, cell_radius_m=600.0, association="balanced"),
                           1)
    assert np.bincount(channel.serving_cell, minlength=2).max() <= 5


def test_the_package_names_edgesims_group(balanced):
    project = tomllib.loads((balanced / "pyproject.toml").read_text())["project"]
    assert project["entry-points"][GROUPS["association"]] == {"balanced": "edgesim_balanced"}


def test_edgesim_list_shows_the_documented_rule(balanced):
    from edgesim.scenarios.catalog import catalog

    entry = next(e for e in catalog("association") if e.name == "balanced")
    assert entry.summary == "Each device, strongest first, to its best cell with room: at most ceil(n / C) devices a cell."
