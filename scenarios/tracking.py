"""Optional experiment tracking: per-round metrics to TensorBoard or MLflow while a run goes, its folder at the end.

Both trackers keep **one tracked run per algorithm** (per name of ``[run] algorithms``), whose scalars have the
same names in every algorithm — the columns of ``rounds.csv`` (:func:`round_scalars`: ``accuracy``, ``loss``,
``bits_up``, ``cum_bits_up``, ``energy_j``, ``cum_energy_j``, ...) — so that the curves of two methods overlay
on one chart, at step = the round. Simulated seconds are a scalar of their own, ``time_s`` (the round's simulated
end); the events' wall time is the real clock's, never the simulated one.

``[run] tracking = "tensorboard"`` writes one event file per algorithm into the run folder's
``tensorboard/<algorithm>/`` while the run goes: TensorBoard lists each folder as a run
(``tensorboard --logdir runs`` shows ``default/tensorboard/fedavg``, ``default/tensorboard/local``, ...).
TensorBoard is an extra (``pip install "edgesim[tensorboard]"``); torch's ``SummaryWriter`` writes the files.

``[run] tracking = "mlflow"`` logs one MLflow run per edgesim run — the resolved scenario as parameters
(dotted keys), the git commit, seed and fingerprint as tags, and, once the run folder is complete, the folder as
artifacts — and, nested under it (MLflow's ``mlflow.parentRunId`` tag), one run per algorithm named by it that
gets the per-round scalars *as each round ends* and, at the end, the numeric columns of ``rounds.csv`` that no
round logged. The experiment is the scenario's name; the tracking server is MLflow's own setting
(``MLFLOW_TRACKING_URI``, e.g. ``file:///path/mlruns`` for a local store). MLflow is an extra
(``pip install "edgesim[tracking]"``) and is imported only here.

A tracker that fails never stops the run: the run says so in one warning line
and goes on without it. A resumed run logs the rounds it restores again (the
same values at the same steps).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Iterable, Optional

from edgesim.config import ConfigError
from edgesim.results.files import ROUNDS
from edgesim.results.fingerprint import flatten, scenario_fingerprint
from edgesim.results.reading import Run, read_csv_rows

TRACKERS = ("none", "mlflow", "tensorboard")
TENSORBOARD_DIR = "tensorboard"


def check_available(tracking: str, where: str) -> None:
    """Fail before the run when the tracker is not installed."""
    if tracking == "mlflow":
        try:
            import mlflow  # noqa: F401 - imported only to see that it is installed
        except ImportError:
            raise ConfigError(f"{where}: [run] tracking = 'mlflow': MLflow is not installed; expected "
                              f"pip install \"edgesim[tracking]\" (or tracking = \"none\")") from None
    if tracking == "tensorboard":
        try:
            import tensorboard  # noqa: F401 - imported only to see that it is installed
        except ImportError:
            raise ConfigError(f"{where}: [run] tracking = 'tensorboard': TensorBoard is not installed; expected "
                              f"pip install \"edgesim[tensorboard]\" (or tracking = \"none\")") from None


def round_scalars(rec) -> dict[str, float]:
    """What a tracker logs of one round (an :class:`edgesim.engine.RoundRecord`), named as ``rounds.csv``'s columns:
    ``time_s`` (simulated end), ``duration_s``, ``n_arrived``, ``bits_up``, ``cum_bits_up``, ``cum_bits_down``,
    ``energy_j``, ``cum_energy_j``, and every finite metric of the backend (``accuracy``, ``loss``, ...)."""
    out = {"time_s": rec.end_time_s, "duration_s": rec.duration_s, "n_arrived": float(len(rec.arrived)),
           "bits_up": rec.bits_up, "cum_bits_up": rec.cum_bits_up, "cum_bits_down": rec.cum_bits_down,
           "energy_j": rec.radio_energy_j + rec.compute_energy_j, "cum_energy_j": rec.cum_energy_j}
    for key, value in rec.metrics.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[key] = float(value)
    return {k: float(v) for k, v in out.items()}


class RoundTracker:
    """A tracker fed while the run goes: :meth:`on_round` per round, :meth:`finish` with the finished run folder,
    :meth:`fail` when the run does not finish. A failure inside turns the tracker off with one warning."""

    def __init__(self, say: Callable[[str], None]):
        self.say, self.off = say, False

    def _guard(self, what: str, call: Callable, *args, then: str = "the run goes on without it") -> None:
        if self.off:
            return
        try:
            call(*args)
        except Exception as e:  # noqa: BLE001 - someone else's service: the run goes on without it
            self.off = True
            self.say(f"warning: {self.name}: {what} failed ({type(e).__name__}: {e}); {then}")

    def on_round(self, algorithm: str, rec) -> None:
        self._guard("logging a round", self._round, algorithm, rec)

    def feeding(self, on_round: Optional[Callable]) -> Callable:
        """A round callback that feeds this tracker, then calls ``on_round`` (the caller's, if any)."""
        def both(algorithm: str, rec) -> None:
            self.on_round(algorithm, rec)
            if on_round is not None:
                on_round(algorithm, rec)
        return both

    def close(self) -> None:
        """Before the run folder is renamed into place: close what is written inside it."""
        self._guard("closing", self._close)

    def finish(self, folder: Path) -> None:
        self._guard(f"logging the finished run {folder}", self._finish, Path(folder), then="the run folder is complete")

    def fail(self) -> None:
        self._guard("closing", self._fail)

    def _close(self) -> None:
        pass

    def _finish(self, folder: Path) -> None:
        pass

    def _fail(self) -> None:
        pass


class TensorBoardTracker(RoundTracker):
    """Per-round scalars into ``<run folder>/tensorboard/<algorithm>/``, one event file per algorithm (module
    docstring); ``register(name)`` lists each file in the run folder's manifest before anything is written to it."""

    name = "TensorBoard"

    def __init__(self, work: Path, algorithms: Iterable[str], register: Callable[[str], object],
                 say: Callable[[str], None]):
        super().__init__(say)
        from torch.utils.tensorboard import SummaryWriter

        self.writers = {}
        for algorithm in algorithms:
            log_dir = Path(work) / TENSORBOARD_DIR / algorithm
            log_dir.mkdir(parents=True, exist_ok=True)
            before = set(log_dir.iterdir())
            self.writers[algorithm] = SummaryWriter(str(log_dir))
            for path in sorted(set(log_dir.iterdir()) - before):  # the event file the writer just opened
                register(f"{TENSORBOARD_DIR}/{algorithm}/{path.name}")

    def _round(self, algorithm: str, rec) -> None:
        writer = self.writers[algorithm]
        for key, value in round_scalars(rec).items():
            writer.add_scalar(key, value, rec.round_index)
        writer.flush()

    def _close(self) -> None:
        for writer in self.writers.values():
            writer.close()

    _fail = _close


class MlflowTracker(RoundTracker):
    """One MLflow run opened when the edgesim run starts, with one nested run per algorithm fed each round; all
    closed with the run folder (module docstring)."""

    name = "MLflow"

    def __init__(self, config: dict, run_name: str, say: Callable[[str], None]):
        super().__init__(say)
        self.client = self.run_id = None
        self.children: dict[str, str] = {}
        self.logged: set[tuple[str, str]] = set()
        self._guard("starting", self._start, config, run_name)

    def _start(self, config: dict, run_name: str) -> None:
        import mlflow

        self.client = mlflow.MlflowClient()
        self.run_id, self.children = start_mlflow_runs(self.client, config, run_name, config["run"]["algorithms"])

    def _round(self, algorithm: str, rec) -> None:
        from mlflow.entities import Metric

        scalars = round_scalars(rec)
        self.logged |= {(algorithm, k) for k in scalars}
        self.client.log_batch(self.children[algorithm], metrics=[Metric(k, v, 0, rec.round_index)
                                                                 for k, v in scalars.items()])

    def _finish(self, folder: Path) -> None:
        log_mlflow(folder, client=self.client, run_id=self.run_id, children=self.children, skip=self.logged)

    def _fail(self) -> None:
        for run_id in [*self.children.values(), self.run_id]:
            self.client.set_terminated(run_id, status="FAILED")


def start_mlflow_runs(client, config: dict, run_name: str, algorithms: Iterable[str],
                      tags: Optional[dict] = None) -> tuple[str, dict[str, str]]:
    """The MLflow run of one edgesim run (in the experiment named as the scenario; its parameters the resolved
    scenario's dotted keys) and one run per algorithm nested under it (``mlflow.parentRunId``, named by the
    algorithm); returns (the run's id, {algorithm: nested run's id})."""
    from mlflow.entities import Param

    experiment = client.get_experiment_by_name(config["name"])
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(config["name"])
    tags = {"edgesim.seed": str(config["seed"]), "edgesim.fingerprint": scenario_fingerprint(config), **(tags or {})}
    run_id = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
    params = [Param(k, str(json.dumps(v) if isinstance(v, list) else v)[:6000]) for k, v in flatten(config).items()]
    for i in range(0, len(params), 100):
        client.log_batch(run_id, params=params[i:i + 100])
    children = {a: client.create_run(experiment_id, run_name=a,
                                     tags={**tags, "mlflow.parentRunId": run_id, "edgesim.algorithm": a}).info.run_id
                for a in algorithms}
    return run_id, children


def make_tracker(tracking: str, config: dict, work: Path, run_name: str, register: Callable[[str], object],
                 say: Callable[[str], None]) -> Optional[RoundTracker]:
    """The tracker ``[run] tracking`` names, started (``None`` for ``"none"``)."""
    if tracking == "tensorboard":
        return TensorBoardTracker(work, config["run"]["algorithms"], register, say)
    if tracking == "mlflow":
        return MlflowTracker(config, run_name, say)
    return None


def log_mlflow(folder: Path, client=None, run_id: Optional[str] = None, children: Optional[dict] = None,
               skip: Iterable[tuple[str, str]] = ()) -> str:
    """Log the finished run folder ``folder`` to MLflow; returns the MLflow run id. With ``client``, ``run_id`` and
    ``children`` (the runs a :class:`MlflowTracker` fed round by round) it adds the tags and the folder to the run
    and the metrics not in ``skip`` (``(algorithm, column)`` pairs) to each algorithm's nested run; else it makes
    the run and its nested runs, holding everything."""
    import mlflow
    from mlflow.entities import Metric, RunTag

    folder = Path(folder)
    run_folder = Run(folder)
    config, provenance = run_folder.config, run_folder.provenance
    tags = {"edgesim.run_folder": str(folder.resolve()), "edgesim.seed": str(config["seed"]),
            "edgesim.fingerprint": scenario_fingerprint(config)}
    if provenance.get("git"):
        tags.update({"mlflow.source.git.commit": provenance["git"]["commit"],
                     "edgesim.git_dirty": str(provenance["git"]["dirty"])})
    _, rows = read_csv_rows(folder / ROUNDS)
    if run_id is None:
        client = mlflow.MlflowClient()
        algorithms = list(dict.fromkeys(row["algorithm"] for row in rows))
        run_id, children = start_mlflow_runs(client, config, folder.name, algorithms, tags)
    else:
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
    skip = set(skip)
    metrics: dict[str, list] = {a: [] for a in children}
    for row in rows:
        if row["algorithm"] not in metrics:
            continue
        step = int(row["round"])
        for column, text in row.items():
            if column in ("algorithm", "round") or text == "":
                continue
            try:
                value = float(text)
            except ValueError:
                continue
            if math.isfinite(value) and (row["algorithm"], column) not in skip:
                metrics[row["algorithm"]].append(Metric(column, value, 0, step))
    for algorithm, child in children.items():
        for i in range(0, len(metrics[algorithm]), 1000):
            client.log_batch(child, metrics=metrics[algorithm][i:i + 1000])
        client.set_terminated(child)
    client.log_artifacts(run_id, str(folder))
    client.set_terminated(run_id)
    return run_id
