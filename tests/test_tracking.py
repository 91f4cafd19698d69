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
    assert result.exit_code == 2 and "tracking = 'wandb': expected one of 'none', 'mlflow'" in result.stderr


def test_a_tracker_that_fails_leaves_a_complete_run_and_one_warning(tiny_scenario, tmp_path, monkeypatch):
    pytest.importorskip("mlflow", reason="the tracking extra (mlflow-skinny) is not installed")

    def unreachable(folder):
        raise ConnectionError("tracking server unreachable")

    monkeypatch.setattr("edgesim.scenarios.run.log_mlflow", unreachable)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "run.tracking=mlflow",
                                 "--set", "run.rounds=1", "--set", "run.algorithms=local", "-q"])
    assert result.exit_code == 0 and (out / "summary.json").is_file()
    assert (f"warning: {out} was not logged to MLflow (ConnectionError: tracking server unreachable); "
            f"the run folder is complete") in result.stderr
