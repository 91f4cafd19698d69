"""Optional experiment tracking: a finished run's per-round metrics and its folder, sent to MLflow.

``[run] tracking = "mlflow"`` (default ``"none"``) logs, after the run
folder is complete, one MLflow run per edgesim run: the resolved scenario as
parameters (dotted keys), the git commit, seed and fingerprint as tags, every
numeric column of ``rounds.csv`` as ``<algorithm>/<column>`` metrics at
step = round, and the run folder as artifacts. The experiment is the
scenario's name; the tracking server is MLflow's own setting
(``MLFLOW_TRACKING_URI``, e.g. ``file:///path/mlruns`` for a local store).
MLflow is an extra (``pip install "edgesim[tracking]"``) and is imported only here.
"""

from __future__ import annotations

import csv
import json
import math
import tomllib
from pathlib import Path

from edgesim.config import ConfigError

TRACKERS = ("none", "mlflow")


def check_available(tracking: str, where: str) -> None:
    """Fail before the run when the tracker is not installed."""
    if tracking == "mlflow":
        try:
            import mlflow  # noqa: F401
        except ImportError:
            raise ConfigError(f"{where}: [run] tracking = 'mlflow': MLflow is not installed; expected "
                              f"pip install \"edgesim[tracking]\" (or tracking = \"none\")") from None


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = json.dumps(v) if isinstance(v, list) else v
    return out


def log_mlflow(folder: Path) -> str:
    """Log the finished run folder ``folder`` to MLflow; returns the MLflow run id."""
    import mlflow
    from mlflow.entities import Metric, Param, RunTag

    from edgesim.scenarios.api import scenario_fingerprint

    folder = Path(folder)
    config = tomllib.loads((folder / "config.toml").read_text())
    provenance = json.loads((folder / "run.json").read_text()) if (folder / "run.json").is_file() else {}
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(config["name"])
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(config["name"])
    tags = {"edgesim.run_folder": str(folder.resolve()), "edgesim.seed": str(config["seed"]),
            "edgesim.fingerprint": scenario_fingerprint(config)}
    if provenance.get("git"):
        tags.update({"mlflow.source.git.commit": provenance["git"]["commit"],
                     "edgesim.git_dirty": str(provenance["git"]["dirty"])})
    run = client.create_run(experiment_id, run_name=folder.name, tags=tags)
    run_id = run.info.run_id
    params = [Param(k, str(v)[:6000]) for k, v in _flatten(config).items()]
    metrics = []
    with open(folder / "rounds.csv", newline="") as f:
        for row in csv.DictReader(f):
            step = int(row["round"])
            for column, text in row.items():
                if column in ("algorithm", "round") or text == "":
                    continue
                try:
                    value = float(text)
                except ValueError:
                    continue
                if math.isfinite(value):
                    metrics.append(Metric(f"{row['algorithm']}/{column}", value, 0, step))
    for i in range(0, len(params), 100):
        client.log_batch(run_id, params=params[i:i + 100])
    for i in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[i:i + 1000])
    client.log_artifacts(run_id, str(folder))
    client.set_terminated(run_id)
    return run_id
