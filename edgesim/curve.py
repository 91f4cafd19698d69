"""A torch-free learning backend whose accuracy follows a parametric curve, for tests and benchmarks.

Each round it picks ``clients_per_round`` (K) of the ``n_devices`` devices at
random with ``np.random.default_rng((seed, round_index))`` (sorted ids), gives
each the training cycles of Eq. (7), ``I * C * D`` (``WorkloadConfig``:
``local_iterations * cycles_per_sample * samples_per_device``), and asks it to
upload ``model_bits`` (and optionally to download ``download_bits`` first).
After the round its accuracy is

``accuracy = a_max - (a_max - a0) * exp(-rate * U / n_devices)``

with ``U`` the cumulative number of uploads that arrived, so dropped uploads
slow learning down. No learning happens; the curve only gives the engine
something plausible to log.

A scenario runs it with ``[run] backend = "parametric"`` (a physics-only run:
the clock alone, no torch); its ``[parametric]`` table is a
:class:`ParametricConfig`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from ._checks import count, finite, non_negative, positive
from .backend import DeviceWork, RoundOutcome, RoundPlan, SystemView
from .compute import training_cycles
from .config import Finite, WorkloadConfig, check_keys, fail, key

MAX_DOWNLOAD_BITS = 1e15  # bits of one round's broadcast: a petabit, far beyond any model


@dataclass(frozen=True)
class ParametricConfig:
    """The ``[parametric]`` table of a physics-only scenario: the accuracy curve and the broadcast size.

    ``accuracy = a_max - (a_max - a0) * exp(-rate * U / n_devices)`` with U the
    arrived uploads so far; ``download_bits`` is what each device receives
    from the BS at the start of a round (0: nothing).
    """

    a0: float = key(0.1, "accuracy before any upload of the physics-only curve",
                    allowed=Finite(minimum=0, maximum=1, noun="an accuracy", also="at most a_max"))
    a_max: float = key(0.9, "accuracy the curve tends to", allowed=Finite(minimum=0, maximum=1, noun="an accuracy"))
    rate: float = key(0.5, "rate of a_max − (a_max − a0)·exp(−rate·U/N), U the arrived uploads",
                      allowed=Finite(minimum=0))
    download_bits: float = key(0.0, "bits each device downloads at the start of a round", unit="bit",
                               allowed=Finite(minimum=0, maximum=MAX_DOWNLOAD_BITS, noun="a size",
                                              why="a broadcast of one round; larger is a typo"))

    def __post_init__(self):
        check_keys(self)
        if self.a0 > self.a_max:
            fail("a0", self.a0, f"at most a_max = {self.a_max!r} (the curve rises from a0 to a_max)")


class ParametricBackend:
    """A :class:`~edgesim.backend.LearningBackend` with a saturating-exponential accuracy curve."""

    def __init__(
        self,
        n_devices: int,
        clients_per_round: int,
        workload: Optional[WorkloadConfig] = None,
        seed: int = 0,
        *,
        a0: float = 0.1,
        a_max: float = 0.9,
        rate: float = 0.5,
        download_bits: float = 0.0,
    ):
        self.n_devices = count("n_devices", n_devices, 1)
        self.clients_per_round = count("clients_per_round", clients_per_round, 1)
        if self.clients_per_round > self.n_devices:
            raise ValueError(f"clients_per_round(={clients_per_round}) must be <= n_devices(={n_devices})")
        self.workload = WorkloadConfig() if workload is None else workload
        if isinstance(self.workload.model_bits, str):
            raise ValueError(f"workload.model_bits(={self.workload.model_bits!r}) must be a number of bits")
        if isinstance(self.workload.samples_per_device, str):
            raise ValueError(f"workload.samples_per_device(={self.workload.samples_per_device!r}) must be a number of "
                             f"samples")
        self.seed = count("seed", seed)
        self.a0 = finite("a0", a0)
        self.a_max = finite("a_max", a_max)
        self.rate = non_negative("rate", rate)
        self.download_bits = non_negative("download_bits", download_bits)
        self.model_bits = positive("model_bits", self.workload.model_bits)
        if self.workload.varies:  # I_k C_k D_k per device (a list or a table drawn from the seed)
            from .config import iterations_per_device, workload_per_device

            c, d = workload_per_device(self.workload, self.n_devices, self.seed)
            i = iterations_per_device(self.workload, self.n_devices, self.seed)
            self.cycles_by_device = tuple(training_cycles(int(ik), float(ck), float(dk)) for ik, ck, dk in zip(i, c, d))
            self.cycles = float(np.mean(self.cycles_by_device))
        else:
            self.cycles = training_cycles(
                self.workload.local_iterations, self.workload.cycles_per_sample, self.workload.samples_per_device
            )
            self.cycles_by_device = None
        self.arrived_uploads = 0

    def accuracy(self, arrived_uploads: int) -> float:
        """The curve at ``arrived_uploads`` cumulative arrived uploads."""
        return self.a_max - (self.a_max - self.a0) * math.exp(-self.rate * arrived_uploads / self.n_devices)

    def plan_round(self, view: SystemView) -> RoundPlan:
        if view.n_devices != self.n_devices:
            raise ValueError(f"view.n_devices(={view.n_devices}) differs from the backend's "
                             f"n_devices(={self.n_devices})")
        if view.schedule is not None:  # the [resources] scheduling policy's ranking: its first K
            chosen = np.sort(np.asarray(view.schedule[:self.clients_per_round], dtype=np.int64))
        else:
            rng = np.random.default_rng((self.seed, view.round_index))
            chosen = np.sort(rng.choice(self.n_devices, size=self.clients_per_round, replace=False))
        work = tuple(
            DeviceWork(int(d), {"train": self._cycles_of(d)}, self.model_bits, self.download_bits) for d in chosen
        )
        return RoundPlan(work, {"K": float(self.clients_per_round)})

    def expected_work(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Each device's cycles and upload bits in a round (what a scheduling policy predicts before it took part)."""
        cycles = self.cycles_by_device if self.cycles_by_device is not None else (self.cycles,) * self.n_devices
        return cycles, (float(self.model_bits),) * self.n_devices

    def _cycles_of(self, device) -> float:
        """Device ``device``'s training cycles ``I · C_k · D_k`` (the same for all without per-device workloads)."""
        return self.cycles if self.cycles_by_device is None else self.cycles_by_device[int(device)]

    def complete_round(self, outcome: RoundOutcome) -> Mapping[str, float]:
        self.arrived_uploads += len(outcome.arrived)
        return {"accuracy": self.accuracy(self.arrived_uploads)}

    # -- asynchronous aggregation (edgesim.asynchrony.AsyncBackend): U counts the updates applied
    def update_work(self, device: int) -> DeviceWork:
        """One update of ``device``: the round's work (``I * C * D`` cycles, ``model_bits`` up, the broadcast down)."""
        return DeviceWork(int(device), {"train": self._cycles_of(device)}, self.model_bits, self.download_bits)

    def start_update(self, update: int, device: int, version: int) -> None:
        """Nothing to keep: the curve has no model."""

    def aggregate(self, aggregation) -> Mapping[str, float]:
        self.arrived_uploads += len(aggregation.arrivals)
        return {"accuracy": self.accuracy(self.arrived_uploads)}

    def state_dict(self) -> dict[str, Any]:
        return {"arrived_uploads": self.arrived_uploads}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.arrived_uploads = count("arrived_uploads", state["arrived_uploads"])
