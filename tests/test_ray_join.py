"""Joining a Ray cluster by address: a head this machine cannot reach is one line naming the address — not the
disk-full wording ("cannot write … free some space") that Ray's ``ConnectionError`` (an ``OSError``) used to get.
No cluster is started: a stand-in for the ``ray`` module raises the error."""

from __future__ import annotations

import types

import pytest
from typer.testing import CliRunner

from edgesim.config import ConfigError, cli_word
from edgesim.scenarios.cli import app
from edgesim.scenarios.ray_cluster import join_cluster

ADDRESS = "10.9.8.7:6379"  # never contacted: the stand-in refuses it


def _unreachable_ray():
    def init(**kwargs):
        raise ConnectionError(f"Failed to connect to GCS at address {kwargs['address']} within 60 seconds.\n"
                              "The head may not be running.")

    return types.SimpleNamespace(init=init, is_initialized=lambda: False)


def test_an_unreachable_head_is_one_line_naming_the_address():
    with pytest.raises(ConfigError) as e:
        join_cluster(_unreachable_ray(), ADDRESS)
    line = e.value.worded(cli_word)
    assert line.startswith(f"--ray-address {ADDRESS}: cannot reach a Ray cluster there (Failed to connect to GCS")
    assert "\n" not in line and "ray start" in line and "write" not in line and "space" not in line


def test_a_run_s_ray_actors_join_through_the_application(monkeypatch):
    from edgesim.learning.client_workers import RayPool

    joined = []
    pool_ray = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **k: pytest.fail("joined by itself"))
    with pytest.raises(ConfigError, match=ADDRESS):
        RayPool(2, {}, None, 1, pool_ray, address=ADDRESS,
                join=lambda address: (joined.append(address), join_cluster(_unreachable_ray(), address)))
    assert joined == [ADDRESS]


def test_edgesim_sweep_words_an_unreachable_head_as_such(tiny_scenario, tmp_path, monkeypatch):
    import edgesim.scenarios.sweep as sweep

    monkeypatch.setattr(sweep, "import_ray", _unreachable_ray)
    result = CliRunner().invoke(app, ["sweep", str(tiny_scenario), "--executor", "ray", "--ray-address", ADDRESS,
                                      "--out", str(tmp_path / "s"), "-q", "--no-plots"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and ADDRESS in lines[0] and "cannot reach a Ray cluster" in lines[0], lines
    assert "free some space" not in lines[0]
