"""[run] tracking = "mlflow": a finished run's metrics and folder in a local MLflow file store (offline)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from edgesim.scenarios.cli import app

runner = CliRunner()


def test_mlflow_gets_the_rounds_and_the_run_folder(tiny_scenario, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow", reason="the tracking extra (mlflow-skinny) is not installed")
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps its file store behind this switch
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "run.tracking=mlflow",
                                 "--set", "run.rounds=2", "--set", "run.algorithms=fedavg,local", "-q"])
    assert result.exit_code == 0, result.output
    assert "not logged" not in result.output
    client = mlflow.MlflowClient(store.as_uri())
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    (run,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    nested = {r.info.run_name: r for r in runs if r.data.tags.get("mlflow.parentRunId") == run.info.run_id}
    assert run.info.run_name == "run" and run.data.tags["edgesim.seed"] == "3" and sorted(nested) == ["fedavg", "local"]
    assert run.data.params["run.tracking"] == "mlflow" and run.data.params["system.n_devices"] == "6"
    history = client.get_metric_history(nested["fedavg"].info.run_id, "accuracy")
    assert [m.step for m in history] == [0, 1] and all(0 <= m.value <= 1 for m in history)
    assert client.get_metric_history(nested["local"].info.run_id, "cum_energy_j")
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.toml", "run.json", "rounds.csv", "summary.json", "accuracy_vs_time.png"} <= artifacts


def test_tracking_is_validated_and_off_by_default(tiny_scenario):
    from edgesim.scenarios.schema import load_scenario

    assert load_scenario(tiny_scenario).learning["run"].tracking == "none"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--set", "run.tracking=wandb", "--out", "/tmp/never"])
    assert result.exit_code == 2 and "tracking = 'wandb': expected one of 'none', 'mlflow', 'tensorboard'" in result.stderr


def test_a_tracker_that_fails_leaves_a_complete_run_and_one_warning(tiny_scenario, tmp_path, monkeypatch):
    pytest.importorskip("mlflow", reason="the tracking extra (mlflow-skinny) is not installed")

    def unreachable(folder):
        raise ConnectionError("tracking server unreachable")

    monkeypatch.setattr("edgesim.scenarios.tracking.log_mlflow", lambda folder, **kw: unreachable(folder))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "run.tracking=mlflow",
                                 "--set", "run.rounds=1", "--set", "run.algorithms=local", "-q"])
    assert result.exit_code == 0 and (out / "summary.json").is_file()
    assert (f"warning: MLflow: logging the finished run {out} failed (ConnectionError: tracking server unreachable); "
            f"the run folder is complete") in result.stderr


def test_tensorboard_has_one_run_per_algorithm_with_shared_tags_at_step_round(tiny_scenario, tmp_path):
    """tensorboard/<algorithm>/ holds one event file per algorithm (TensorBoard's runs), each with the same tag
    names (so two methods' curves overlay), step = the round, simulated seconds as the scalar time_s, and the
    events' wall time the real clock's (not the simulated seconds: no 1970 on the Wall axis)."""
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed (pip install \"edgesim[tensorboard]\")")
    import csv
    import time

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from edgesim.results.writing import read_manifest

    out = tmp_path / "run"
    started = time.time()
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "run.tracking=tensorboard",
                                 "--set", "run.rounds=2", "--set", "run.algorithms=fedavg,local", "-q"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "tensorboard").iterdir()) == ["fedavg", "local"]
    rows = list(csv.DictReader(open(out / "rounds.csv", newline="")))
    tags = {}
    for algorithm in ("fedavg", "local"):
        (event_file,) = (out / "tensorboard" / algorithm).iterdir()
        assert f"tensorboard/{algorithm}/{event_file.name}" in read_manifest(out)  # still an edgesim run folder
        events = EventAccumulator(str(out / "tensorboard" / algorithm))
        events.Reload()
        tags[algorithm] = set(events.Tags()["scalars"])
        mine = [r for r in rows if r["algorithm"] == algorithm]
        accuracy, time_s = events.Scalars("accuracy"), events.Scalars("time_s")
        assert [e.step for e in accuracy] == [0, 1] == [e.step for e in time_s]
        assert [e.value for e in accuracy] == pytest.approx([float(r["accuracy"]) for r in mine])
        assert [e.value for e in time_s] == pytest.approx([float(r["time_s"]) for r in mine])  # simulated seconds
        assert all(e.wall_time >= started - 1 for e in accuracy)  # the real clock, never the simulated one
        for tag in ("bits_up", "cum_bits_up", "energy_j", "cum_energy_j"):
            assert len(events.Scalars(tag)) == 2, (algorithm, tag)
    assert {"accuracy", "time_s", "bits_up", "energy_j"} <= tags["fedavg"] & tags["local"]
    assert not any("/" in t for t in tags["fedavg"] | tags["local"])  # no <algorithm>/ prefix
    again = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "run.tracking=tensorboard",
                                "--set", "run.rounds=2", "--set", "run.algorithms=fedavg,local", "-q", "--overwrite"])
    assert again.exit_code == 0, again.output


def test_tracking_tensorboard_without_the_extra_is_one_line(tiny_scenario, tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name == "tensorboard" or name.startswith("tensorboard."):
            raise ImportError("No module named 'tensorboard'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "r"), "--set",
                                 "run.tracking=tensorboard", "-q"])
    assert result.exit_code == 2 and "TensorBoard is not installed; expected pip install" in result.stderr
    assert not (tmp_path / "r").exists()


def test_mlflow_has_each_round_as_soon_as_it_ends(tiny_scenario, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow", reason="the tracking extra (mlflow-skinny) is not installed")
    import edgesim

    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    seen = []

    def on_round(algorithm, record):  # called after the tracker has logged the round
        client = mlflow.MlflowClient(store.as_uri())
        runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
        (run,) = [r for r in runs if r.info.run_name == algorithm and "mlflow.parentRunId" in r.data.tags]
        seen.append((run.info.status, len(client.get_metric_history(run.info.run_id, "accuracy"))))

    edgesim.run(tiny_scenario, tmp_path / "run", on_round=on_round,
                run={"tracking": "mlflow", "rounds": 2, "algorithms": ["fedavg"]})
    assert seen == [("RUNNING", 1), ("RUNNING", 2)]


def test_mlflow_nests_one_run_per_algorithm_with_shared_metric_names(tiny_scenario, tmp_path, monkeypatch):
    """Without MLflow installed too: a recording stand-in for MLflow's client shows the layout — one run for the
    edgesim run (the scenario's parameters, the folder as artifacts) and, nested under it, one run per algorithm
    named by it, whose metrics have the same names in every algorithm (accuracy, time_s, ...) at step = round."""
    import sys
    import types
    from collections import namedtuple

    calls = []

    class Client:
        def get_experiment_by_name(self, name):
            return None

        def create_experiment(self, name):
            return "exp"

        def create_run(self, experiment_id, run_name, tags):
            calls.append(("create", run_name, dict(tags)))
            return types.SimpleNamespace(info=types.SimpleNamespace(run_id=f"id-{run_name}"))

        def log_batch(self, run_id, metrics=(), params=(), tags=()):
            calls.extend(("metric", run_id, m.key, m.step) for m in metrics)
            calls.extend(("param", run_id, p.key) for p in params)

        def log_artifacts(self, run_id, path):
            calls.append(("artifacts", run_id))

        def set_terminated(self, run_id, status="FINISHED"):
            calls.append(("end", run_id, status))

    fake = types.ModuleType("mlflow")
    fake.MlflowClient = Client
    fake.entities = types.ModuleType("mlflow.entities")
    fake.entities.Metric = namedtuple("Metric", "key value timestamp step")
    fake.entities.Param = namedtuple("Param", "key value")
    fake.entities.RunTag = namedtuple("RunTag", "key value")
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    monkeypatch.setitem(sys.modules, "mlflow.entities", fake.entities)
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "r"), "--set", "run.tracking=mlflow",
                                 "--set", "run.rounds=2", "--set", "run.algorithms=fedavg,local", "-q"])
    assert result.exit_code == 0 and "warning" not in result.output, result.output
    created = {name: tags for kind, name, tags in (c for c in calls if c[0] == "create")}
    assert list(created) == ["r", "fedavg", "local"] and "mlflow.parentRunId" not in created["r"]
    assert created["fedavg"]["mlflow.parentRunId"] == created["local"]["mlflow.parentRunId"] == "id-r"
    metrics = {(run, key, step) for kind, run, key, step in (c for c in calls if c[0] == "metric")}
    for algorithm in ("fedavg", "local"):
        for key in ("accuracy", "time_s", "bits_up", "energy_j"):
            assert {(f"id-{algorithm}", key, 0), (f"id-{algorithm}", key, 1)} <= metrics, (algorithm, key)
    assert not any(run == "id-r" or "/" in key for run, key, _ in metrics)  # the edgesim run holds the scenario
    assert any(c[:2] == ("param", "id-r") for c in calls) and ("artifacts", "id-r") in calls
    assert [c for c in calls if c[0] == "end"] == [("end", "id-fedavg", "FINISHED"), ("end", "id-local", "FINISHED"),
                                                  ("end", "id-r", "FINISHED")]
