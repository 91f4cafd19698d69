"""Reading run folders and sweep folders: one :class:`Run`, one folder expander, one ``rounds.csv`` reader.

- :func:`read_rounds`: ``rounds.csv`` → ``{algorithm: {column: array}}``, every
  value checked (one line naming the file, line, column and value);
- :class:`Run`: a finished run folder (its scenario, summary, provenance,
  display names, fingerprint and seed; its rounds as arrays and its tables as
  tidy pandas frames);
- :func:`expand`: run folders, sweep folders (their finished runs) and folders
  holding either → the run folders, with each one's sweep and grid keys;
- :func:`load_runs`: the tidy frame, one row per run × algorithm × round.

A folder that is not what edgesim wrote raises :class:`RunFolderError`, one
line naming the file. Torch-free and matplotlib-free (pandas only for frames,
imported when a frame is asked for).
"""

from __future__ import annotations

import csv
import io
import json
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable, Optional

import numpy as np

from edgesim.config import ConfigError
from edgesim.results.files import CONFIG, MARKER, PROVENANCE, ROUNDS, SUMMARY, SWEEP_SPEC, SWEEP_TABLE, TABLES
from edgesim.results.fingerprint import dig, scenario_fingerprint
from edgesim.results.metrics import crossing, sustain_rounds
from edgesim.results.writing import is_finished


class RunFolderError(ConfigError):
    """A folder that is not a readable run or sweep folder (or not one edgesim may use), or runs that may not
    be combined; the message is one line naming the file."""


def read_config(folder: Path) -> dict:
    """A run's resolved scenario (``config.toml``); :class:`RunFolderError` naming the file when unreadable."""
    path = Path(folder) / CONFIG
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFolderError(f"{path}: missing; expected a run folder written by edgesim run") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise RunFolderError(f"{path}: unreadable ({e}); expected the {CONFIG} edgesim wrote") from None


def folder_kind(path: Path) -> Optional[str]:
    """``"sweep"`` (``sweep.json`` and ``sweep.csv``), ``"run"`` (``rounds.csv``) or ``None`` for anything else."""
    path = Path(path)
    if (path / SWEEP_SPEC).exists() and (path / SWEEP_TABLE).exists():
        return "sweep"
    return "run" if (path / ROUNDS).exists() else None


