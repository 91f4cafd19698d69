"""The protocol between the engine (the clock) and a learning backend (the learning).

One round, as the data flows (docs/model/system_model.md): each round the engine hands the
backend a :class:`SystemView`; the backend answers with a :class:`RoundPlan`
(who computes how many cycles per phase, who uploads and downloads how many
bits); the engine runs that plan on the SimPy clock and hands back a
:class:`RoundOutcome` (who arrived, who was dropped, when); the backend learns
from what arrived and returns its metrics as plain floats, which the engine
stamps with the simulated time at which the round ended.

Plain Python types only: no torch, no numpy arrays in the protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Protocol, runtime_checkable


@dataclass(frozen=True)
class SystemView:
    """What the base station knows at the start of a round (round index from 0).

    Per-device tuples are indexed by device id ``0..n_devices-1``.
    ``uplink_rate_bps`` is each device's Shannon rate over the *whole* band with
    this round's channel gain (Eq. 8); the access scheme decides what it gets.
    ``schedule``: the ``[resources] scheduling`` policy's ranking of the devices
    (best first; devices it rules out left out), from which an algorithm that
    samples K devices takes the first K; ``None`` (``"random"``): its own draw.
    ``energy_spent_j`` and ``battery_left_j``: each device's energy spent so far
    (compute + radio, J) and what is left of its ``system.battery_j``; ``None``
    without batteries. ``serving_cell``: each device's serving cell (``0..n_cells-1``,
    :mod:`edgesim.cells`; ``None``: one cell); ``n_cells``: the number of cells. With several
    cells ``uplink_rate_bps`` is over the device's own cell's band (its sub-band under
    ``frequency_reuse``), without interference; ``bandwidth_hz`` stays ``[system] bandwidth_hz``.
    """

    round_index: int
    start_time_s: float
    round_budget_s: float
    n_devices: int
    bandwidth_hz: float
    noise_psd_w_per_hz: float
    access: str
    cpu_freq_hz: tuple[float, ...]
    tx_power_w: tuple[float, ...]
    channel_gain: tuple[float, ...]
    uplink_rate_bps: tuple[float, ...]
    schedule: Optional[tuple[int, ...]] = None
    energy_spent_j: Optional[tuple[float, ...]] = None
    battery_left_j: Optional[tuple[float, ...]] = None
    serving_cell: Optional[tuple[int, ...]] = None
    n_cells: int = 1


@dataclass(frozen=True)
class DeviceWork:
    """One device's part of a round.

    ``compute_cycles`` maps a phase name (``"train"``, ``"sr"``,
    ``"pseudo_label"``…) to CPU cycles; phases run back to back.
    ``upload_bits`` = 0 means the device does not upload this round.
    ``download_bits`` is what the device receives from the BS at round start.
    """

    device: int
    compute_cycles: Mapping[str, float] = field(default_factory=dict)
    upload_bits: float = 0.0
    download_bits: float = 0.0


@dataclass(frozen=True)
class RoundPlan:
    """The backend's decision for one round: the devices that take part and their work.

    ``info`` carries algorithm decisions worth logging (e.g. ``{"B": 10, "K": 10}``).
    ``server_cycles`` maps a phase name (``"train_sigma"``, ``"helpers"``…) to
    base-station CPU cycles run *before the broadcast*: the round starts with
    them and no device starts its download before they end.
    ``server_cycles_after`` are base-station cycles run *after the uploads*
    (e.g. FedBE's distillation): they start when every participant is done
    (or at the deadline), run only if at least one upload arrived, and the
    round ends when they end. Both take ``sum(cycles) / system.server_freq_hz``
    seconds; empty (the default) means no server phase and no server event.
    """

    work: tuple[DeviceWork, ...]
    info: Mapping[str, float] = field(default_factory=dict)
    server_cycles: Mapping[str, float] = field(default_factory=dict)
    server_cycles_after: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundOutcome:
    """What happened on the clock in one round.

    ``arrived``: devices whose upload completed, in completion order.
    ``dropped``: devices not done by the deadline (``"deadline"`` rounds) —
    still downloading, computing or uploading; whatever they sent is wasted.
    ``compute_end_s``/``upload_end_s``: absolute simulated times per device.
    ``server_cut``: the deadline fell inside the server's phase before the broadcast
    (``RoundPlan.server_cycles``): the phase did not finish and nothing was broadcast, so the
    round yields nothing — the backend keeps every model as it was (docs/model/system_model.md).
    ``over_the_air_noise_var``: under an over-the-air access scheme (AirComp, docs/model/access_schemes.md) the base
    station received the sum of the arrived updates plus Gaussian noise of this variance on each parameter, which
    the aggregate must carry; ``None``: digital uploads, each received exactly.
    """

    round_index: int
    start_time_s: float
    end_time_s: float
    arrived: tuple[int, ...]
    dropped: tuple[int, ...]
    compute_end_s: Mapping[int, float]
    upload_end_s: Mapping[int, float]
    server_cut: bool = False
    over_the_air_noise_var: Optional[float] = None

    @property
    def duration_s(self) -> float:
        return self.end_time_s - self.start_time_s


@dataclass(frozen=True)
class DeviceLoss:
    """One device's training-loss statistic of a round: what Oort's statistical utility needs.

    ``sum_sq_loss``: ``Σ_{k∈B_i} L(k)²``, the sum over the samples ``B_i`` the
    device trained on of each sample's squared loss (nats²); ``n_samples``:
    ``|B_i|``. The utility is ``|B_i| sqrt(Σ L(k)² / |B_i|)`` (Lai et al., OSDI
    2021, §4.2; :func:`edgesim.resources.formulas.oort_statistical_utility`).
    A backend reports it through ``device_losses()`` (see
    :class:`LearningBackend`); the built-in algorithms record it where their
    local training passes (``edgesim.learning.algorithms.common.train_devices``).
    """

    sum_sq_loss: float
    n_samples: int


class Diverged(RuntimeError):
    """A backend's training produced a NaN or infinite loss (``complete_round`` raises it).

    The run keeps what the algorithm had done until then and what the other
    algorithms of the run do, and marks the algorithm as diverged.
    """


@runtime_checkable
class LearningBackend(Protocol):
    """What the engine calls. Implementations: :class:`edgesim.curve.ParametricBackend`
    (torch-free) and the algorithms of ``learning/``."""

    def plan_round(self, view: SystemView) -> RoundPlan:
        """Decide the round's work from the system view."""
        ...

    def complete_round(self, outcome: RoundOutcome) -> Mapping[str, float]:
        """Learn from the uploads that arrived; return metrics (e.g. ``{"accuracy": 0.81}``)."""
        ...

    # Optional, read with getattr (not part of the runtime check):
    #   expected_work() -> (cycles, upload_bits): what each device would do in a round, before it has taken part.
    # Loss feedback is its own protocol, LossFeedback below: a backend may be one, or the run hands the engine
    # another (Simulation(device_losses=...): the built-in algorithms' shared log, edgesim.learning.algorithms.common).


@runtime_checkable
class LossFeedback(Protocol):
    """The loss feedback of the round protocol: what reports each trained device's :class:`DeviceLoss`.

    The engine calls ``device_losses()`` after every ``complete_round`` when a ``[resources]`` scheduling policy
    is set, and hands the statistics to the policy (Oort's statistical utility, docs/model/resource_policies.md); each
    call returns the devices trained since the last one. A :class:`LearningBackend` may be one itself; a run whose
    algorithms share one log hands the engine that log (``Simulation(device_losses=feedback.device_losses)``).
    """

    def device_losses(self) -> Mapping[int, DeviceLoss]:
        """Each device trained since the last call: its loss statistic."""
        ...


def loss_feedback(*sources) -> Optional[Callable[[], Mapping[int, DeviceLoss]]]:
    """The ``device_losses`` of the first of ``sources`` that is a :class:`LossFeedback` (``None`` when none is):
    the callable the engine reads after every round."""
    for source in sources:
        if isinstance(source, LossFeedback):
            return source.device_losses
    return None
