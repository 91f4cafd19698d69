"""``edgesim run``: a co-simulated run of every algorithm of a scenario, written to a run folder.

Each algorithm gets its own clock (an :class:`edgesim.engine.Simulation`)
over the same channel realisation (same seed) and the same data partition,
so their curves are comparable point for point. Rounds stop at ``run.rounds``
(default: the budget's G), at ``run.max_time_s`` of simulated time, or — with
``run.stop_on_plateau`` — when the paper's final-accuracy rule is met.

With ``run.checkpoint_every = N`` each algorithm saves its engine and learning
state every N rounds (:mod:`scenarios.checkpoint`); ``resume=True`` goes on
from the last checkpoint of a killed run and writes the same bytes as a run
that was never stopped.
"""

from __future__ import annotations

import dataclasses
import platform
import shutil
from pathlib import Path
from typing import Callable, Optional

import tomli_w

from edgesim.config import ConfigError
from edgesim.engine import Simulation
from learning.algorithms import REGISTRY
from learning.context import build_context
from learning.data.datasets import DatasetError
from learning.metrics import final_accuracy, time_to_accuracy
from scenarios import checkpoint
from scenarios.checkpoint import AlgorithmRun
from scenarios.runfolder import MARKER, RunFolder
from scenarios.schema import Scenario

ROUND_FIELDS = (
    "round", "start_time_s", "time_s", "duration_s", "n_selected", "n_arrived", "n_dropped",
    "bits_up", "bits_down", "cum_bits_up", "cum_bits_down", "cum_wasted_bits", "energy_j", "cum_energy_j",
)
DEVICE_FIELDS = (
    "round", "device", "channel_gain", "rate_bps", "download_s", "compute_s", "upload_airtime_s", "idle_s",
    "bits_up", "bits_down", "wasted_bits", "radio_energy_j", "compute_energy_j", "arrived", "dropped",
)