def read_summary(folder: Path) -> dict:
    """A run's ``summary.json`` ({} when it is missing or unreadable: a run cut short)."""
    try:
        summary = json.loads((Path(folder) / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def display_names(run_dirs: Iterable[Path]) -> dict[str, str]:
    """{algorithm: display name} as the runs wrote them in ``summary.json`` (``algorithms.NAME.display``).

    The run takes them from the algorithm registry, so figures need no torch.
    A folder without ``summary.json`` or without ``display`` entries (older
    runs) adds nothing: its algorithms are shown by their registered names.
    """
    names: dict[str, str] = {}
    for run_dir in run_dirs:
        try:
            summary = json.loads((Path(run_dir) / SUMMARY).read_text())
        except (OSError, ValueError):
            continue
        algorithms = summary.get("algorithms") if isinstance(summary, dict) else None
        for alg, info in (algorithms if isinstance(algorithms, dict) else {}).items():
            if isinstance(info, dict) and isinstance(info.get("display"), str) and info["display"]:
                names.setdefault(alg, info["display"])
    return names


# Columns every rounds.csv has (written by edgesim.scenarios.run), numeric in every row; accuracy may be empty.
REQUIRED_ROUND_COLUMNS = ("algorithm", "round", "time_s", "accuracy")
NUMERIC_ROUND_COLUMNS = ("round", "time_s", "cum_bits_up", "cum_energy_j")


def read_csv_rows(path: Path) -> tuple[list[str], list[dict]]:
    """(header, rows) of a CSV file; :class:`RunFolderError` when it is not UTF-8, not CSV or ragged."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            body = list(reader)
    except UnicodeDecodeError as e:
        raise RunFolderError(f"{path}: not a UTF-8 text file (byte {e.start}); "
                             f"expected the CSV edgesim wrote") from None
    except csv.Error as e:
        raise RunFolderError(f"{path}: not a valid CSV file ({e}); expected the CSV edgesim wrote") from None
    if not header:
        raise RunFolderError(f"{path}: empty; expected a header and one row per round")
    rows = []
    for i, fields in enumerate(body, start=2):
        if not fields:
            continue
        if len(fields) != len(header):
            raise RunFolderError(f"{path}: line {i} has {len(fields)} fields, the header {len(header)}; "
                                f"expected the CSV edgesim wrote")
        rows.append(dict(zip(header, fields)))
    return header, rows


def number_field(path: Path, line: int, column: str, text: str, *, empty_ok: bool) -> float:
    if text == "" and empty_ok:
        return np.nan
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or (value != value and not empty_ok) or abs(value) == float("inf"):
        raise RunFolderError(f"{path}: line {line}, column {column} = {text!r}; expected a finite number")
    return value


def check_round_value(path: Path, line: int, column: str, text: str, value: float) -> None:
    """What edgesim writes: ``round`` a whole number >= 0; times, bits and energy >= 0; ``accuracy`` in
    [0, 1] or empty (a literal ``nan`` is not what edgesim writes either)."""
    if column == "accuracy":
        ok = text == "" or 0 <= value <= 1
        expected = "an accuracy in [0, 1] (or empty)"
    elif column == "round":
        ok = value >= 0 and value == int(value)
        expected = "a round number (an integer >= 0)"
    else:
        ok = value >= 0
        expected = "a number >= 0"
    if not ok:
        raise RunFolderError(f"{path}: line {line}, column {column} = {text!r}; expected {expected}")


def read_rounds(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    """``rounds.csv`` of a run → {algorithm: {column: array}} (text columns as NaN): the one reader.

    :class:`RunFolderError` (one line: file, line, column, value) for a file
    that is missing, header-only, lacks a column edgesim writes, or holds a
    non-numeric value where a number belongs.
    """
    path = Path(run_dir) / ROUNDS
    if not path.is_file():
        raise RunFolderError(f"{path}: no {ROUNDS} — is {run_dir} a finished run folder?")
    header, rows = read_csv_rows(path)
    missing = [c for c in REQUIRED_ROUND_COLUMNS if c not in header]
    if missing:
        raise RunFolderError(f"{path}: no column {missing[0]!r}; expected the {ROUNDS} edgesim wrote "
                            f"(columns {', '.join(REQUIRED_ROUND_COLUMNS)}, ...)")
    if not rows:
        raise RunFolderError(f"{path}: a header and no rounds; expected one row per algorithm and round")
    cols: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for line, row in enumerate(rows, start=2):
        alg = row["algorithm"]
        if not alg:
            raise RunFolderError(f"{path}: line {line}, column algorithm is empty; expected an algorithm name")
        for k, v in row.items():
            if k == "algorithm":
                continue
            if k in NUMERIC_ROUND_COLUMNS or k == "accuracy":
                value = number_field(path, line, k, v, empty_ok=k == "accuracy")
                check_round_value(path, line, k, v, value)
                cols[alg][k].append(value)
                continue
            try:
                cols[alg][k].append(float(v) if v != "" else np.nan)
            except ValueError:  # a text column
                cols[alg][k].append(np.nan)
    if all(np.isnan(v).all() for c in cols.values() for v in [np.asarray(c["accuracy"], dtype=float)]):
        raise RunFolderError(f"{path}: the accuracy column has no value; expected an accuracy in some round")
    return {alg: {k: np.asarray(v, dtype=float) for k, v in c.items()} for alg, c in cols.items()}


# --------------------------------------------------------------------------- one run


class Run:
    """A finished run folder: its scenario, summary and provenance as dicts, its rounds as arrays
    (:attr:`series`) and its tables as pandas DataFrames (:attr:`rounds`, :attr:`devices`, :meth:`final`).

    ``Run(path)`` checks only that the folder holds ``rounds.csv`` and ``config.toml``;
    :func:`load_run` reads and checks both at once.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not (self.path / ROUNDS).is_file() or not (self.path / CONFIG).is_file():
            raise RunFolderError(f"{self.path}: not a finished run folder (no {ROUNDS} or {CONFIG})")

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @cached_property
    def config(self) -> dict:
        """The resolved scenario (``config.toml``): ``edgesim.run(edgesim.load_scenario(run.path / "config.toml"))``
        reproduces the run."""
        return read_config(self.path)

    @property
    def summary(self) -> dict:
        """``summary.json``: per algorithm the final accuracy, times to accuracy, totals."""
        return json.loads((self.path / SUMMARY).read_text())

    @property
    def provenance(self) -> dict:
        """``run.json``: command, host, CPU/GPU, versions, git commit, start and end ({} for older runs)."""
        p = self.path / PROVENANCE
        return json.loads(p.read_text()) if p.is_file() else {}

    @property
    def fingerprint(self) -> str:
        return scenario_fingerprint(self.config)

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))

    @cached_property
    def display(self) -> dict[str, str]:
        """{algorithm: display name} from ``summary.json``."""
        return display_names([self.path])

    @cached_property
    def series(self) -> dict[str, dict[str, np.ndarray]]:
        """``rounds.csv`` as ``{algorithm: {column: array}}`` (:func:`read_rounds`)."""
        return read_rounds(self.path)

    @property
    def algorithms(self) -> list[str]:
        return list(self.series)

    @property
    def rounds(self):
        """``rounds.csv`` in long form with the run's columns (see :func:`load_runs`)."""
        return load_runs([self.path])

    @property
    def devices(self):
        """``devices.csv`` (one row per algorithm × round × device) with the run's columns."""
        return load_runs([self.path], table="devices")

    def final(self):
        """One row per algorithm from ``summary.json``: final/last/best accuracy, rounds, simulated time, totals;
        NaN where summary.json has ``null`` (a threshold never reached, no round within the budget)."""
        import pandas as pd

        nan = float("nan")
        rows = []
        for name, a in self.summary["algorithms"].items():
            flat = {k: nan if v is None else v for k, v in a.items() if not isinstance(v, dict)}
            times = {f"time_to_{t}_s": nan if s is None else s for t, s in a.get("time_to_accuracy_s", {}).items()}
            rows.append({"algorithm": name, **flat, **times})
        return pd.DataFrame(rows)


