"""The Python API: docs/use/python_api.md's notebook, run cell by cell, and the API's own guarantees."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import edgesim

DOC = Path(__file__).resolve().parents[1] / "docs" / "use" / "python_api.md"


def test_the_documented_notebook_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cells = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(cells) >= 6
    ns: dict = {}
    for cell in cells:
        exec(compile(cell, str(DOC), "exec"), ns)  # noqa: S102 - the documentation's own code
    sc, run, df = ns["sc"], ns["run"], ns["df"]
    assert sc.seed == 1 and sc.system.n_devices == 6 and sc.budget.rounds == 3
    assert run.path == Path("runs/api-demo") and (tmp_path / "runs/api-demo/summary.json").is_file()
    assert set(ns["rounds"]["algorithm"]) == {"fedavg", "fedadam"} and len(ns["rounds"]) == 6
    assert list(ns["final"]["algorithm"]) == ["fedavg", "fedadam"]
    assert [(a, r) for a, r, _, _ in ns["curve"]] == [(a, r) for a in ("fedavg", "fedadam") for r in range(3)]
    assert "pass overwrite=True" in ns["refused"] and "--" not in ns["refused"]
    assert "bandwidth_hz = -5" in ns["bad"]
    assert df.columns[:8].tolist() == ["run", "sweep", "scenario", "fingerprint", "system.bandwidth_hz", "seed",
                                       "algorithm", "display"]
    assert len(df) == 2 * 2 * 2 and df.groupby("fingerprint").ngroups == 2  # 2 grid points x 2 seeds x 2 rounds
    assert df.groupby("fingerprint")["seed"].nunique().tolist() == [2, 2]
    assert ns["table"].shape == (2, 4)
    assert len(ns["everything"]) == len(df) + len(ns["rounds"])


def test_overrides_fingerprint_and_errors(tmp_path):
    sc = edgesim.load_scenario({"name": "d", "system": {"n_devices": 4}, "run": {"clients_per_round": 2}},
                               seed=7, **{"system.bandwidth_hz": 2e6})
    assert (sc.path, sc.name, sc.seed, sc.system.n_devices, sc.system.bandwidth_hz) == ("<scenario dict>", "d", 7, 4, 2e6)
    assert edgesim.load_scenario(sc) is sc and edgesim.load_scenario(sc, seed=8).seed == 8
    with pytest.raises(edgesim.ConfigError, match=r"\[run\]: clients_per_round = 0"):
        edgesim.load_scenario(run={"clients_per_round": 0})
    base = {"name": "x", "seed": 1, "system": {"n_devices": 3}}
    assert edgesim.scenario_fingerprint(base) == edgesim.scenario_fingerprint({**base, "seed": 2, "versions": {}})
    assert edgesim.scenario_fingerprint(base) != edgesim.scenario_fingerprint({**base, "system": {"n_devices": 4}})
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.txt").write_text("mine")
    with pytest.raises(edgesim.RunFolderError, match="thesis.txt") as e:
        edgesim.run(sc, out=tmp_path / "mine")
    assert "--" not in str(e.value) and (tmp_path / "mine" / "thesis.txt").read_text() == "mine"
    with pytest.raises(edgesim.RunFolderError, match="neither a run folder"):
        edgesim.load_runs([tmp_path / "mine"])
    with pytest.raises(TypeError, match="path of a scenario file"):
        edgesim.sweep(sc, grid={"seed": [1]})


def test_run_shows_a_progress_bar_unless_quiet_and_final_has_nan_not_none(tmp_path, capsys):
    import math

    import edgesim

    small = dict(system={"n_devices": 4}, run={"rounds": 2, "clients_per_round": 2, "algorithms": ["fedavg", "local"],
                                                "accuracy_thresholds": [0.99]})
    run = edgesim.run(None, tmp_path / "a", **small)
    out = capsys.readouterr().out
    assert "\rfedavg" in out and "2/2 rounds" in out and "\rlocal" in out and out.endswith("\n")
    final = run.final()
    assert math.isnan(final.loc[0, "time_to_0.99_s"]) and final["time_to_0.99_s"].dtype == float  # never reached
    edgesim.run(None, tmp_path / "b", quiet=True, **small)
    assert capsys.readouterr().out == ""
