"""Runs that end and schedule someone: what a scenario is refused for before anything runs (docs/use/run_folders.md,
the fault matrix).

An asynchronous run ends after ``budget.rounds`` aggregations; each needs updates that finish, and an update
finishes only while its device stays online. A run whose aggregations can never happen would run forever (its
clock turning through availability switches and lost updates), so it is refused in one line naming the key:

- ``[async] buffer_size`` larger than the cell: FedBuff's buffer waits for more updates than there are devices;
- ``[async] eval_every`` larger than the run's aggregations: no aggregation would be evaluated;
- ``[availability]`` Markov periods below :data:`MIN_PERIOD_S` (the clock would switch devices on and off without
  end), or so long offline that no device is expected online within the run's budget (:func:`expected_online_starts`);
- a ``trace`` with no online interval at all;
- (:func:`check_updates_can_finish`, once the work of an update is known) online periods so short that no device's
  quickest update can finish while it stays online: with exponential online periods of mean ``mean_on_s``, an update
  of ``d`` seconds finishes with probability ``exp(−d / mean_on_s)``; below ``exp(−`` :data:`MAX_UPDATES_PER_PERIOD`
  ``)`` it never does in practice;
- (:func:`check_deadline_can_be_met`) ``[resources] scheduling = "deadline_feasible"`` with a deadline that no device's
  round meets even alone with the whole band at full power and CPU frequency, on the mean channel: the policy would
  choose no device in any round (not refused with Rayleigh fading, mobility or estimated CSI: a lucky round might).

Every other number of ``[async]``, ``[availability]`` and the Oort keys of ``[resources]`` follows the algorithm
options' rule (:func:`edgesim.config.check_option_scale`: at most 1e6 times its default's magnitude).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Callable, Optional

from edgesim.asynchrony import ASYNC_MODES, AsyncConfig
from edgesim.availability import AvailabilityConfig, read_trace, stationary_online_fraction
from edgesim.config import BudgetConfig, ConfigError, SystemConfig, check_option_scale, field_meaning

MIN_PERIOD_S = 1e-3
"""The shortest mean online or offline period of the Markov model (s): a device switching more often than a thousand
times a second is no wireless device's, and the clock would spend its time switching."""

MIN_ONLINE_STARTS = 0.01
"""The fewest online periods expected to start within the budget T over all devices (:func:`expected_online_starts`):
below it, no device is expected online while the run lasts."""

MAX_UPDATES_PER_PERIOD = 20.0
"""An update longer than this many mean online periods (``d > 20 · mean_on_s``) finishes with probability below
``e^−20 ≈ 2e−9``: it never does."""

RESOURCE_SCALED = ("oort_exploration", "oort_alpha")  # [resources] keys under the options' rule (others have ranges)


def expected_online_starts(n_devices: int, mean_on_s: float, mean_off_s: float, horizon_s: float) -> float:
    """Expected number of online periods over ``n_devices`` devices within ``[0, horizon_s]``: those online at 0
    (the stationary fraction ``p = on / (on + off)`` each) plus the periods starting later, one per cycle of mean
    length ``on + off``: ``n · (p + horizon / (on + off))`` (an alternating renewal process; units: periods)."""
    cycle_s = mean_on_s + mean_off_s
    return n_devices * (stationary_online_fraction(mean_on_s, mean_off_s) + horizon_s / cycle_s)


def update_finish_probability(update_s: float, mean_on_s: float) -> float:
    """The probability that an update of ``update_s`` seconds finishes before its device goes offline, with online
    periods exponential of mean ``mean_on_s`` (memoryless: ``exp(−update_s / mean_on_s)``)."""
    return math.exp(-update_s / mean_on_s)


def _scaled(cfg: Any, table: str, where: str, keys: Optional[tuple[str, ...]] = None) -> None:
    for f in dataclasses.fields(cfg):
        if keys is not None and f.name not in keys:
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        try:
            check_option_scale(f.name, getattr(cfg, f.name), default, field_meaning(type(cfg), f.name))
        except ValueError as e:
            raise ConfigError(f"{where}: [{table}] {e}") from None