def load_run(folder: Path) -> Run:
    """A finished run folder, its ``config.toml`` and ``rounds.csv`` read and checked (:class:`RunFolderError`,
    one line naming the file, when either cannot be read)."""
    config = read_config(folder)  # first: a folder without config.toml is named by it
    series = read_rounds(folder)
    run = Run(folder)
    run.config, run.series = config, series  # the cached properties, read once
    return run


# --------------------------------------------------------------------------- run folders of many paths


@dataclass(frozen=True)
class Found:
    """A run folder found by :func:`expand`: its ``sweep`` folder (``None`` when alone) and the sweep's grid keys."""

    folder: Path
    sweep: Optional[Path] = None
    grid_keys: tuple[str, ...] = ()


def expand(paths: Iterable[str | Path] | str | Path, *, holders: bool = True) -> list[Found]:
    """The run folders of ``paths``, in order: a run folder (``rounds.csv``) stands for itself, a sweep
    folder (``sweep.json``) for its finished runs in its order, and (``holders``) a folder holding run or
    sweep folders for them, sorted by name. Anything else: :class:`RunFolderError`, one line."""
    found: list[Found] = []
    for p in [paths] if isinstance(paths, (str, Path)) else paths:
        p = Path(p)
        if (p / SWEEP_SPEC).is_file():
            spec = _read_spec(p / SWEEP_SPEC)
            keys = tuple(a["key"] for a in spec.get("grid", []) if a["key"] != "seed")
            runs = [Found(p / name, p, keys) for name in spec.get("runs", []) if is_finished(p / name)]
            if not runs:
                raise RunFolderError(f"{p}: a sweep folder with no finished run; run the sweep first")
            found += runs
        elif (p / ROUNDS).is_file():
            found.append(Found(p))
        elif not p.exists():
            raise RunFolderError(f"{p}: no such folder; expected a run folder ({ROUNDS}) or a sweep folder "
                                 f"({SWEEP_SPEC})")
        elif holders and p.is_dir() and any((c / ROUNDS).is_file() or (c / SWEEP_SPEC).is_file() for c in p.iterdir()):
            found += expand(sorted(c for c in p.iterdir() if (c / ROUNDS).is_file() or (c / SWEEP_SPEC).is_file()))
        elif (p / MARKER).is_file():  # a killed or failed run: what it lacks is to be finished
            raise RunFolderError(f"{p}: an unfinished run (its {MARKER} marker says why); finish it with the same "
                                 f"edgesim run command and --resume, then use the finished folder")
        else:
            holding = ", nor a folder holding them" if holders else ""
            raise RunFolderError(f"{p}: neither a run folder ({ROUNDS}) nor a sweep folder ({SWEEP_SPEC}){holding}")
    return found


