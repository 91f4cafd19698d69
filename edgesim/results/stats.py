"""Statistics over the seeds of one scenario: groups of runs, mean intervals and paired differences.

Runs are only ever combined within one **scenario group**: the runs whose
resolved scenarios (``config.toml``) are the same once the seed is set aside
(:func:`edgesim.results.fingerprint.scenario_fingerprint`). Runs of different
scenarios — another data set, another bandwidth — are never averaged as if
they were seeds (:func:`check_one_scenario` names the keys that differ).

Over the seeds of a group, a metric is reported as its mean and a 95 %
Student-t interval (:func:`mean_interval`); two algorithms of the same runs
are compared by their **paired** difference seed by seed
(:func:`paired_difference`), which the common random numbers of a run make
much tighter than the difference of two unpaired means (docs/use/metrics.md).

Torch-free and matplotlib-free (NumPy and SciPy only).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from edgesim.results.fingerprint import scenario_differences, scenario_keys
from edgesim.results.reading import Run, RunFolderError

CONFIDENCE = 0.95


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
    :class:`RunFolderError` naming both folders.
    """
    groups: dict[str, Group] = {}
    for run in runs:
        g = groups.setdefault(run.fingerprint, Group(run.fingerprint, []))
        twin = next((r for r in g.runs if r.seed == run.seed), None)
        if twin is not None:
            raise RunFolderError(f"{twin.path} and {run.path}: the same scenario and seed ({run.seed}) twice; "
                               f"give each replication once")
        g.runs.append(run)
    out = list(groups.values())
    flat = [scenario_keys(g.config) for g in out]
    varying = [k for k in sorted(set().union(*flat)) if len({json.dumps(f.get(k), default=str) for f in flat}) > 1]
    for g, f in zip(out, flat):
        g.point = {k: f.get(k) for k in varying}
    return out


def check_one_scenario(runs: Sequence[Run], what: str = "these runs") -> None:
    """:class:`RunFolderError` when ``runs`` are not all one scenario (seeds): one line naming the keys that differ."""
    if len({r.fingerprint for r in runs}) <= 1:
        return
    first = runs[0]
    other = next(r for r in runs if r.fingerprint != first.fingerprint)
    diffs = scenario_differences(first.config, other.config)
    shown = "; ".join(f"{k} = {a!r} in {first.path}, {b!r} in {other.path}" for k, a, b in diffs[:3])
    more = f" (and {len(diffs) - 3} more keys)" if len(diffs) > 3 else ""
    raise RunFolderError(f"{what} are not seeds of one scenario: {shown}{more}; only runs that differ in their seed "
                       f"are averaged (⟨+separate⟩ to draw each scenario on its own, ⟨+overlay⟩ to draw them on one "
                       f"figure)")


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

    def text(self, digits: int = 3) -> str:
        """``"mean ± half-width"`` (the mean to ``digits`` significant digits, the half-width to two), the mean
        alone for one value, ``"—"`` for none; ``" (n/n_total)"`` after it when some values were missing (a
        study's table cell). Hand check: 1, 2, 3 → ``"2 ± 2.5"``; 1 and NaN → ``"1 (1/2)"``."""
        if self.n == 0:
            text = "—"
        elif self.n == 1:
            text = f"{self.mean:.{digits}g}"
        else:
            text = f"{self.mean:.{digits}g} ± {self.high - self.mean:.2g}"
        return text + ("" if self.n == self.n_total else f" ({self.n}/{self.n_total})")


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


def variance_interval(variances: Sequence[float], n_devices: int, confidence: float = CONFIDENCE) -> Interval:
    """The devices' accuracy variance over seeds: the mean of the seeds' variances, with a chi-square interval for
    the devices' variance σ² that never goes below zero.

    Each seed's value is the population variance (ddof = 0) of its ``n_devices`` device accuracies, so with device
    accuracies normal, ``N · var ~ σ² χ²(N − 1)``; pooled over k seeds, ``S = N · Σ var ~ σ² χ²(ν)``, ν = k (N − 1),
    and the interval is ``[S / χ²_{(1+c)/2, ν}, S / χ²_{(1−c)/2, ν}]`` (e.g. Casella & Berger, *Statistical
    Inference*, Ex. 9.2.2). Hand check: variances 0.01, 0.03 of 5 devices → S = 0.2, ν = 8, χ²(0.975, 8) = 17.5345,
    χ²(0.025, 8) = 2.17973: [0.01141, 0.09176]. One seed has an interval too (ν = N − 1); none: NaN.
    """
    from scipy.stats import chi2

    v = np.asarray([x for x in variances if x is not None and not math.isnan(x)], dtype=float)
    k, n = int(v.size), int(n_devices)
    if k == 0 or n < 2:
        return Interval(float(v.mean()) if k else math.nan, math.nan, math.nan, k, len(variances))
    total, dof = n * float(v.sum()), k * (n - 1)
    low = total / float(chi2.ppf((1 + confidence) / 2, dof))
    high = total / float(chi2.ppf((1 - confidence) / 2, dof))
    return Interval(float(v.mean()), low, high, k, len(variances))


def paired_difference(a: Mapping[int, float], b: Mapping[int, float], confidence: float = CONFIDENCE) -> Interval:
    """Mean and interval of ``a[seed] − b[seed]`` over the seeds both have a finite value for (paired by seed)."""
    diffs = [a[s] - b[s] for s in a if s in b and not math.isnan(a[s]) and not math.isnan(b[s])]
    out = mean_interval(diffs, confidence)
    return Interval(out.mean, out.low, out.high, out.n, len(set(a) | set(b)))