def check_scenario_ends(system: SystemConfig, budget: BudgetConfig, asynchrony: AsyncConfig,
                        availability: AvailabilityConfig, resources: Any, rounds: Optional[int], where: str) -> None:
    """Refuse (:class:`ConfigError`, one line: the table, the key, the value, why) a scenario whose run could never
    end or would schedule no device (the module docstring). ``rounds``: the run's rounds (``run.rounds`` or
    ``budget.rounds``)."""
    _scaled(asynchrony, "async", where)
    _scaled(availability, "availability", where)
    _scaled(resources, "resources", where, RESOURCE_SCALED)
    rounds = int(rounds if rounds is not None else budget.rounds)
    if budget.round_mode in ASYNC_MODES:
        if budget.round_mode == "fedbuff" and (asynchrony.buffer_size or 0) > system.n_devices:
            raise ConfigError(f"{where}: [async] buffer_size = {asynchrony.buffer_size}: FedBuff aggregates once that "
                              f"many updates have arrived, more than the {system.n_devices} devices of the cell "
                              f"([system] n_devices); expected at most {system.n_devices}")
        if asynchrony.eval_every > rounds:
            raise ConfigError(f"{where}: [async] eval_every = {asynchrony.eval_every}: the run has {rounds} "
                              f"aggregations, so none would be evaluated; expected at most {rounds}")
    if availability.model == "markov":
        for key in ("mean_on_s", "mean_off_s"):
            value = getattr(availability, key)
            if value < MIN_PERIOD_S:
                raise ConfigError(f"{where}: [availability] {key} = {value!r}: expected a plausible mean period, "
                                  f">= {MIN_PERIOD_S:g} s (a device switching more often is no wireless device's)")
        horizon_s = float(budget.total_time_s)
        starts = expected_online_starts(system.n_devices, availability.mean_on_s, availability.mean_off_s, horizon_s)
        if starts < MIN_ONLINE_STARTS:
            raise ConfigError(f"{where}: [availability] mean_off_s = {availability.mean_off_s!r}: with mean_on_s = "
                              f"{availability.mean_on_s!r} the {system.n_devices} devices are expected online "
                              f"{starts:.2g} times within the budget ([budget] total_time_s = {horizon_s:g} s): no "
                              f"device would take part; expected devices that come online")
    elif availability.model == "trace":
        intervals = read_trace(Path(availability.trace), system.n_devices)
        if not any(intervals):
            raise ConfigError(f"{where}: [availability] trace = {availability.trace!r}: holds no online interval, so "
                              f"no device is ever online; expected at least one row device,start_s,end_s")


def check_updates_can_finish(sc, build_backend: Callable) -> None:
    """An asynchronous run under Markov availability: refuse when no device's quickest update (its compute at full
    speed plus its upload over the whole band at round 0's channel, s) can finish within an online period
    (:data:`MAX_UPDATES_PER_PERIOD`); the run would lose every update and never aggregate. Builds the first
    algorithm's backend to ask it each device's work (``update_work``)."""
    if not sc.asynchronous or sc.availability.model != "markov":
        return
    import numpy as np

    from edgesim.asynchrony import AsyncBackend
    from edgesim.channel import ChannelModel
    from edgesim.radio import shannon_rate_bps

    backend = build_backend(sc.learning.run.algorithms[0])
    if not isinstance(backend, AsyncBackend) and callable(getattr(backend, "asynchronous", None)):
        backend = backend.asynchronous()
    if not isinstance(backend, AsyncBackend):
        return  # refused later, naming the algorithm
    system = sc.system
    gains = np.asarray(ChannelModel(system, sc.seed).gains(0), dtype=float)
    rates = shannon_rate_bps(float(system.bandwidth_hz), gains, np.asarray(system.tx_power_w, dtype=float),
                             system.noise_psd_w_per_hz)
    freqs = np.asarray(system.cpu_freqs_hz, dtype=float)
    times = []
    for d in range(system.n_devices):
        work = backend.update_work(d)
        times.append(sum(work.compute_cycles.values()) / freqs[d] + float(work.upload_bits) / float(rates[d]))
    quickest = int(np.argmin(times))
    mean_on_s = float(sc.availability.mean_on_s)
    if times[quickest] > MAX_UPDATES_PER_PERIOD * mean_on_s:
        p = update_finish_probability(times[quickest], mean_on_s)
        raise ConfigError(f"{sc.path}: [availability] mean_on_s = {mean_on_s!r}: the quickest update (device "
                          f"{quickest}: {times[quickest]:.3g} s of compute and upload) finishes before its device "
                          f"goes offline with probability {p:.2g}, so no aggregation would ever happen; expected "
                          f"mean_on_s >= {times[quickest] / MAX_UPDATES_PER_PERIOD:.3g} s")


