"""``edgesim sweep``: one scenario over the cartesian product of a parameter grid and seeds.

Every grid point × seed is one ordinary run folder under the sweep folder,
named by its values (``system.bandwidth_hz=1e6,system.tx_power_dbm=20,seed=0``).
``sweep.json`` records what was asked; ``sweep.csv`` has one row per run
(grid values, seed, and per algorithm the final accuracy, time to each
accuracy threshold, bits up/down and energy, read from its ``summary.json``).

- Every combination's scenario is validated before anything runs.
- A killed sweep, started again with the same arguments, skips finished runs
  (``summary.json`` and no ``INCOMPLETE`` marker) and resumes unfinished ones
  from their checkpoints (``run.checkpoint_every``).
- Executors: ``local`` (a process pool, spawn context; ``--jobs 1`` runs in
  this process) or ``ray`` (a Ray on this machine, or a cluster given by its address);
  runs are Ray tasks that declare their CPUs (and a GPU share on a GPU cluster).
- Every run trains with its scenario's ``run.threads`` torch threads
  (default 1; ``--threads N`` is ``--set run.threads=N``), whatever the
  executor and the number of jobs, exactly as ``edgesim run`` would: torch's
  CPU reductions depend on the thread count, so this is what makes the
  results independent of how the sweep was executed (and keeps OpenMP from
  spin-waiting on a shared machine). ``threads`` here only schedules: jobs
  default to the cores over it, and a Ray task declares that many CPUs.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from edgesim.config import ConfigError, as_written
from edgesim.results.files import CONFIG, SUMMARY
from edgesim.results.files import SWEEP_SPEC as SWEEP_JSON
from edgesim.results.files import SWEEP_TABLE as SWEEP_CSV
from edgesim.results.writing import RunFolder, atomic_write_bytes, csv_text
from edgesim.scenarios.progress import SweepProgress
from edgesim.scenarios.ray_cluster import import_ray, join_cluster
from edgesim.scenarios.schema import DEFAULT_SCENARIO, load_scenario, parse_override
from edgesim.scenarios.threads import resolve_threads, set_threads, usable_cores
from edgesim.scenarios.threads import threads as threads_for

EXECUTORS = ("local", "ray")
MAX_NAME_CHARS = 200


# --------------------------------------------------------------------------- the grid


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid KEY=V1,V2,…``: the key, the parsed values and their text as typed (for folder names)."""

    key: str
    values: tuple
    texts: tuple[str, ...]