# --------------------------------------------------------------------------- a sweep folder


def read_live_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a CSV that may be growing (a running run's ``rounds.csv``, ``devices.csv``): only the
    complete lines, up to the last newline, are read, so a row still being written is never seen half."""
    data = Path(path).read_bytes()
    complete = data[:data.rfind(b"\n") + 1].decode("utf-8")
    lines = list(csv.reader(io.StringIO(complete)))
    return (lines[0], lines[1:]) if lines else ([], [])


class Sweep:
    """A finished (or partly finished) sweep folder, read back."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        spec_path, csv_path = self.folder / SWEEP_SPEC, self.folder / SWEEP_TABLE
        if not spec_path.is_file() or not csv_path.is_file():
            raise RunFolderError(f"{self.folder}: no {SWEEP_SPEC}/{SWEEP_TABLE} — is it a sweep folder?")
        self.spec = _read_spec(spec_path)
        self.keys = [a["key"] for a in self.spec["grid"] if a["key"] != "seed"]
        self.values = {a["key"]: a["values"] for a in self.spec["grid"]}
        header, self.rows = read_csv_rows(csv_path)
        missing = [c for c in ("run", "status", *self.keys) if c not in header]
        if missing:
            raise RunFolderError(f"{csv_path}: no column {missing[0]!r}; expected the {SWEEP_TABLE} edgesim wrote")
        for line, r in enumerate(self.rows, start=2):
            for c in header:
                numeric = c.endswith(("_accuracy", "_s", "_bits_up", "_bits_down", "_energy_j", "_rounds"))
                if c not in self.keys and numeric and r[c] != "":
                    number_field(csv_path, line, c, r[c], empty_ok=False)
            if r["status"] == "ok" and not r["run"]:
                raise RunFolderError(f"{csv_path}: line {line}, column run is empty; expected a run folder name")
        self.ok = [r for r in self.rows if r["status"] == "ok"]
        self._rounds: dict = {}  # run folder -> read_rounds, for thresholds computed after the fact
        self.names = display_names(self.folder / r["run"] for r in self.ok)  # {algorithm: display name}
        self.algorithms = sorted({c.split("_final_accuracy")[0] for c in (self.rows[0] if self.rows else {})
                                  if c.endswith("_final_accuracy")})
        # as summary.json wrote them ("0.8"), lowest first
        self.thresholds = sorted({c.split("_time_to_")[1][:-2] for c in (self.rows[0] if self.rows else {})
                                  if "_time_to_" in c}, key=float)

    def point(self, row: dict) -> tuple:
        """The grid point (values of the non-seed keys) of a row."""
        return tuple(_parse(row[k]) for k in self.keys)

    def points(self) -> list[tuple]:
        """Grid points in the grid's own order."""
        import itertools

        return list(itertools.product(*[self.values[k] for k in self.keys]))

    def run_dirs(self, point: tuple) -> list[Path]:
        return [self.folder / r["run"] for r in self.ok if self.point(r) == tuple(point)]

    def time_to(self, point: tuple, algorithm: str, threshold: float) -> list[Optional[float]]:
        """Simulated seconds to ``threshold`` accuracy of every finished seed of a grid point, computed now from
        each run's ``rounds.csv`` by the rule of ``summary.json`` (``None`` where never reached)."""
        out = []
        for run_dir in self.run_dirs(point):
            if run_dir not in self._rounds:  # each rounds.csv read once, whatever the algorithms and powers
                self._rounds[run_dir] = read_rounds(run_dir)
            cols = self._rounds[run_dir].get(algorithm)
            c = crossing(cols, float(threshold), self._sustain(run_dir)) if cols is not None else None
            out.append(None if c is None else c["time_s"])
        return out

    def _sustain(self, run_dir: Path) -> int:
        """The run's k of the crossing rule (its config's ``run.sustain_rounds``, else the default)."""
        try:
            config = tomllib.loads((Path(run_dir) / CONFIG).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            config = {}
        return sustain_rounds(config)

    def metric(self, point: tuple, column: str) -> list[Optional[float]]:
        """The column's value for every finished seed of a grid point (``None`` where empty)."""
        return [float(r[column]) if r.get(column) not in ("", None) else None
                for r in self.ok if self.point(r) == tuple(point)]


def _read_spec(path: Path) -> dict:
    """``sweep.json`` read and checked: a ``grid`` list of ``{"key", "values"}`` (:class:`RunFolderError` if not)."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunFolderError(f"{path}: not valid JSON ({e}); expected the {SWEEP_SPEC} edgesim wrote") from None
    grid = spec.get("grid") if isinstance(spec, dict) else None
    if not isinstance(grid, list) or not all(
        isinstance(a, dict) and isinstance(a.get("key"), str) and isinstance(a.get("values"), list) for a in grid
    ):
        raise RunFolderError(f"{path}: no valid \"grid\" (a list of {{\"key\", \"values\"}}); "
                            f"expected the {SWEEP_SPEC} edgesim wrote")
    return spec


def _parse(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# --------------------------------------------------------------------------- tidy frames


def _read_table(folder: Path, table: str):
    """One run's table as a DataFrame, read by the rules ``plot`` and ``report`` apply: ``rounds.csv`` is checked
    value by value first (:func:`read_rounds`: an ``accuracy = nan`` or a negative time is refused alike
    everywhere); any file pandas cannot read (empty, ragged, not UTF-8) is one :class:`RunFolderError` naming it."""
    import pandas as pd

    path = folder / TABLES[table]
    if table == "rounds":
        read_rounds(folder)
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise RunFolderError(f"{path}: missing; expected the {TABLES[table]} edgesim wrote") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as e:
        raise RunFolderError(f"{path}: unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else e}); "
                             f"expected the {TABLES[table]} edgesim wrote") from None


def load_runs(paths, table: str = "rounds"):
    """Run folders and sweep folders as one tidy pandas DataFrame, one row per run × algorithm × round.

    ``paths``: run folders, sweep folders (their finished runs), or folders
    holding either (``runs/``). Columns: ``run`` (the folder), ``sweep`` (its
    sweep folder, or empty), ``scenario`` (name), ``fingerprint``
    (:func:`edgesim.results.fingerprint.scenario_fingerprint`: equal for runs that differ only in the
    seed), one column per grid key of the sweeps (``system.bandwidth_hz``,
    its value in each run's ``config.toml``), ``seed``, ``algorithm``,
    ``display`` (the figures' name), then every column of the run's
    ``rounds.csv`` (``round``, ``time_s``, ``accuracy``, bits, energy, …).
    ``table="devices"`` or ``"events"`` reads those files instead.
    """
    import pandas as pd

    if table not in TABLES:
        raise ValueError(f"table(={table!r}) must be 'rounds', 'devices' or 'events'")
    folders = expand(paths)
    grid_keys = list(dict.fromkeys(k for f in folders for k in f.grid_keys))
    frames = []
    for f in folders:
        config = read_config(f.folder)
        display = {a: s.get("display", a) for a, s in read_summary(f.folder).get("algorithms", {}).items()}
        df = _read_table(f.folder, table)
        meta = {"run": str(f.folder), "sweep": str(f.sweep) if f.sweep else "", "scenario": config.get("name"),
                "fingerprint": scenario_fingerprint(config), **{k: dig(config, k) for k in grid_keys},
                "seed": config.get("seed")}
        head = pd.DataFrame({k: [v] * len(df) for k, v in meta.items()}, index=df.index)
        head["algorithm"] = df["algorithm"]
        head["display"] = df["algorithm"].map(lambda a, names=display: names.get(a, a))
        frames.append(pd.concat([head, df.drop(columns=["algorithm"])], axis=1))
    if not frames:
        return pd.DataFrame(columns=["run", "sweep", "scenario", "fingerprint", *grid_keys, "seed", "algorithm",
                                     "display"])
    return pd.concat(frames, ignore_index=True)