def least_round_times_s(work: list[tuple[float, float]], system: SystemConfig, gains, seed: int = 0) -> "Any":
    """Each device's least time for one round's work alone (s): its ``C`` cycles at its maximum CPU frequency and its
    ``s`` upload bits over the whole band ``B`` at its maximum power, ``C / f_max + s / r(B, p_max)`` with ``r`` the
    Shannon rate of Eq. (8) (:func:`edgesim.radio.shannon_rate_bps`) — what ``deadline_feasible`` compares with its
    deadline (:meth:`edgesim.resources.scheduling.ScheduleView.predicted_s`). ``work``: ``(cycles, upload_bits)`` per
    device; ``gains``: the channel gains (linear); ``seed``: the run's, for the devices' cells (several cells: each
    device's band is its cell's, :func:`edgesim.cells.device_bands_hz`)."""
    import numpy as np

    from edgesim.radio import shannon_rate_bps

    cycles = np.array([c for c, _ in work], dtype=float)
    bits = np.array([b for _, b in work], dtype=float)
    band = float(system.bandwidth_hz)
    if system.n_cells > 1:  # several cells: each device's whole band is its cell's (its sub-band under reuse)
        from edgesim.cells import device_bands_hz
        from edgesim.channel import ChannelModel

        band = device_bands_hz(system, ChannelModel(system, seed).serving_cell)
    rates = shannon_rate_bps(band, np.asarray(gains, dtype=float), np.asarray(system.tx_power_w, dtype=float),
                             system.noise_psd_w_per_hz)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(bits > 0, bits / rates, 0.0)
    return cycles / np.asarray(system.cpu_freqs_hz, dtype=float) + up


def _per_device_work(sc, build_backend: Callable) -> Optional[list[tuple[float, float]]]:
    """The first algorithm's ``(cycles, upload_bits)`` per device as its scheduler predicts them: the backend's
    ``expected_work()``, else its asynchronous update's (``update_work``); ``None``: it tells neither."""
    from edgesim.asynchrony import AsyncBackend

    backend = build_backend(sc.learning.run.algorithms[0])
    expected = getattr(backend, "expected_work", None)
    if not sc.asynchronous and callable(expected):
        cycles, bits = expected()
        return [(float(c), float(b)) for c, b in zip(cycles, bits)]
    if not isinstance(backend, AsyncBackend) and callable(getattr(backend, "asynchronous", None)):
        backend = backend.asynchronous()
    if not isinstance(backend, AsyncBackend):
        return None
    works = [backend.update_work(d) for d in range(sc.system.n_devices)]
    return [(float(sum(w.compute_cycles.values())), float(w.upload_bits)) for w in works]


def check_deadline_can_be_met(sc, build_backend: Callable) -> None:
    """``[resources] scheduling = "deadline_feasible"``: refuse a deadline τ that no device's round meets even alone
    with the whole band at its maximum power and CPU frequency (:func:`least_round_times_s`): the policy would choose
    no device in any round (sync: τ is ``[budget] deadline_s`` in ``"deadline"`` rounds, else T/G; asynchronous:
    ``deadline_s``). The check is on the mean channel (path loss and shadowing, fixed for the run) and only refuses
    what is surely impossible: with ``rayleigh_fading``, mobility or an estimated CSI a lucky round might meet τ, so
    it says nothing there (the run's empty-round warning does)."""
    if sc.resources.scheduling != "deadline_feasible":
        return
    system, budget = sc.system, sc.budget
    if system.rayleigh_fading or system.mobility != "static" or system.csi not in (None, "perfect"):
        return
    if sc.asynchronous:
        if budget.deadline_s is None:
            return
        deadline_s = float(budget.deadline_s)
    else:
        deadline_s = float(budget.round_deadline_s if budget.round_mode == "deadline" else budget.round_budget_s)
    work = _per_device_work(sc, build_backend)
    if work is None:
        return
    import numpy as np

    from edgesim.channel import ChannelModel

    times = least_round_times_s(work, system, ChannelModel(system, sc.seed).gains(0), sc.seed)
    quickest = int(np.argmin(times))
    if times[quickest] > deadline_s:
        key = ("[budget] deadline_s" if budget.deadline_s is not None
               else "[budget] total_time_s / rounds (the round's budget T/G)")
        raise ConfigError(f"{sc.path}: {key} = {deadline_s:g} s: no device meets it even alone with the whole band "
                          f"at full power and CPU frequency (the quickest, device {quickest}, needs "
                          f"{times[quickest]:.3g} s of compute and upload), so [resources] scheduling = "
                          f"'deadline_feasible' would choose no device; expected a deadline >= {times[quickest]:.3g} s")
