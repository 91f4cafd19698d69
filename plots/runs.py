"""Run folders as data: which scenario a run was, what it measured, and statistics over seeds.

Runs are only ever combined within one **scenario group**: the runs whose
resolved scenarios (``config.toml``) are the same once the seed is set aside
(:func:`scenario_fingerprint`). Runs of different scenarios — another data
set, another bandwidth — are never averaged as if they were seeds
(:func:`check_one_scenario` names the keys that differ).

Over the seeds of a group, a metric is reported as its mean and a 95 %
Student-t interval (:func:`mean_interval`); two algorithms of the same runs
are compared by their **paired** difference seed by seed
(:func:`paired_difference`), which the common random numbers of a run make
much tighter than the difference of two unpaired means (docs/metrics.md).

Per-run metrics (:func:`algorithm_metrics`) are computed from ``rounds.csv``
by the rules ``summary.json`` uses — the final accuracy by the run's plateau
rule, the crossing of an accuracy threshold by
:func:`edgesim.learning.metrics.first_crossing` — so a threshold chosen after the run
gives the same time as one chosen before it, and also the uplink bits,
downlink bits and device energy spent by then.

Torch-free and matplotlib-free (NumPy and SciPy only).
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from edgesim.learning.metrics import final_accuracy, first_crossing

# Keys of a resolved scenario that do not make it another scenario: the seed (what varies over replications),
# where it was read from, package versions, and the torch thread count (it changes float rounding only).
NOT_SCENARIO = ("seed", "source", "versions", "run.threads")
CONFIDENCE = 0.95


class RunDataError(ValueError):
    """A folder that is not a readable run or sweep folder, or runs that may not be combined; one line."""


# --------------------------------------------------------------------------- what a run was


def flatten(config: Mapping, prefix: str = "") -> dict:
    """``{"system": {"bandwidth_hz": 1e6}}`` → ``{"system.bandwidth_hz": 1e6}`` (lists kept whole)."""
    out = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def scenario_keys(config: Mapping) -> dict:
    """The flattened resolved scenario without :data:`NOT_SCENARIO` (what makes two runs one scenario)."""
    return {k: v for k, v in flatten(config).items() if not any(k == n or k.startswith(n + ".") for n in NOT_SCENARIO)}


def scenario_fingerprint(config: Mapping) -> str:
    """SHA-256 (64 hex digits) of the resolved scenario minus the seed (:data:`NOT_SCENARIO`); reports show
    its first 12."""
    text = json.dumps(scenario_keys(config), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def scenario_differences(a: Mapping, b: Mapping) -> list[tuple[str, object, object]]:
    """``(key, value in a, value in b)`` for every scenario key on which two resolved configs differ (sorted)."""
    fa, fb = scenario_keys(a), scenario_keys(b)
    missing = object()
    out = []
    for k in sorted(set(fa) | set(fb)):
        va, vb = fa.get(k, missing), fb.get(k, missing)
        if va != vb:
            out.append((k, None if va is missing else va, None if vb is missing else vb))
    return out


@dataclass
class Run:
    """One finished run folder: its resolved scenario, seed, fingerprint and rounds per algorithm."""

    folder: Path
    config: dict
    rounds: dict  # {algorithm: {column: np.ndarray}} (edgesim.plots.curves.read_rounds)
    display: dict = field(default_factory=dict)  # {algorithm: display name} from summary.json

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))

    @property
    def fingerprint(self) -> str:
        return scenario_fingerprint(self.config)

    @property
    def algorithms(self) -> list[str]:
        return list(self.rounds)


def load_run(folder: Path) -> Run:
    """A finished run folder; :class:`RunDataError` (one line, naming the file) when it cannot be read."""
    from edgesim.plots.curves import PlotDataError, display_names, read_rounds

    folder = Path(folder)
    path = folder / "config.toml"
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDataError(f"{path}: missing; expected a run folder written by edgesim run") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise RunDataError(f"{path}: unreadable ({e}); expected the config.toml edgesim wrote") from None
    try:
        rounds = read_rounds(folder)
    except PlotDataError as e:
        raise RunDataError(str(e)) from None
    return Run(folder, config, rounds, display_names([folder]))


def expand(paths: Iterable[Path]) -> list[Path]:
    """Run folders of ``paths``: a sweep folder (``sweep.json``) stands for its finished runs, in its order."""
    out: list[Path] = []
    for p in map(Path, paths):
        if (p / "sweep.json").is_file():
            try:
                names = json.loads((p / "sweep.json").read_text())["runs"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise RunDataError(f"{p / 'sweep.json'}: unreadable ({e}); expected the sweep.json edgesim wrote") from None
            runs = [p / n for n in names if (p / n / "rounds.csv").is_file()]
            if not runs:
                raise RunDataError(f"{p}: a sweep folder with no finished run; run the sweep first")
            out += runs
        elif (p / "rounds.csv").is_file():
            out.append(p)
        elif not p.exists():
            raise RunDataError(f"{p}: no such folder; expected a run folder (rounds.csv) or a sweep folder (sweep.json)")
        else:
            raise RunDataError(f"{p}: neither a run folder (rounds.csv) nor a sweep folder (sweep.json)")
    return out


# --------------------------------------------------------------------------- scenario groups


@dataclass
class Group:
    """The runs of one scenario (seeds); ``point``: its values of the keys on which the groups given differ."""

    fingerprint: str
    runs: list[Run]
    point: dict = field(default_factory=dict)

    @property
    def config(self) -> dict:
        return self.runs[0].config

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.point.items()) or str(self.config.get("name", self.fingerprint))


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Runs grouped by scenario fingerprint (first-seen order); each group's ``point`` set from the keys that vary.

    Two runs of one group with the same seed are the same replication twice:
    :class:`RunDataError` naming both folders.
    """
    groups: dict[str, Group] = {}
    for run in runs:
        g = groups.setdefault(run.fingerprint, Group(run.fingerprint, []))
        twin = next((r for r in g.runs if r.seed == run.seed), None)
        if twin is not None:
            raise RunDataError(f"{twin.folder} and {run.folder}: the same scenario and seed ({run.seed}) twice; "
                               f"give each replication once")
        g.runs.append(run)
    out = list(groups.values())
    flat = [scenario_keys(g.config) for g in out]
    varying = [k for k in sorted(set().union(*flat)) if len({json.dumps(f.get(k), default=str) for f in flat}) > 1]
    for g, f in zip(out, flat):
        g.point = {k: f.get(k) for k in varying}
    return out