def split_values(text: str) -> list[str]:
    """``"1e6,2e6"`` → ``["1e6", "2e6"]``; commas inside ``[…]``, ``{…}`` or quotes do not split."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_grid(text: str) -> GridAxis:
    """Parse one ``--grid KEY=V1,V2,…`` (each value as TOML, else a plain string, as ``--set``)."""
    if "=" not in text:
        raise ConfigError(f"⟨grid=⟩{text!r}: expected KEY=V1,V2,..., e.g. ⟨grid=⟩system.bandwidth_hz=5e5,1e6,2e6")
    key, values_text = (s.strip() for s in text.split("=", 1))
    if not key or any(not part.strip() for part in key.split(".")):
        raise ConfigError(f"⟨grid=⟩{text!r}: expected a dotted key such as system.bandwidth_hz before '='")
    texts = split_values(values_text)
    if any(t == "" for t in texts):
        raise ConfigError(f"⟨grid=⟩{text!r}: an empty value; expected KEY=V1,V2,... with no empty item")
    values = []
    for t in texts:
        path, value = parse_override(f"{key}={t}", "grid")
        if value in values:
            raise ConfigError(f"⟨grid=⟩{text!r}: value {t} appears twice")
        values.append(value)
    return GridAxis(".".join(path), tuple(values), tuple(texts))


_QUOTES = re.compile("[\"']")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=,:\[\]-]")


def _name_part(key: str, text: str) -> str:
    """``key=text`` safe as a folder name: quotes dropped, other odd characters as ``_``."""
    return key + "=" + _UNSAFE.sub("_", _QUOTES.sub("", text))


@dataclass(frozen=True)
class SweepRun:
    """One run of the sweep: its folder name, its ``--set`` overrides and its grid values."""

    name: str
    overrides: tuple[str, ...]
    values: tuple[tuple[str, Any], ...]  # (key, value) in grid order, the seed last
    seed: int
    options: tuple[str, ...] = ()  # the option each override came from (set, grid, seeds), for errors


@dataclass(frozen=True)
class SweepSpec:
    """What a sweep runs: the scenario, fixed overrides, the grid axes and the seeds."""

    scenario: Optional[str]
    overrides: tuple[str, ...]
    axes: tuple[GridAxis, ...]
    seeds: tuple[int, ...] = field(default=())

    @property
    def keys(self) -> list[str]:
        return [a.key for a in self.axes]

    def runs(self) -> list[SweepRun]:
        """The cartesian product in grid order, seeds innermost; names are unique and deterministic."""
        has_seed_axis = "seed" in self.keys
        seeds = [None] if has_seed_axis else list(self.seeds)
        out = []
        for combo in itertools.product(*[list(zip(a.values, a.texts)) for a in self.axes], seeds):
            points, seed = combo[:-1], combo[-1]
            parts = [_name_part(a.key, text) for a, (_, text) in zip(self.axes, points)]
            overrides = [f"{a.key}={text}" for a, (_, text) in zip(self.axes, points)]
            values = [(a.key, v) for a, (v, _) in zip(self.axes, points)]
            if not has_seed_axis:
                parts.append(f"seed={seed}")
                overrides.append(f"seed={seed}")
                values.append(("seed", seed))
            else:
                seed = dict(values)["seed"]
            name = ",".join(parts)
            if len(name) > MAX_NAME_CHARS:
                name = name[: MAX_NAME_CHARS - 11] + "~" + hashlib.sha1(name.encode()).hexdigest()[:10]
            options = ("set",) * len(self.overrides) + ("grid",) * len(points) + (() if has_seed_axis else ("seeds",))
            out.append(SweepRun(name, tuple(self.overrides) + tuple(overrides), tuple(values), int(seed), options))
        names = [r.name for r in out]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ConfigError(f"⟨grid⟩: two runs would share the folder name {dup!r}; write the values differently")
        return out

    def to_json(self) -> dict:
        return {
            "scenario": self.scenario,
            "overrides": list(self.overrides),
            "grid": [{"key": a.key, "values": list(a.values), "texts": list(a.texts)} for a in self.axes],
            "seeds": list(self.seeds),
        }


def make_spec(scenario: Optional[Path], grid: Sequence[str], seeds: Optional[int], overrides: Sequence[str]) -> SweepSpec:
    """Parse the command line's grid and seeds (``seeds`` runs: the scenario's seed, +1, …)."""
    axes = [parse_grid(g) for g in grid]
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ConfigError(f"⟨grid=⟩{dup}: the key is given twice; list all its values in one ⟨grid⟩")
    if "seed" in keys and seeds is not None:
        raise ConfigError("⟨seeds⟩ and ⟨grid=⟩seed=... both set the seeds; give one of them")
    if seeds is not None and seeds < 1:
        raise ConfigError(f"⟨seeds=⟩{seeds}: expected an integer >= 1")
    for axis in axes:
        if axis.key == "seed":
            bad = [t for v, t in zip(axis.values, axis.texts) if isinstance(v, bool) or not isinstance(v, int) or v < 0]
            if bad:
                raise ConfigError(f"⟨grid=⟩seed={','.join(axis.texts)}: value {bad[0]} is not a seed; "
                                  "expected integers >= 0, e.g. ⟨grid=⟩seed=0,1,2")
    path = str(Path(scenario).resolve()) if scenario is not None else None
    base = load_scenario(path, list(overrides), learning=False).seed if "seed" not in keys else 0
    return SweepSpec(path, tuple(overrides), tuple(axes), tuple(base + i for i in range(seeds or 1)))


def validate_runs(spec: SweepSpec, out: Path) -> tuple[list[SweepRun], int]:
    """Load every combination's scenario (clear error naming the run); check finished runs match it.

    Returns the runs and the most torch threads any of them trains with (its scenario's ``run.threads``)."""
    from edgesim.results.writing import check_out, is_finished, is_started_run
    from edgesim.scenarios import checkpoint
    from edgesim.scenarios.algorithm_run import resolved_config

    runs = spec.runs()
    most_threads = 1
    for run in runs:
        try:
            sc = load_scenario(spec.scenario, list(run.overrides), options=list(run.options))
        except ConfigError as e:
            raise e.at(f"sweep run {run.name}") from None
        if not sc.physics_only:
            most_threads = max(most_threads, resolve_threads(sc.learning.run.threads))
        if not sc.physics_only:  # names and algorithm options were checked by load_scenario; the data folder here
            from edgesim.learning.data.datasets import DATASETS

            data = sc.learning.data
            if DATASETS[data.dataset].needs_files and (data.data_dir is None or not Path(data.data_dir).is_dir()):
                raise ConfigError(f"sweep run {run.name}: [data] dataset = {data.dataset!r} needs data_dir, the "
                                  f"folder of its files (got {data.data_dir!r}); every run of a sweep is checked "
                                  f"before any starts")
        # A finished run is skipped and an unfinished one resumed: both must be of this very scenario,
        # and anything else in their place is refused, never replaced.
        folder = Path(out) / run.name
        check_out(folder, resume=True)
        for where in ([folder] if is_finished(folder) else []) + [RunFolder(folder).work]:
            if where.is_dir() and any(where.iterdir()) and not is_started_run(where):
                try:
                    checkpoint.check_same_scenario(where / CONFIG, resolved_config(sc),
                                                   "Use another ⟨out⟩ for this sweep")
                except ConfigError as e:
                    raise e.at(f"sweep run {run.name}") from None
    return runs, most_threads


# --------------------------------------------------------------------------- running


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # a full disk or quota: no later run of the sweep could write either


def stop_if_disk_full(result: dict) -> None:
    """A run that found the disk full stops the sweep: ``OSError`` (its errno, message and file) is raised where the
    sweep collects results, which stops every worker (their runs are marked interrupted, resumable) and is said in
    one line by the caller (``edgesim sweep``: ``cannot write FILE: No space left on device; ...``)."""
    if result.get("disk_full"):
        code, message, filename = result["disk_full"]
        raise OSError(code, message, filename)


def run_one(task: dict) -> dict:
    """Run (or resume, or skip if finished) one sweep run; never raises: failures come back as a status.

    ``task``: ``scenario``, ``overrides``, ``out`` (absolute), ``name``, ``threads``, ``cwd`` (the
    sweep's working directory, where relative paths given with ``--set`` are resolved), ``argv`` (the
    sweep's command line, recorded in the run's ``run.json``: a Ray worker's own is Ray's). The run trains
    with its scenario's ``run.threads`` (:func:`edgesim.scenarios.run.run_scenario` sets them), as ``edgesim run`` does.
    """
    t0 = time.monotonic()
    try:
        set_threads(task["threads"])  # before torch is loaded, so that OpenMP starts with this many
        if task.get("cwd") and os.path.isdir(task["cwd"]) and os.getcwd() != task["cwd"]:
            os.chdir(task["cwd"])  # a Ray worker starts elsewhere
        from edgesim.scenarios.run import run_scenario
        from edgesim.scenarios.signals import busy

        with busy():  # a worker's SIGTERM: the run marks its folder interrupted (an interrupt is not caught here)
            sc = load_scenario(task["scenario"], list(task["overrides"]))
            run_scenario(sc, Path(task["out"]), resume=True, argv=task.get("argv"), plots=task.get("plots", True))
        status = "ok"
    except OSError as e:  # a full disk ends the sweep (every other run would hit it too): said once, by the sweep
        status = as_written(f"failed: {type(e).__name__}: {e}")
        if e.errno in DISK_FULL:
            return {"name": task["name"], "status": status, "seconds": time.monotonic() - t0,
                    "disk_full": (e.errno, e.strerror or str(e), e.filename or task["out"])}
    except Exception as e:  # noqa: BLE001 - one run's failure must not end the sweep
        status = as_written(f"failed: {type(e).__name__}: {e}")
    return {"name": task["name"], "status": status, "seconds": time.monotonic() - t0}


def _worker_init(threads: int, setup=None) -> None:
    """A spawned sweep worker: its signals (:func:`edgesim.scenarios.signals.worker_signals`), its threads, glibc
    keeping freed memory as the ``edgesim`` process does, and what it inherits
    (:class:`edgesim.scenarios.worker_setup.WorkerSetup`: the figure style, a GPU of its own)."""
    from edgesim.learning.malloc import keep_freed_memory
    from edgesim.scenarios.signals import worker_signals

    worker_signals()
    keep_freed_memory()
    set_threads(threads)
    if setup is not None:
        setup.apply()


def run_in_processes(tasks: list[dict], jobs: int, threads: int, on_done: Callable[[dict], None]) -> None:
    """A spawn-context process pool of ``jobs`` workers (``jobs == 1``: in this process). An interrupt or error here
    stops every worker at once (:func:`edgesim.scenarios.signals.stop_pool`): their runs are marked interrupted and
    resume from their checkpoints."""
    if jobs == 1:
        with threads_for(threads):
            for task in tasks:
                on_done(run_one(task))
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from edgesim.scenarios.signals import stop_pool
    from edgesim.scenarios.worker_setup import worker_setup

    ctx = mp.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init,
                               initargs=(threads, worker_setup(ctx)))
    try:
        futures = {pool.submit(run_one, t): t for t in tasks}
        for fut in as_completed(futures):
            try:
                result = fut.result()
            except Exception as e:  # a worker died (killed, out of memory)
                result = {"name": futures[fut]["name"], "status": f"failed: {type(e).__name__}: {e}", "seconds": 0.0}
            on_done(result)  # may stop the sweep (a full disk): never taken for a worker's death
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)