def versions() -> dict:
    import numpy
    import simpy
    import torch

    from importlib.metadata import version

    return {
        "edgesim": version("edgesim"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "simpy": simpy.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def _drop_none(obj):
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def resolved_config(sc: Scenario) -> dict:
    """Every section with every default filled in, plus the seed and versions (``None`` values omitted)."""
    out = {"name": sc.name, "description": sc.description, "seed": sc.seed, "source": sc.path}
    for name in ("system", "budget", "workload"):
        out[name] = dataclasses.asdict(getattr(sc, name))
    for name in ("data", "train", "run"):
        out[name] = dataclasses.asdict(sc.learning[name])
    algs = sc.learning["algorithms"]
    out["algorithms"] = {
        a: dataclasses.asdict(algs.get(a) or REGISTRY[a].config_cls()) for a in sc.learning["run"].algorithms
    }
    out["versions"] = versions()
    return _drop_none(out)


def _finished(sc: Scenario, sim: Simulation, accs: list[float]) -> bool:
    """Whether the algorithm stops before another round (rounds, simulated time, plateau)."""
    run_cfg = sc.learning["run"]
    if sim.round_index >= (run_cfg.rounds or sc.budget.rounds):
        return True
    if run_cfg.max_time_s is not None and sim.now_s >= run_cfg.max_time_s:
        return True
    return bool(accs) and run_cfg.stop_on_plateau and final_accuracy(accs, run_cfg.plateau_tol, run_cfg.plateau_patience)[2]


def run_algorithm(
    sc: Scenario,
    ctx,
    name: str,
    on_round: Optional[Callable] = None,
    *,
    checkpoint_dir: Optional[Path] = None,
    fingerprint: str = "",
    resume: bool = False,
) -> AlgorithmRun:
    """Run one algorithm on its own clock; returns its records, events and final clock.

    With ``checkpoint_dir`` and ``run.checkpoint_every > 0`` the state is saved
    every that many rounds and when the algorithm finishes; ``resume`` starts
    from the checkpoint found there (a finished algorithm is not run again).
    """
    every = sc.learning["run"].checkpoint_every if checkpoint_dir is not None else 0
    saved = checkpoint.load(checkpoint_dir, name, fingerprint) if (resume and checkpoint_dir is not None) else None
    out = AlgorithmRun(name)
    if saved is not None:
        out.records, out.events, out.now_s = saved["records"], saved["events"], float(saved["now_s"])
        if on_round is not None:
            for rec in out.records:
                on_round(name, rec)
        if saved["done"]:
            return out
    cfg = sc.learning["algorithms"].get(name) or REGISTRY[name].config_cls()
    backend = REGISTRY[name].build(ctx, cfg)
    if every:
        checkpoint.check_resumable(backend, name)
    sim = Simulation(sc.system, sc.budget, backend, seed=sc.seed)
    if saved is not None:
        sim.load_state_dict(saved["engine"])
        backend.load_state_dict(saved["backend"])
    accs = [r.metrics.get("accuracy", float("nan")) for r in out.records]
    n_events = len(out.events)
    while not _finished(sc, sim, accs):
        rec = sim.run_round()
        out.records.append(rec)
        accs.append(rec.metrics.get("accuracy", float("nan")))
        if on_round is not None:
            on_round(name, rec)
        if every:
            done = _finished(sc, sim, accs)
            if done or sim.round_index % every == 0:
                events = out.events[:n_events] + sim.events
                checkpoint.save(checkpoint_dir, name, fingerprint=fingerprint, sim=sim, backend=backend,
                                records=out.records, events=events, done=done)
    out.events = out.events[:n_events] + sim.events
    out.now_s = sim.now_s
    return out


def summarize(sc: Scenario, sims: dict[str, AlgorithmRun], model_bits: int) -> dict:
    run_cfg = sc.learning["run"]
    algs = {}
    for name, sim in sims.items():
        recs = sim.records
        times = [r.end_time_s for r in recs]
        accs = [r.metrics.get("accuracy", float("nan")) for r in recs]
        final, idx, settled = final_accuracy(accs, run_cfg.plateau_tol, run_cfg.plateau_patience) if recs else (float("nan"), -1, False)
        last = recs[-1] if recs else None
        algs[name] = {
            "display": REGISTRY[name].display,
            "rounds": len(recs),
            "simulated_time_s": sim.now_s,
            "final_accuracy": final,
            "final_round": idx,
            "final_time_s": times[idx] if recs else None,
            "plateau_reached": settled,
            "last_accuracy": accs[-1] if recs else None,
            "best_accuracy": max(accs) if recs else None,
            "time_to_accuracy_s": {str(t): time_to_accuracy(times, accs, t) for t in run_cfg.accuracy_thresholds},
            "total_bits_up": last.cum_bits_up if last else 0.0,
            "total_bits_down": last.cum_bits_down if last else 0.0,
            "total_wasted_bits": last.cum_wasted_bits if last else 0.0,
            "total_energy_j": last.cum_energy_j if last else 0.0,
        }
    return {
        "scenario": sc.name,
        "seed": sc.seed,
        "model_bits": model_bits,
        "final_accuracy_rule": f"first round ending {run_cfg.plateau_patience} consecutive rounds whose mean "
        f"accuracy changes by less than {run_cfg.plateau_tol} from the previous round (else the last round)",
        "algorithms": algs,
    }


def _round_rows(name: str, sim: AlgorithmRun, metric_keys: list[str], info_keys: list[str]):
    for r in sim.records:
        yield [
            name, r.round_index, r.start_time_s, r.end_time_s, r.duration_s, len(r.devices), len(r.arrived),
            len(r.dropped), r.bits_up, r.bits_down, r.cum_bits_up, r.cum_bits_down, r.cum_wasted_bits,
            r.radio_energy_j + r.compute_energy_j, r.cum_energy_j,
            *[r.metrics.get(k) for k in metric_keys], *[r.info.get(k) for k in info_keys],
        ]


def write_results(folder: RunFolder, sc: Scenario, sims: dict[str, AlgorithmRun], model_bits: int) -> None:
    from plots.curves import plot_accuracy

    metric_keys = sorted({k for s in sims.values() for r in s.records for k in r.metrics})
    metric_keys.sort(key=lambda k: (k != "accuracy", k))
    info_keys = sorted({k for s in sims.values() for r in s.records for k in r.info})
    folder.write_csv(
        "rounds.csv",
        ("algorithm", *ROUND_FIELDS, *metric_keys, *info_keys),
        (row for name, sim in sims.items() for row in _round_rows(name, sim, metric_keys, info_keys)),
    )
    folder.write_csv(
        "devices.csv",
        ("algorithm", *DEVICE_FIELDS),
        (
            [name, *[getattr(d, f if f != "round" else "round_index") for f in DEVICE_FIELDS]]
            for name, sim in sims.items()
            for r in sim.records
            for d in r.devices
        ),
    )
    folder.write_csv(
        "events.csv",
        ("algorithm", "time_s", "round", "device", "kind", "bits"),
        ([name, e.time_s, e.round_index, e.device, e.kind, e.bits] for name, sim in sims.items() for e in sim.events),
    )
    folder.write_json("summary.json", summarize(sc, sims, model_bits))
    plot_accuracy([folder.work], folder.path("time_to_accuracy.png"), title=f"{sc.name} (seed {sc.seed})")
    plot_accuracy([folder.work], folder.path("accuracy_vs_uplink_bits.png"), x="cum_bits_up", title=sc.name)
    plot_accuracy([folder.work], folder.path("accuracy_vs_energy.png"), x="cum_energy_j", title=sc.name)


def _fail_if_other_config(config_toml: Path, expected: str) -> None:
    found = checkpoint.config_fingerprint(config_toml)
    if found is not None and found != expected:
        raise ConfigError(
            f"{config_toml.parent}: holds a run of a different scenario or overrides (its config.toml differs); "
            f"choose another --out, or run without --resume to replace it"
        )


def is_finished(out: Path) -> bool:
    """A finished run folder: ``summary.json`` present, no ``INCOMPLETE`` marker."""
    out = Path(out)
    return (out / "summary.json").is_file() and not (out / MARKER).exists()


def run_scenario(sc: Scenario, out: Path, on_round: Optional[Callable] = None, *, resume: bool = False) -> Path:
    """Run every algorithm of ``sc`` and write the run folder ``out``; returns its path.

    Bad data or configuration raise :class:`ConfigError` before anything is written.
    ``resume``: a finished ``out`` of the same scenario is returned as it is; an
    unfinished ``out.incomplete`` goes on from its checkpoints (from scratch
    where it has none). A folder of a different scenario is an error.
    """
    data_cfg = sc.learning["data"]
    for name in sc.learning["run"].algorithms:
        if name not in REGISTRY:
            raise ConfigError(f"{sc.path}: [run] algorithms: unknown algorithm {name!r}; expected one of: "
                              f"{', '.join(sorted(REGISTRY))}")
    config = resolved_config(sc)
    fp = checkpoint.fingerprint(config)
    folder = RunFolder(out)
    if resume:
        if is_finished(folder.final):
            _fail_if_other_config(folder.final / "config.toml", fp)
            return folder.final
        if folder.work.exists():
            _fail_if_other_config(folder.work / "config.toml", fp)
    try:
        ctx = build_context(
            sc.seed, data_cfg, sc.learning["train"], sc.learning["run"], sc.workload, sc.system.n_devices
        )
    except DatasetError as e:
        raise ConfigError(f"{sc.path}: [data] {e}") from None
    except ValueError as e:
        raise ConfigError(f"{sc.path}: [data] partition {data_cfg.partition!r}: {e}") from None
    resuming = resume and (folder.work / "config.toml").exists()
    folder.start(resume=resuming)
    if resuming:
        folder.mark(f"resumed {_now()} from the checkpoints in {checkpoint.CHECKPOINT_DIR}/")
    try:
        if not resuming:
            folder.write_text("config.toml", tomli_w.dumps(config))
        sims = {
            name: run_algorithm(sc, ctx, name, on_round, checkpoint_dir=folder.work, fingerprint=fp, resume=resuming)
            for name in sc.learning["run"].algorithms
        }
        write_results(folder, sc, sims, ctx.model_bits)
        shutil.rmtree(folder.path(checkpoint.CHECKPOINT_DIR), ignore_errors=True)  # only an unfinished run needs them
    except BaseException as e:
        folder.mark(f"failed: {type(e).__name__}: {e}")
        raise
    return folder.finish()


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")