def check_one_scenario(runs: Sequence[Run], what: str = "these runs") -> None:
    """:class:`RunDataError` when ``runs`` are not all one scenario (seeds): one line naming the keys that differ."""
    if len({r.fingerprint for r in runs}) <= 1:
        return
    first = runs[0]
    other = next(r for r in runs if r.fingerprint != first.fingerprint)
    diffs = scenario_differences(first.config, other.config)
    shown = "; ".join(f"{k} = {a!r} in {first.folder}, {b!r} in {other.folder}" for k, a, b in diffs[:3])
    more = f" (and {len(diffs) - 3} more keys)" if len(diffs) > 3 else ""
    raise RunDataError(f"{what} are not seeds of one scenario: {shown}{more}; only runs that differ in their seed "
                       f"are averaged (add --separate to draw each scenario on its own)")


# --------------------------------------------------------------------------- per-run metrics


def crossing(cols: Mapping[str, np.ndarray], threshold: float) -> Optional[dict]:
    """What it took to first reach ``threshold`` accuracy: ``{"time_s", "bits_up", "bits_down", "energy_j", "round"}``
    at the end of that round (cumulative), or ``None`` if never (the rule of ``summary.json``)."""
    i = first_crossing(list(cols["accuracy"]), threshold)
    if i is None:
        return None
    get = lambda k: float(cols[k][i]) if k in cols else math.nan  # noqa: E731
    return {"time_s": get("time_s"), "bits_up": get("cum_bits_up"), "bits_down": get("cum_bits_down"),
            "energy_j": get("cum_energy_j"), "round": int(cols["round"][i])}


