"""Reading run folders and sweep folders: one :class:`Run`, one folder expander, one ``rounds.csv`` reader.

- :func:`read_rounds`: ``rounds.csv`` → ``{algorithm: {column: array}}``, every
  value checked (one line naming the file, line, column and value);
- :func:`read_divergence`: the algorithms whose training diverged, from which
  round (``summary.json``'s mark, or a non-finite accuracy or an infinite loss
  in ``rounds.csv``): every reader keeps their rows before it and names them;
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
import math
import re
import tomllib
import warnings
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


class DivergedWarning(UserWarning):
    """:func:`load_runs` read a run in which an algorithm diverged (one warning per algorithm and run)."""


class UnfinishedRunWarning(UserWarning):
    """:func:`expand` left out an unfinished run (``X.incomplete`` with its ``INCOMPLETE`` marker) it found in a
    folder of runs: one warning naming it (its results are not results)."""


class DuplicateRunWarning(UserWarning):
    """:func:`load_runs` was given one run folder twice (directly, or through a sweep or a folder of runs): it is read
    once, and a warning names it."""


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
TEXT_ROUND_COLUMNS = ("level",)  # a hierarchical run's "edge"/"cloud" (NaN in the arrays; the DataFrame keeps it)


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


# A row shows that training diverged when its accuracy is a number that is not finite (a literal nan or inf: edgesim
# writes an accuracy a round did not evaluate as empty) or a loss column (a name ending in "loss") is infinite. A NaN
# loss is not divergence: edgesim writes it for a round that trained nothing (a server phase the deadline cut).
LOSS_SUFFIX = "loss"


@dataclass(frozen=True)
class Divergence:
    """An algorithm whose training diverged in a run: its rows before ``round`` are its results; that round and
    any later one are not. ``why``: the run's note in ``summary.json``, or the ``rounds.csv`` value showing it."""

    run: Path
    algorithm: str
    round: int
    why: str

    def line(self) -> str:
        """One line for a user: which algorithm, which run, from which round, and why."""
        why = self.why.removeprefix(f"{self.algorithm}: ")
        return f"{self.algorithm} diverged in {self.run} from round {self.round} ({why})"


def divergence_notes(divergences: Iterable[Divergence], then: str) -> list[str]:
    """One line per diverged algorithm: in which runs it diverged, from which round, then what the reader did
    (``then``) — the words ``report``, ``plot`` and :func:`load_runs` say."""
    runs: dict[str, list[Divergence]] = {}
    for d in divergences:
        runs.setdefault(d.algorithm, []).append(d)
    return [f"{alg} diverged in {', '.join(f'{d.run} (from round {d.round})' for d in ds)}: {then}"
            for alg, ds in runs.items()]


def _diverged_value(column: str, text: str) -> bool:
    """Whether ``text`` in ``column`` of a ``rounds.csv`` row shows divergence (the rule above)."""
    if text == "" or not (column == "accuracy" or column.endswith(LOSS_SUFFIX)):
        return False
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isinf(value) or (column == "accuracy" and math.isnan(value))


