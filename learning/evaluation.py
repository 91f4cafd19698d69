"""Which rounds and devices a run evaluates: ``[run] eval_every``, ``eval_devices`` and ``label_quality``.

Evaluation is measurement (docs/use/metrics.md): it is never charged on the
simulated clock and draws from no stream training uses, so evaluating less
changes no model, no time, no bit — only which cells of ``rounds.csv`` are
filled. A round ``r`` (counted from 0) is evaluated when ``(r + 1) % every == 0``
or it is the run's last round; the test accuracy is then the mean over a fixed
sample of ``m`` of the ``N`` devices, drawn once from the run's seed (stream
``"eval_devices"``), the same for every algorithm of the run, so paired
comparisons stay paired. The labelling diagnostic (``labeling_accuracy``) is
measured at the evaluated rounds (``label_quality = true``), never (``false``)
or every ``n``-th round and the last (``label_quality = n``).

:class:`EvalPlan` is the choice (pure); :class:`Measure` the run's current
round, set by the run before each round and read by the evaluation helpers of
:mod:`edgesim.learning.algorithms.common` (``None``: outside a run's rounds —
everything is measured).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np


def sample_size(spec: Union[str, int, float, None], n_devices: int) -> int:
    """``m`` of ``[run] eval_devices``: all (``None``/``"all"``), a count ``m``, or a fraction ``f`` of the ``N``
    devices: ``max(1, round(f·N))`` (Python's round: halves to even). ``1 <= m <= N``."""
    if spec is None or spec == "all":
        return n_devices
    if isinstance(spec, float):
        return min(n_devices, max(1, round(spec * n_devices)))
    return min(n_devices, int(spec))


def due(round_index: int, every: int, last_round: Optional[int]) -> bool:
    """Whether round ``round_index`` (from 0) is one of every ``every``-th (the ``every``-th, ``2·every``-th, ...
    counted from 1) or the last (``last_round``, from 0; ``None``: not known)."""
    return (round_index + 1) % every == 0 or round_index == last_round


@dataclass(frozen=True)
class EvalPlan:
    """``every``: rounds between evaluations (1: all); ``devices``: the evaluated devices, sorted (``None``: all);
    ``label_every``: ``None`` = the labelling diagnostic at every evaluated round, 0 = never, ``n`` = every n-th
    round and the last; ``last_round``: the run's last round (from 0; ``run.rounds``, else the budget's G)."""

    every: int = 1
    devices: Optional[tuple[int, ...]] = None
    label_every: Optional[int] = None
    last_round: Optional[int] = None

    @classmethod
    def from_config(cls, run_cfg, n_devices: int, rounds: int, rng: np.random.Generator) -> "EvalPlan":
        """The plan of ``[run]`` for ``n_devices`` devices and ``rounds`` rounds; ``rng`` draws the device sample
        (only when it is smaller than the cell: the default draws nothing)."""
        m = sample_size(getattr(run_cfg, "eval_devices", None), n_devices)
        devices = None if m >= n_devices else tuple(sorted(int(d) for d in rng.choice(n_devices, m, replace=False)))
        quality = getattr(run_cfg, "label_quality", None)
        label_every = None if quality is None or quality is True else 0 if quality is False else int(quality)
        return cls(int(getattr(run_cfg, "eval_every", None) or 1), devices, label_every, rounds - 1)

    @property
    def is_default(self) -> bool:
        return self.every == 1 and self.devices is None and self.label_every is None

    def accuracy_due(self, round_index: Optional[int]) -> bool:
        return round_index is None or due(round_index, self.every, self.last_round)

    def labels_due(self, round_index: Optional[int]) -> bool:
        if self.label_every is None:
            return self.accuracy_due(round_index)
        return self.label_every > 0 and (round_index is None or due(round_index, self.label_every, self.last_round))


class Measure:
    """A run's :class:`EvalPlan` and the round being run (``None`` between rounds: everything is measured)."""

    def __init__(self, plan: EvalPlan) -> None:
        self.plan = plan
        self.round_index: Optional[int] = None

    def devices(self, n_devices: int, labels: bool = False) -> Optional[tuple[int, ...]]:
        """The devices to evaluate now (``labels``: for the labelling diagnostic), or ``None`` when nothing is."""
        due_now = self.plan.labels_due(self.round_index) if labels else self.plan.accuracy_due(self.round_index)
        if not due_now:
            return None
        return tuple(range(n_devices)) if self.plan.devices is None else self.plan.devices