THRESHOLD_METRICS = {"time_s": "time_to_accuracy_s", "bits_up": "bits_up_to_accuracy", "energy_j": "energy_to_accuracy_j"}


def algorithm_metrics(cols: Mapping[str, np.ndarray], config: Mapping, thresholds: Sequence[float]) -> dict:
    """One algorithm's metrics in one run: ``{(metric, threshold or None): value}`` (NaN where undefined).

    ``final_accuracy`` and ``final_accuracy_var`` by the run's plateau rule
    (``run.plateau_tol``, ``run.plateau_patience``); totals at the last round;
    per threshold: simulated seconds, uplink bits and device energy to reach it (NaN if never).
    """
    run = config.get("run", {})
    accs = [float(a) for a in cols["accuracy"]]
    ok = [a for a in accs if not math.isnan(a)]
    last = -1
    out: dict = {}
    if ok:
        final, i, settled = final_accuracy(accs, float(run.get("plateau_tol", 0.01)), int(run.get("plateau_patience", 5)))
        out[("final_accuracy", None)] = final
        out[("final_accuracy_var", None)] = float(cols["accuracy_var"][i]) if "accuracy_var" in cols else math.nan
        out[("best_accuracy", None)] = max(ok)
    else:
        out[("final_accuracy", None)] = out[("final_accuracy_var", None)] = out[("best_accuracy", None)] = math.nan
    out[("rounds", None)] = float(len(accs))
    for key, col in (("simulated_time_s", "time_s"), ("total_bits_up", "cum_bits_up"),
                     ("total_bits_down", "cum_bits_down"), ("total_energy_j", "cum_energy_j")):
        out[(key, None)] = float(cols[col][last]) if col in cols and len(cols[col]) else math.nan
    for t in thresholds:
        c = crossing(cols, t)
        for k, metric in THRESHOLD_METRICS.items():
            out[(metric, float(t))] = c[k] if c is not None else math.nan
    return out


# --------------------------------------------------------------------------- statistics over seeds


@dataclass(frozen=True)
class Interval:
    """Mean and 95 % Student-t interval of ``n`` values (``low``/``high`` NaN for n < 2); ``n_total`` values
    were given, of which ``n_total - n`` were NaN (e.g. a threshold some seeds never reached)."""

    mean: float
    low: float
    high: float
    n: int
    n_total: int

    @property
    def excludes_zero(self) -> bool:
        return self.n >= 2 and (self.low > 0 or self.high < 0)


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """``mean ± t_{(1+c)/2, n-1} · s / √n`` over the finite values (``s``: sample standard deviation).

    Hand check: values 1, 2, 3 → mean 2, s = 1, t(0.975, 2) = 4.3027, half-width 4.3027/√3 = 2.4841.
    One value: its mean, no interval. None: NaN.
    """
    from scipy.stats import t as student_t

    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    n = int(v.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, len(values))
    mean = float(v.mean())
    if n == 1:
        return Interval(mean, math.nan, math.nan, 1, len(values))
    half = float(student_t.ppf((1 + confidence) / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
    return Interval(mean, mean - half, mean + half, n, len(values))


def paired_difference(a: Mapping[int, float], b: Mapping[int, float], confidence: float = CONFIDENCE) -> Interval:
    """Mean and interval of ``a[seed] − b[seed]`` over the seeds both have a finite value for (paired by seed)."""
    diffs = [a[s] - b[s] for s in a if s in b and not math.isnan(a[s]) and not math.isnan(b[s])]
    out = mean_interval(diffs, confidence)
    return Interval(out.mean, out.low, out.high, out.n, len(set(a) | set(b)))