def _read_round_rows(run_dir: Path) -> tuple[Path, dict[str, dict[str, list]], dict[str, Divergence]]:
    """(path, {algorithm: {column: values}}, {algorithm: Divergence shown in rounds.csv}) of a run's rounds.csv,
    every value checked; an algorithm's row that shows divergence and its later rows are left out."""
    path = Path(run_dir) / ROUNDS
    if not path.is_file():
        raise RunFolderError(f"{path}: no {ROUNDS} — is {run_dir} a finished run folder?")
    header, rows = read_csv_rows(path)
    missing = [c for c in REQUIRED_ROUND_COLUMNS if c not in header]
    if missing and rows:  # header-only (every algorithm stopped before a result): named by scan_rounds
        raise RunFolderError(f"{path}: no column {missing[0]!r}; expected the {ROUNDS} edgesim wrote "
                            f"(columns {', '.join(REQUIRED_ROUND_COLUMNS)}, ...)")
    cols: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    shown: dict[str, Divergence] = {}
    for line, row in enumerate(rows, start=2):
        alg = row["algorithm"]
        if not alg:
            raise RunFolderError(f"{path}: line {line}, column algorithm is empty; expected an algorithm name")
        if alg in shown:  # after its divergence: no result
            continue
        bad = next((k for k, v in row.items() if _diverged_value(k, v)), None)
        if bad is not None:
            round_index = number_field(path, line, "round", row["round"], empty_ok=False)
            check_round_value(path, line, "round", row["round"], round_index)
            shown[alg] = Divergence(Path(run_dir), alg, int(round_index), f"{ROUNDS} line {line}: {bad} = {row[bad]}")
            continue
        for k, v in row.items():
            if k == "algorithm":
                continue
            if k in NUMERIC_ROUND_COLUMNS or k == "accuracy":
                value = number_field(path, line, k, v, empty_ok=k == "accuracy")
                check_round_value(path, line, k, v, value)
                cols[alg][k].append(value)
                continue
            if k in TEXT_ROUND_COLUMNS:
                cols[alg][k].append(np.nan)
                continue
            try:  # every other column edgesim writes is a number, or empty where a round has none
                cols[alg][k].append(float(v) if v != "" else np.nan)
            except ValueError:
                raise RunFolderError(f"{path}: line {line}, column {k} = {v!r}; expected a number (or empty), as "
                                     f"edgesim writes it") from None
    return path, cols, shown


def _with_summary(run_dir: Path, shown: dict[str, Divergence], cols: dict) -> dict[str, Divergence]:
    """``shown`` merged with what ``summary.json`` marks diverged: its note, from the round the note names (else
    the one after the algorithm's last row); where both say, the earlier round."""
    out = dict(shown)
    algorithms = read_summary(run_dir).get("algorithms")
    for alg, info in (algorithms if isinstance(algorithms, dict) else {}).items():
        note = info.get("diverged") if isinstance(info, dict) else None
        if not isinstance(note, str) or not note:
            continue
        named = re.search(r"\bin round (\d+)\b", note)
        done = cols[alg]["round"] if alg in cols else []
        round_index = int(named.group(1)) if named else (int(max(done)) + 1 if done else 0)
        if alg not in out or round_index < out[alg].round:
            out[alg] = Divergence(Path(run_dir), alg, round_index, note)
    return out


def read_divergence(run_dir: Path) -> dict[str, Divergence]:
    """{algorithm: :class:`Divergence`} of a run: what ``summary.json`` marks diverged and what ``rounds.csv``
    shows (the rule of :data:`LOSS_SUFFIX`); {} when no algorithm diverged."""
    _, cols, shown = _read_round_rows(run_dir)
    return _with_summary(run_dir, shown, cols)


def scan_rounds(run_dir: Path) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Divergence]]:
    """``rounds.csv`` of a run → ``({algorithm: {column: array}}, {algorithm: Divergence})``: the one reader.

    Text columns read as NaN. An algorithm that diverged (:func:`read_divergence`)
    keeps only its rows before the round it diverged in. :class:`RunFolderError`
    (one line: file, line, column, value) for a file that is missing,
    header-only, lacks a column edgesim writes, or holds a non-numeric value
    where a number belongs; a run whose every algorithm diverged before its
    first result is named as such.
    """
    path, cols, shown = _read_round_rows(run_dir)
    diverged = _with_summary(run_dir, shown, cols)
    for alg, d in diverged.items():  # summary.json's round may be earlier than what rounds.csv shows
        keep = [i for i, r in enumerate(cols.get(alg, {}).get("round", [])) if r < d.round]
        if alg in cols and len(keep) < len(cols[alg]["round"]):
            cols[alg] = {k: [v[i] for i in keep] for k, v in cols[alg].items()}
        if alg in cols and not keep:
            del cols[alg]
    if not cols:
        if diverged:
            raise RunFolderError(f"{run_dir}: every algorithm of this run diverged before its first result, nothing "
                                 f"to read ({'; '.join(d.line() for d in diverged.values())})")
        raise RunFolderError(f"{path}: a header and no rounds; expected one row per algorithm and round")
    if all(np.isnan(v).all() for c in cols.values() for v in [np.asarray(c["accuracy"], dtype=float)]):
        raise RunFolderError(f"{path}: the accuracy column has no value; expected an accuracy in some round")
    return {alg: {k: np.asarray(v, dtype=float) for k, v in c.items()} for alg, c in cols.items()}, diverged


