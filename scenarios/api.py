"""edgesim's Python API: ``import edgesim`` and call ``load_scenario``, ``run``, ``sweep``, ``load_runs``.

The same machinery as the command line (docs/python_api.md), with Python
values instead of command-line strings and exceptions instead of command-line
advice. It lives in the application layer; ``edgesim/__init__.py`` hands its
names on lazily. The torch backend (``edgesim.learning``), ``edgesim.plots``
and pandas are imported inside the functions that need them, so
``import edgesim`` and ``edgesim.load_scenario`` stay light and never import torch.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from edgesim.config import ConfigError

ScenarioSource = Any  # a path (str or Path), a scenario as a dict, a loaded Scenario, or None (the bundled default)


class RunFolderError(ConfigError):
    """An ``out`` folder a run may not use (a finished or unfinished run without ``overwrite``/``resume``,
    a folder edgesim did not write, a file), or a folder that is not a run or sweep folder."""


class SweepError(RuntimeError):
    """Some runs of a sweep failed; ``failed`` maps each to its status, ``frame`` holds the finished runs."""

    def __init__(self, message: str, failed: dict, frame):
        super().__init__(message)
        self.failed, self.frame = failed, frame


# --------------------------------------------------------------------------- errors without command-line advice

_CLI_WORDS = (
    (re.compile(r"add --overwrite"), "pass overwrite=True"),
    (re.compile(r"add --resume"), "pass resume=True"),
    (re.compile(r"--resume and --overwrite"), "resume=True and overwrite=True"),
    (re.compile(r"--overwrite"), "overwrite=True"),
    (re.compile(r"--resume"), "resume=True"),
    (re.compile(r"--out (\S+?):"), r"out=\1:"),
    (re.compile(r"--out\b"), "out"),
    (re.compile(r"--set (\S+)"), r"override \1"),
    (re.compile(r"--data-dir"), "data={'data_dir': ...}"),
    (re.compile(r"--seed"), "seed="),
)


def _for_python(message: str) -> str:
    """A message written for the command line, reworded for a Python caller (``--overwrite`` → ``overwrite=True``)."""
    for pattern, words in _CLI_WORDS:
        message = pattern.sub(words, message)
    return message


def _reraise(e: ConfigError, cls: type = ConfigError):
    raise cls(_for_python(str(e))) from None


# --------------------------------------------------------------------------- scenarios


def _merge(base: dict, key: str, value: Any) -> None:
    """Set ``key`` (a top-level key, a table given as a dict — merged key by key — or a dotted ``a.b.c``)."""
    path = key.split(".")
    node = base
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"load_scenario({key}=...): {part!r} is a value, not a table")
    last = path[-1]
    if isinstance(value, Mapping) and isinstance(node.get(last), dict):
        for k, v in value.items():
            _merge(node[last], str(k), v)
    else:
        node[last] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)


def load_scenario(source: ScenarioSource = None, /, **overrides):
    """A validated scenario (``edgesim.scenarios.schema.Scenario``) from a TOML file, a dict, or the bundled default.

    ``overrides`` are keys of the scenario: top-level ones (``seed=3``,
    ``name="mine"``), whole or partial tables as dicts, merged key by key
    (``run={"rounds": 2, "algorithms": ["fedavg", "fedadam"]}``), or dotted
    keys (``**{"system.bandwidth_hz": 2e6}``). A relative ``data.data_dir`` in
    a file is relative to the file; a data set that needs files and names no
    folder takes ``$EDGESIM_DATA``. Bad input raises :class:`ConfigError`
    naming the key, the value and what was expected.
    """
    from edgesim.scenarios.schema import DEFAULT_SCENARIO, Scenario, data_dir_from_env, read_toml, resolve_paths, validate

    if isinstance(source, Scenario):
        if not overrides:
            return source
        raw, where = copy.deepcopy(dict(source.raw)), source.path
    elif isinstance(source, Mapping):
        raw, where = copy.deepcopy(dict(source)), "<scenario dict>"
    elif source is None or isinstance(source, (str, Path)):
        path = Path(source) if source is not None else DEFAULT_SCENARIO
        raw, where = resolve_paths(read_toml(path), path), str(path)
    else:
        raise TypeError(f"load_scenario: source must be a path, a dict or a Scenario, not {type(source).__name__}")
    for key, value in overrides.items():
        _merge(raw, key, value)
    try:
        return validate(data_dir_from_env(raw), where)
    except ConfigError as e:
        _reraise(e)


# --------------------------------------------------------------------------- runs


def scenario_fingerprint(config: Mapping) -> str:
    """SHA-256 (hex) of a resolved scenario (a run's ``config.toml``) without its seed: the runs of one scenario
    that differ only in their seed share it (group them to average over seeds). The same fingerprint as
    ``edgesim plot`` and ``edgesim report`` group by (:func:`edgesim.plots.runs.scenario_fingerprint`)."""
    from edgesim.plots.runs import scenario_fingerprint as fingerprint

    return fingerprint(config)


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise RunFolderError(f"{path}: unreadable ({e}); expected the config.toml edgesim wrote") from None


class Run:
    """A finished run folder: its scenario, summary and provenance as dicts, its tables as pandas DataFrames."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not (self.path / "rounds.csv").is_file() or not (self.path / "config.toml").is_file():
            raise RunFolderError(f"{self.path}: not a finished run folder (no rounds.csv or config.toml)")

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @property
    def config(self) -> dict:
        """The resolved scenario (``config.toml``): ``edgesim.run(edgesim.load_scenario(run.path / "config.toml"))``
        reproduces the run."""
        return _read_toml(self.path / "config.toml")

    @property
    def summary(self) -> dict:
        """``summary.json``: per algorithm the final accuracy, times to accuracy, totals."""
        return json.loads((self.path / "summary.json").read_text())

    @property
    def provenance(self) -> dict:
        """``run.json``: command, host, CPU/GPU, versions, git commit, start and end ({} for older runs)."""
        p = self.path / "run.json"
        return json.loads(p.read_text()) if p.is_file() else {}

    @property
    def fingerprint(self) -> str:
        return scenario_fingerprint(self.config)

    @property
    def rounds(self):
        """``rounds.csv`` in long form with the run's columns (see :func:`load_runs`)."""
        return load_runs([self.path])

    @property
    def devices(self):
        """``devices.csv`` (one row per algorithm × round × device) with the run's columns."""
        return load_runs([self.path], table="devices")

    def final(self):
        """One row per algorithm from ``summary.json``: final/last/best accuracy, rounds, simulated time, totals."""
        import pandas as pd

        rows = []
        for name, a in self.summary["algorithms"].items():
            rows.append({"algorithm": name, **{k: v for k, v in a.items() if not isinstance(v, dict)},
                         **{f"time_to_{t}_s": s for t, s in a.get("time_to_accuracy_s", {}).items()}})
        return pd.DataFrame(rows)


def run(
    scenario: ScenarioSource = None,
    out: Optional[str | Path] = None,
    *,
    overwrite: bool = False,
    resume: bool = False,
    formats: Sequence[str] = ("png",),
    on_round: Optional[Callable] = None,
    jobs: int = 1,
    **overrides,
) -> Run:
    """Run every algorithm of ``scenario`` into the run folder ``out`` (default ``runs/<name>``); a :class:`Run`.

    ``scenario`` is anything :func:`load_scenario` takes (``overrides`` go
    with it). ``out`` follows the command line's rules: a finished run is
    replaced only with ``overwrite=True``, an unfinished one resumed with
    ``resume=True``, and a folder edgesim did not write is never touched
    (:class:`RunFolderError`). ``formats``: the figures' file types (``png``,
    ``pdf``, ``svg``). ``on_round(algorithm, record)`` is called after each
    round. ``jobs`` > 1 trains the algorithms in that many processes (the run
    folder is the same); like :func:`sweep`, call it then from a notebook or
    from a script under ``if __name__ == "__main__":``. An algorithm whose
    training diverges stops alone: the others' results are written, and
    ``summary.json`` marks it.
    """
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.runfolder import check_out
    from edgesim.scenarios.schema import Scenario

    from edgesim.plots.curves import parse_formats

    sc = scenario if isinstance(scenario, Scenario) and not overrides else load_scenario(scenario, **overrides)
    out = Path(out) if out is not None else Path("runs") / sc.name
    try:
        formats = parse_formats(list(formats))
        check_out(out, overwrite=overwrite, resume=resume)
    except ConfigError as e:
        _reraise(e, RunFolderError)
    try:
        return Run(run_scenario(sc, out, on_round, resume=resume, overwrite=overwrite, formats=formats, jobs=jobs,
                                say=lambda line: warnings.warn(line, stacklevel=3) if "warning" in line else None))
    except ConfigError as e:
        _reraise(e)


def _toml_text(value: Any) -> str:
    """A Python value as the TOML text of ``--set KEY=<text>``."""
    import tomli_w

    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def _dotted(prefix: str, value: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _dotted(f"{prefix}.{k}" if prefix else str(k), v)
    else:
        yield prefix, value


def sweep(
    scenario: Optional[str | Path] = None,
    grid: Optional[Mapping[str, Sequence]] = None,
    *,
    seeds: int = 1,
    out: Optional[str | Path] = None,
    jobs: Optional[int] = None,
    threads: Optional[int] = None,
    executor: str = "local",
    plots: bool = True,
    formats: Sequence[str] = ("png",),
    **overrides,
):
    """Run the scenario file ``scenario`` (default: the bundled one) over ``grid`` × ``seeds``; the sweep's runs
    as one long DataFrame (:func:`load_runs`; ``df.attrs["path"]`` is the sweep folder).

    ``grid``: ``{"system.bandwidth_hz": [5e5, 1e6], ...}`` (the cartesian
    product); ``seeds``: the scenario's seed, +1, …; ``overrides`` as for
    :func:`load_scenario`, for every run. ``out`` defaults to
    ``sweeps/<name>``; started again with the same arguments, a sweep skips
    its finished runs. ``threads``: torch threads per run (``run.threads`` for
    every run; default the scenario's, 1). The workers read the scenario from its file, so
    ``scenario`` is a path. Failed runs raise :class:`SweepError` (with the
    finished runs' frame). The workers are new processes: call ``sweep``
    from a notebook, or from a script under ``if __name__ == "__main__":``.
    """
    from edgesim.scenarios.sweep import default_out, make_spec, run_sweep

    from edgesim.plots.curves import parse_formats

    if scenario is not None and not isinstance(scenario, (str, Path)):
        raise TypeError("sweep: scenario must be the path of a scenario file (the runs load it in their own "
                        f"processes), not {type(scenario).__name__}")
    sets = [f"{k}={_toml_text(v)}" for key, value in overrides.items() for k, v in _dotted(key, value)]
    if threads is not None:
        sets.append(f"run.threads={_toml_text(threads)}")
    axes = [f"{k}={','.join(_toml_text(v) for v in values)}" for k, values in (grid or {}).items()]
    try:
        spec = make_spec(Path(scenario) if scenario is not None else None, axes, seeds, sets)
        out = Path(out) if out is not None else default_out(spec)
        result = run_sweep(spec, out, jobs=jobs, executor=executor, progress=False, plots=plots,
                           formats=parse_formats(list(formats)))
    except ConfigError as e:
        _reraise(e)
    frame = load_runs([result.out])
    frame.attrs["path"] = str(result.out)
    if result.failed:
        lines = "; ".join(f"{name}: {status}" for name, status in list(result.failed.items())[:3])
        raise SweepError(f"{len(result.failed)} of {len(result.runs)} runs of the sweep in {result.out} failed "
                         f"({lines}); the finished ones are in this error's .frame", dict(result.failed), frame)
    return frame


# --------------------------------------------------------------------------- reading results


def _run_folders(paths: Iterable[str | Path]) -> list[tuple[Path, Optional[Path], list[str]]]:
    """(run folder, its sweep folder or None, the sweep's grid keys) for each path, sweeps expanded."""
    from edgesim.scenarios.runfolder import is_finished

    found = []
    for p in [paths] if isinstance(paths, (str, Path)) else paths:
        p = Path(p)
        if (p / "sweep.json").is_file():
            spec = json.loads((p / "sweep.json").read_text())
            keys = [a["key"] for a in spec.get("grid", []) if a["key"] != "seed"]
            found += [(p / name, p, keys) for name in spec.get("runs", []) if is_finished(p / name)]
        elif (p / "rounds.csv").is_file():
            found.append((p, None, []))
        elif p.is_dir() and any((c / "rounds.csv").is_file() or (c / "sweep.json").is_file() for c in p.iterdir()):
            found += _run_folders(sorted(c for c in p.iterdir() if (c / "rounds.csv").is_file()
                                         or (c / "sweep.json").is_file()))
        else:
            raise RunFolderError(f"{p}: neither a run folder (rounds.csv) nor a sweep folder (sweep.json), nor a "
                                 f"folder holding them")
    return found


def _dig(config: Mapping, key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return json.dumps(node) if isinstance(node, (list, dict)) else node


def load_runs(paths, table: str = "rounds"):
    """Run folders and sweep folders as one tidy pandas DataFrame, one row per run × algorithm × round.

    ``paths``: run folders, sweep folders (their finished runs), or folders
    holding either (``runs/``). Columns: ``run`` (the folder), ``sweep`` (its
    sweep folder, or empty), ``scenario`` (name), ``fingerprint``
    (:func:`scenario_fingerprint`: equal for runs that differ only in the
    seed), one column per grid key of the sweeps (``system.bandwidth_hz``,
    its value in each run's ``config.toml``), ``seed``, ``algorithm``,
    ``display`` (the figures' name), then every column of the run's
    ``rounds.csv`` (``round``, ``time_s``, ``accuracy``, bits, energy, …).
    ``table="devices"`` or ``"events"`` reads those files instead.
    """
    import pandas as pd

    if table not in ("rounds", "devices", "events"):
        raise ValueError(f"table(={table!r}) must be 'rounds', 'devices' or 'events'")
    folders = _run_folders(paths)
    grid_keys = list(dict.fromkeys(k for _, _, keys in folders for k in keys))
    frames = []
    for folder, sweep_dir, _ in folders:
        config = _read_toml(folder / "config.toml")
        try:
            summary = json.loads((folder / "summary.json").read_text())
        except (OSError, ValueError):
            summary = {}
        display = {a: s.get("display", a) for a, s in summary.get("algorithms", {}).items()}
        df = pd.read_csv(folder / f"{table}.csv")
        meta = {"run": str(folder), "sweep": str(sweep_dir) if sweep_dir else "", "scenario": config.get("name"),
                "fingerprint": scenario_fingerprint(config), **{k: _dig(config, k) for k in grid_keys},
                "seed": config.get("seed")}
        head = pd.DataFrame({k: [v] * len(df) for k, v in meta.items()}, index=df.index)
        head["algorithm"] = df["algorithm"]
        head["display"] = df["algorithm"].map(lambda a: display.get(a, a))
        frames.append(pd.concat([head, df.drop(columns=["algorithm"])], axis=1))
    if not frames:
        return pd.DataFrame(columns=["run", "sweep", "scenario", "fingerprint", *grid_keys, "seed", "algorithm",
                                     "display"])
    return pd.concat(frames, ignore_index=True)
