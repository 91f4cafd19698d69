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
    (run,) = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    assert run.info.run_name == "run" and run.data.tags["edgesim.seed"] == "3"
    assert run.data.params["run.tracking"] == "mlflow" and run.data.params["system.n_devices"] == "6"
    history = client.get_metric_history(run.info.run_id, "fedavg/accuracy")
    assert [m.step for m in history] == [0, 1] and all(0 <= m.value <= 1 for m in history)
    assert client.get_metric_history(run.info.run_id, "local/cum_energy_j")
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


def test_tensorboard_gets_each_rounds_scalars_on_the_simulated_clock(tiny_scenario, tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed (pip install \"edgesim[tensorboard]\")")
    import csv

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from edgesim.results.writing import read_manifest

    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "run.tracking=tensorboard",
                                 "--set", "run.rounds=2", "--set", "run.algorithms=fedavg,local", "-q"])
    assert result.exit_code == 0, result.output
    (event_file,) = (out / "tensorboard").iterdir()
    assert f"tensorboard/{event_file.name}" in read_manifest(out)  # the folder stays an edgesim run folder
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    rows = [r for r in csv.DictReader(open(out / "rounds.csv", newline="")) if r["algorithm"] == "fedavg"]
    accuracy = events.Scalars("fedavg/accuracy")
    assert [e.step for e in accuracy] == [0, 1]
    assert [e.value for e in accuracy] == pytest.approx([float(r["accuracy"]) for r in rows])
    assert [e.wall_time for e in accuracy] == pytest.approx([float(r["time_s"]) for r in rows])  # simulated seconds
    for tag in ("fedavg/cum_bits_up", "fedavg/cum_energy_j", "fedavg/time_s", "local/accuracy"):
        assert len(events.Scalars(tag)) == 2, tag
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
        (run,) = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
        seen.append((run.info.status, len(client.get_metric_history(run.info.run_id, f"{algorithm}/accuracy"))))

    edgesim.run(tiny_scenario, tmp_path / "run", on_round=on_round,
                run={"tracking": "mlflow", "rounds": 2, "algorithms": ["fedavg"]})
    assert seen == [("RUNNING", 1), ("RUNNING", 2)]