def read_rounds(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    """``rounds.csv`` of a run → {algorithm: {column: array}}: :func:`scan_rounds` without the divergences (an
    algorithm that diverged keeps only its rows before it)."""
    return scan_rounds(run_dir)[0]


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
    def _scanned(self) -> tuple[dict, dict]:
        return scan_rounds(self.path)

    @property
    def series(self) -> dict[str, dict[str, np.ndarray]]:
        """``rounds.csv`` as ``{algorithm: {column: array}}`` (:func:`read_rounds`: a diverged algorithm's rows
        before it diverged)."""
        return self._scanned[0]

    @property
    def diverged(self) -> dict[str, Divergence]:
        """{algorithm: :class:`Divergence`} of the algorithms whose training diverged ({} when none did)."""
        return self._scanned[1]

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
    scanned = scan_rounds(folder)
    run = Run(folder)
    run.config, run._scanned = config, scanned  # the cached properties, read once
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
    sweep folders for them, sorted by name. An unfinished run (its ``INCOMPLETE`` marker) given itself is refused;
    one inside a folder of runs is left out with an :class:`UnfinishedRunWarning` naming it. Anything else:
    :class:`RunFolderError`, one line."""
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
        elif (p / MARKER).is_file():  # a killed or failed run, whatever it holds: what it lacks is to be finished
            raise RunFolderError(f"{p}: an unfinished run (its {MARKER} marker says why); finish it by "
                                 f"running it again with ⟨resume⟩, then use the finished folder")
        elif (p / ROUNDS).is_file():
            found.append(Found(p))
        elif not p.exists():
            raise RunFolderError(f"{p}: no such folder; expected a run folder ({ROUNDS}) or a sweep folder "
                                 f"({SWEEP_SPEC})")
        elif holders and p.is_dir() and any((c / ROUNDS).is_file() or (c / SWEEP_SPEC).is_file() for c in p.iterdir()):
            held = sorted(c for c in p.iterdir() if (c / ROUNDS).is_file() or (c / SWEEP_SPEC).is_file())
            for c in held:
                if (c / MARKER).is_file():
                    warnings.warn(f"{c}: an unfinished run (its {MARKER} marker says why), left out: its rows are not "
                                  "results until it has finished", UnfinishedRunWarning, stacklevel=2)
            found += expand([c for c in held if not (c / MARKER).is_file()])
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


TEXT_COLUMNS = ("algorithm", "drop_reason", "kind")  # devices.csv's and events.csv's columns of words
BOOL_COLUMNS = ("arrived", "dropped")  # devices.csv's True/False


def check_table_columns(path: Path, df) -> None:
    """Every column of a ``devices.csv`` or ``events.csv`` frame holds what edgesim writes there: words in
    :data:`TEXT_COLUMNS`, ``True``/``False`` in :data:`BOOL_COLUMNS`, numbers (or empty) in every other;
    :class:`RunFolderError` naming the file, line, column and value otherwise."""
    import pandas as pd

    for column in df.columns:
        if column in TEXT_COLUMNS:
            continue
        values = df[column]
        if column in BOOL_COLUMNS:
            bad = ~values.isin([True, False, "True", "False"])
            expected = "True or False"
        elif not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)):
            bad = pd.to_numeric(values, errors="coerce").isna() & values.notna()
            expected = "a number (or empty)"
        else:
            continue
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise RunFolderError(f"{path}: line {i + 2}, column {column} = {str(values.iloc[i])!r}; expected "
                                 f"{expected}, as edgesim writes it")


def _read_table(folder: Path, table: str):
    """(One run's table as a DataFrame, its divergences), read by the rules ``plot`` and ``report`` apply:
    ``rounds.csv`` is checked value by value first (:func:`scan_rounds`: a negative time is refused alike
    everywhere, a diverged algorithm's rows from the round it diverged in are left out alike); any file pandas
    cannot read (empty, ragged, not UTF-8) is one :class:`RunFolderError` naming it."""
    import pandas as pd

    path = folder / TABLES[table]
    diverged = scan_rounds(folder)[1]  # every value checked by the one reader, divergence by its rule
    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise RunFolderError(f"{path}: missing; expected the {TABLES[table]} edgesim wrote") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as e:
        raise RunFolderError(f"{path}: unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else e}); "
                             f"expected the {TABLES[table]} edgesim wrote") from None
    if table != "rounds":  # rounds.csv was checked value by value above
        check_table_columns(path, df)
    if "round" in df and "algorithm" in df:  # a diverged algorithm: its rows before it, as read_rounds keeps
        start = df["algorithm"].map(lambda a: diverged[a].round if a in diverged else np.inf)
        df = df[df["round"] < start].reset_index(drop=True)
    return df, diverged


def load_runs(paths, table: str = "rounds"):
    """Run folders and sweep folders as one tidy pandas DataFrame, one row per run × algorithm × round.

    ``paths``: run folders, sweep folders (their finished runs), or folders
    holding either (``runs/``). Columns: ``run`` (the folder), ``sweep`` (its
    sweep folder, or empty), ``scenario`` (name), ``fingerprint``
    (:func:`edgesim.results.fingerprint.scenario_fingerprint`: equal for runs that differ only in the
    seed), one column per grid key of the sweeps (``system.bandwidth_hz``,
    its value in each run's ``config.toml``), ``seed``, ``algorithm``,
    ``display`` (the figures' name), ``diverged_round`` (the round from
    which the algorithm's training diverged in that run, NaN where it did
    not: :func:`read_divergence`; its rows from that round on are left out,
    and a :class:`DivergedWarning` names it), then every column of the run's
    ``rounds.csv`` (``round``, ``time_s``, ``accuracy``, bits, energy, …).
    ``table="devices"`` or ``"events"`` reads those files instead.
    """
    import pandas as pd

    if table not in TABLES:
        raise ValueError(f"table(={table!r}) must be 'rounds', 'devices' or 'events'")
    folders, seen = [], set()
    for f in expand(paths):  # one run given twice would be counted twice by every group-by
        key = f.folder.resolve()
        if key in seen:
            warnings.warn(f"{f.folder}: the run folder given twice; read once", DuplicateRunWarning, stacklevel=2)
            continue
        seen.add(key)
        folders.append(f)
    grid_keys = list(dict.fromkeys(k for f in folders for k in f.grid_keys))
    frames = []
    for f in folders:
        config = read_config(f.folder)
        display = {a: s.get("display", a) for a, s in read_summary(f.folder).get("algorithms", {}).items()}
        df, diverged = _read_table(f.folder, table)
        for line in divergence_notes(diverged.values(), "its rows from that round on are left out; column "
                                                         "diverged_round marks it"):
            warnings.warn(line, DivergedWarning, stacklevel=2)
        meta = {"run": str(f.folder), "sweep": str(f.sweep) if f.sweep else "", "scenario": config.get("name"),
                "fingerprint": scenario_fingerprint(config), **{k: dig(config, k) for k in grid_keys},
                "seed": config.get("seed")}
        head = pd.DataFrame({k: [v] * len(df) for k, v in meta.items()}, index=df.index)
        head["algorithm"] = df["algorithm"]
        head["display"] = df["algorithm"].map(lambda a, names=display: names.get(a, a))
        head["diverged_round"] = df["algorithm"].map(lambda a, d=diverged: d[a].round if a in d else np.nan)
        frames.append(pd.concat([head, df.drop(columns=["algorithm"])], axis=1))
    if not frames:
        return pd.DataFrame(columns=["run", "sweep", "scenario", "fingerprint", *grid_keys, "seed", "algorithm",
                                     "display", "diverged_round"])
    return pd.concat(frames, ignore_index=True)