def run_ray(
    tasks: list[dict], jobs: Optional[int], threads: int, address: Optional[str], on_done: Callable[[dict], None]
) -> int:
    """Runs as Ray tasks (``num_cpus = threads``; a GPU share where the cluster has GPUs); returns the jobs used.

    No ``address``: a Ray on this machine with ``jobs × threads`` CPUs, stopped at the end.
    With one: join that cluster (``ray start --head`` prints it) and leave it running.
    """
    import logging

    ray = import_ray()
    if address:
        join_cluster(ray, address)
    else:
        jobs = jobs or max(1, usable_cores() // threads)
        ray.init(address="local", num_cpus=jobs * threads, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
    try:
        resources = ray.cluster_resources()
        cpus = int(resources.get("CPU", 1))
        jobs = jobs or max(1, cpus // threads)
        gpus = float(resources.get("GPU", 0))
        options: dict[str, Any] = {"num_cpus": threads, "max_retries": 0}
        if gpus > 0:
            options["num_gpus"] = math.floor(min(1.0, gpus / jobs) * 1e4) / 1e4
        remote = ray.remote(run_one).options(**options)
        pending, waiting = {}, list(tasks)
        while waiting or pending:
            while waiting and len(pending) < jobs:
                task = waiting.pop(0)
                pending[remote.remote(task)] = task
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as e:  # the worker died
                    result = {"name": task["name"], "status": f"failed: {type(e).__name__}: {e}", "seconds": 0.0}
                on_done(result)
    finally:
        ray.shutdown()
    return jobs


# --------------------------------------------------------------------------- results


def _fmt_value(v) -> Any:
    return json.dumps(v) if isinstance(v, (list, dict)) else v


def sweep_rows(spec: SweepSpec, runs: list[SweepRun], out: Path, status: dict[str, str]) -> tuple[list, list]:
    """(header, rows) of ``sweep.csv`` from the runs' ``summary.json``."""
    summaries = {}
    for run in runs:
        p = Path(out) / run.name / SUMMARY
        summaries[run.name] = json.loads(p.read_text()) if p.exists() and status.get(run.name) == "ok" else None
    algorithms, thresholds = [], []
    for s in summaries.values():
        for alg, a in (s or {}).get("algorithms", {}).items():
            if alg not in algorithms:
                algorithms.append(alg)
            for t in a["time_to_accuracy_s"]:
                if t not in thresholds:
                    thresholds.append(t)
    thresholds.sort(key=float)
    per_alg = ["final_accuracy", "last_accuracy", *[f"time_to_{t}_s" for t in thresholds], "bits_up", "bits_down",
               "energy_j", "simulated_time_s", "rounds"]
    keys = [k for k, _ in runs[0].values] if runs else []
    header = ["run", *keys, "status", *[f"{alg}_{m}" for alg in algorithms for m in per_alg]]
    rows = []
    for run in runs:
        s = summaries[run.name]
        row = [run.name, *[_fmt_value(v) for _, v in run.values], status.get(run.name, "not run")]
        for alg in algorithms:
            a = (s or {}).get("algorithms", {}).get(alg)
            if a is None:
                row += [None] * len(per_alg)
                continue
            tta = a["time_to_accuracy_s"]
            row += [a["final_accuracy"], a["last_accuracy"], *[tta.get(t) for t in thresholds], a["total_bits_up"],
                    a["total_bits_down"], a["total_energy_j"], a["simulated_time_s"], a["rounds"]]
        rows.append(row)
    return header, rows


@dataclass
class SweepResult:
    out: Path
    runs: list[SweepRun]
    status: dict[str, str]
    jobs: int
    threads: int = 1

    @property
    def failed(self) -> dict[str, str]:
        return {k: v for k, v in self.status.items() if v != "ok"}


def check_sweep_out(out: Path) -> None:
    """Refuse a sweep ``--out`` that is a file, ``''``/``.``/``..``, or a non-empty folder that is not a sweep's."""
    from edgesim.results.writing import check_out_path

    text = str(out)
    out = check_out_path(out)
    if out.name in ("", ".", "..") or out.resolve() in (Path.cwd(), *Path.cwd().parents):
        raise ConfigError(f"⟨out=⟩{text!r}: expected the path of a sweep folder, such as sweeps/mine")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"⟨out=⟩{text!r}: exists and is not a folder; expected a sweep folder")
    if out.is_dir() and any(out.iterdir()) and not (out / SWEEP_JSON).is_file():
        raise ConfigError(f"⟨out=⟩{text!r}: a folder that is not an edgesim sweep folder (no {SWEEP_JSON}); "
                          f"choose another ⟨out⟩; edgesim never writes into a folder it did not make")


def sweep_files(formats: Sequence[str]) -> list[str]:
    """What a sweep writes into its own folder: ``sweep.json``, ``sweep.csv``, its figures and each figure's data."""
    from edgesim.plots.sweep import SWEEP_FIGURES

    return [SWEEP_JSON, SWEEP_CSV, *[f"{stem}.{fmt}" for stem in SWEEP_FIGURES for fmt in (*formats, "csv")]]


def adopt_sweep_files(out: Path, formats: Sequence[str]) -> None:
    """List the sweep's own files in ``out/manifest.json`` before they are written, so that ``edgesim plot`` may
    redraw them and nothing else is taken for edgesim's. A sweep folder from before manifests (its ``sweep.json``
    made it edgesim's) gets its existing figures listed as well."""
    from edgesim.results.files import MANIFEST
    from edgesim.results.writing import add_to_manifest, claim_files, read_manifest

    if read_manifest(out) is None and (out / SWEEP_JSON).is_file() and not (out / MANIFEST).exists():
        add_to_manifest(out, *sweep_files(("png", "pdf", "svg")))
    claim_files(out, sweep_files(formats))


def check_same_grid(spec: SweepSpec, out: Path) -> None:
    """A sweep folder goes on only with its own grid and seeds: another would rewrite ``sweep.csv`` and orphan
    the runs it lists (one line naming both)."""
    path = out / SWEEP_JSON
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        old_grid = {"grid": old["grid"], "seeds": old["seeds"]}
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError):
        raise ConfigError(f"⟨out=⟩{out}: {path} is unreadable; expected the {SWEEP_JSON} edgesim wrote "
                          f"(choose another ⟨out⟩)") from None
    new = spec.to_json()
    if old_grid != {"grid": new["grid"], "seeds": new["seeds"]}:
        def describe(d: dict) -> str:
            axes = " ".join(f"⟨grid=⟩{a.get('key')}={','.join(map(str, a.get('texts', a.get('values', []))))}"
                            for a in d["grid"] if isinstance(a, dict))
            return f"{axes or 'no ⟨grid⟩'} with seeds {d['seeds']}"

        raise ConfigError(f"⟨out=⟩{out}: holds a sweep of another grid ({describe(old_grid)}; this one: "
                          f"{describe(new)}); choose another ⟨out⟩, or give the same ⟨grid⟩ and ⟨seeds⟩ to go on "
                          f"with it")


def run_sweep(
    spec: SweepSpec,
    out: Path,
    *,
    jobs: Optional[int] = None,
    executor: str = "local",
    ray_address: Optional[str] = None,
    threads: Optional[int] = None,
    progress: bool = True,
    plots: Optional[bool] = None,
    stream=None,
    formats: tuple[str, ...] = ("png",),
) -> SweepResult:
    """Validate every run, run those not finished, write ``sweep.csv`` (and the sweep's figures). ``plots``: whether
    the sweep and its runs draw figures (:func:`edgesim.scenarios.run.plots_wanted`: ``None``, the environment's
    ``EDGESIM_PLOTS``)."""
    from edgesim.scenarios.run import plots_wanted

    plots = plots_wanted(plots)
    if executor not in EXECUTORS:
        raise ConfigError(f"⟨executor=⟩{executor!r}: expected one of {', '.join(EXECUTORS)}")
    if ray_address and executor != "ray":
        raise ConfigError("⟨ray-address⟩ needs ⟨executor=⟩ray")
    if jobs is not None and jobs < 1:
        raise ConfigError(f"⟨jobs=⟩{jobs}: expected an integer >= 1")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"⟨threads=⟩{threads}: expected an integer >= 1")
    if executor == "ray":
        import_ray()
    check_sweep_out(Path(out))
    check_same_grid(spec, Path(out))
    out = Path(out).resolve()
    runs, most_threads = validate_runs(spec, out)
    threads = threads or most_threads
    from edgesim.results.writing import is_finished

    out.mkdir(parents=True, exist_ok=True)
    adopt_sweep_files(out, formats)
    atomic_write_bytes(out / SWEEP_JSON, (json.dumps({**spec.to_json(), "runs": [r.name for r in runs]}, indent=2) + "\n").encode())
    bar = SweepProgress(len(runs), enabled=progress, stream=stream)
    status: dict[str, str] = {}
    tasks = []
    for run in runs:
        if is_finished(out / run.name):
            status[run.name] = "ok"
            bar.update({"name": run.name, "status": "ok", "seconds": 0.0}, skipped=True)
        else:
            tasks.append({"scenario": spec.scenario, "overrides": list(run.overrides), "out": str(out / run.name),
                          "name": run.name, "threads": threads, "cwd": os.getcwd(), "argv": list(sys.argv),
                          "plots": plots})

    def on_done(result: dict) -> None:
        status[result["name"]] = result["status"]
        bar.update(result)
        stop_if_disk_full(result)

    try:
        if executor == "ray":
            jobs = run_ray(tasks, jobs, threads, ray_address, on_done) if tasks else (jobs or 1)
        else:
            jobs = jobs or max(1, usable_cores() // threads)
            if tasks:
                run_in_processes(tasks, min(jobs, len(tasks)), threads, on_done)
    finally:
        bar.close()
    header, rows = sweep_rows(spec, runs, out, status)
    atomic_write_bytes(out / SWEEP_CSV, csv_text(header, rows).encode())
    if plots and any(s == "ok" for s in status.values()):
        from edgesim.plots.sweep import plot_sweep

        plot_sweep(out, formats=formats)
    return SweepResult(out, runs, status, jobs, threads)


def default_out(spec: SweepSpec) -> Path:
    path = Path(spec.scenario) if spec.scenario else DEFAULT_SCENARIO
    return Path("sweeps") / load_scenario(path, list(spec.overrides), learning=False).name
