"""Scheduling policies: which devices take part in a round, as a ranking the algorithm takes its K from.

A scheduling policy scores every device of the cell (higher goes first; ``-inf``:
never this round); the engine ranks them, ties broken by the round's common
random numbers (``default_rng((seed, round, STREAM_SCHEDULE))``, the same for
every policy and algorithm of a sweep), and hands the ranking to the backend in
:attr:`edgesim.backend.SystemView.schedule`; the algorithm takes the first K
(:func:`ranked`). ``"random"`` hands over no ranking: the algorithm draws as it
always has. What a policy predicts of a device's work (cycles, upload bits) is
what the device did the last time it took part, else the mean over the devices
seen so far, else what the backend expects (``expected_work``), else nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import formulas
from .policies import declared, register_policy

STREAM_SCHEDULE = 0x5C  # the scheduling policies' random stream (beside the channel's 0xC0-0xC4)


@dataclass(frozen=True)
class ScheduleView:
    """What a scheduling policy sees at a round's start, one entry per device of the cell (ids 0..N−1).

    ``rate_bps``: the full-band rate with this round's gain (Eq. (8)); ``cycles``
    and ``upload_bits``: the predicted work; ``last_round``: the round each device
    last took part in (−1: never); ``rounds_taken``: how many rounds it took part
    in; ``duration_s``: its last round's compute + upload time (s; ``nan``: never);
    ``utility``: the backend's statistical utility of its last update (Oort's
    ``|B_i| sqrt(mean loss²)``; ``nan``: none reported); ``uniform``: the round's
    common random numbers in [0, 1); ``pointer``: round robin's next device;
    ``sharing``: K, the devices a round takes (the backend's, else the last
    round's count; 0: not known yet); ``config``: the ``[resources]`` table (its
    options); ``utility_history``: each past round's summed reported utility;
    ``energy_spent_j``: each device's compute + radio energy so far (J);
    ``battery_j``: its ``system.battery_j`` (J; ``None``: unlimited).
    """

    round_index: int
    n_devices: int
    access: str
    bandwidth_hz: float
    deadline_s: float
    channel_gain: np.ndarray
    rate_bps: np.ndarray
    cpu_freq_hz: np.ndarray
    cycles: np.ndarray
    upload_bits: np.ndarray
    last_round: np.ndarray
    rounds_taken: np.ndarray
    duration_s: np.ndarray
    utility: np.ndarray
    uniform: np.ndarray
    pointer: int
    exploration: float
    alpha: float
    sharing: int = 1
    config: Optional[object] = None
    utility_history: tuple = ()
    energy_spent_j: Optional[np.ndarray] = None
    battery_j: Optional[np.ndarray] = None

    def predicted_s(self) -> np.ndarray:
        """Each device's predicted compute + upload time alone on the band, ``C / f + s / r`` (s)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where(self.upload_bits > 0, self.upload_bits / self.rate_bps, 0.0)
        return self.cycles / self.cpu_freq_hz + up

    def shared_rate_bps(self) -> np.ndarray:
        """The rate on the band a device will get (bit/s): FDMA ``B / K`` (``K`` = ``sharing``, the uploads that share
        the band: ``equal_static``'s share and the least processor sharing gives while all K are on air), Eq. (8)
        rescaled from the full-band rate (``g p / N0 = B (2^{r/B} − 1)``); TDMA (its turn on the whole band) or
        ``K`` ≤ 1: the full-band rate."""
        if self.access != "fdma" or self.sharing <= 1:
            return self.rate_bps
        b = self.bandwidth_hz
        snr_hz = b * np.expm1(np.log(2.0) * self.rate_bps / b)
        share = b / self.sharing
        return share * np.log1p(snr_hz / share) / np.log(2.0)

    def predicted_shared_s(self) -> np.ndarray:
        """Each device's predicted compute + upload time on the band it will get, ``C / f + s / r(B / K)`` (s)."""
        rate = self.shared_rate_bps()
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where(self.upload_bits > 0, self.upload_bits / rate, 0.0)
        return self.cycles / self.cpu_freq_hz + up

    def stragglers(self) -> np.ndarray:
        """The devices that cannot meet the round's budget τ even alone on the whole band at their maximum power and
        frequency, ``C / f_max + s / r(B, p_max) > τ`` (bool per device)."""
        return self.predicted_s() > self.deadline_s


def ranked(scores: np.ndarray, uniform: np.ndarray) -> tuple[int, ...]:
    """Device ids by score, highest first, ties by the round's random numbers; ``-inf`` scores left out."""
    order = np.lexsort((uniform, -np.asarray(scores, dtype=float)))
    keep = np.isfinite(scores[order]) | (scores[order] == np.inf)
    return tuple(int(d) for d in order[keep])


@register_policy("scheduling", "random")
class RandomScheduling:
    """The algorithm's own uniform draw of K devices (today's; no ranking handed over)."""

    ranks = False

    def allocate(self, v: ScheduleView) -> Optional[np.ndarray]:
        return None


@register_policy("scheduling", "round_robin")
class RoundRobinScheduling:
    """Devices in turn: from the pointer on, cyclically (the pointer moves past the devices taken)."""

    def allocate(self, v: ScheduleView) -> np.ndarray:
        return -((np.arange(v.n_devices) - v.pointer) % v.n_devices).astype(float)


@register_policy("scheduling", "best_channel")
class BestChannelScheduling:
    """The highest predicted uplink rate first (full band, this round's gain, Eq. (8))."""

    def allocate(self, v: ScheduleView) -> np.ndarray:
        return v.rate_bps


@register_policy("scheduling", "fastest")
class FastestScheduling:
    """The shortest predicted compute + upload first, C / f + s / r (s)."""

    def allocate(self, v: ScheduleView) -> np.ndarray:
        return -v.predicted_s()


@register_policy("scheduling", "deadline_feasible")
class DeadlineFeasibleScheduling:
    """Only devices that can finish within the round's budget on the band they will get, random among them.

    C / f + s / r ≤ τ with r on FDMA's B / K (TDMA: the whole band)."""

    needs_deadline = True

    def allocate(self, v: ScheduleView) -> np.ndarray:
        return np.where(v.predicted_shared_s() <= v.deadline_s, v.uniform, -np.inf)


@register_policy("scheduling", "age")
class AgeScheduling:
    """Pure staleness: the longest since last scheduled first (never scheduled: first of all); round robin in effect."""

    def allocate(self, v: ScheduleView) -> np.ndarray:
        return np.where(v.last_round < 0, np.inf, v.round_index - v.last_round).astype(float)


@register_policy("scheduling", "age_channel")
class AgeChannelScheduling:
    """Age of update with the channel (Yang, Arafa, Quek, Poor, ICASSP 2020): A_k^ν · log2(1 + SNR_k) first."""

    options = ("age_exponent",)

    def allocate(self, v: ScheduleView) -> np.ndarray:
        snr_hz = v.bandwidth_hz * np.expm1(np.log(2.0) * v.rate_bps / v.bandwidth_hz)  # g p / N0 from r(B)
        return formulas.age_channel_priority(v.round_index, v.last_round, snr_hz / v.bandwidth_hz,
                                             max(int(v.sharing), 1), v.config.age_exponent)


@register_policy("scheduling", "oort")
class OortScheduling:
    """Oort as published (Lai et al., OSDI 2021, Alg. 1): utility sampling, decaying ε, pacer, blacklist.

    Utility-proportional sampling above c × the K-th utility, (T / t_i)^α for stragglers."""

    options = ("oort_exploration", "oort_decay", "oort_exploration_min", "oort_alpha", "oort_cutoff",
               "oort_pacer_window", "oort_pacer_step", "oort_blacklist_rounds")
    needs_deadline = True

    def allocate(self, v: ScheduleView) -> np.ndarray:
        c = v.config
        return formulas.oort_selection(
            v.round_index, v.sharing, v.utility, v.duration_s, v.last_round, v.rounds_taken, v.utility_history,
            v.rate_bps, v.uniform, deadline_s=v.deadline_s, exploration=c.oort_exploration, decay=c.oort_decay,
            exploration_min=c.oort_exploration_min, alpha=c.oort_alpha, cutoff=c.oort_cutoff,
            pacer_window=c.oort_pacer_window, pacer_step=c.oort_pacer_step, blacklist_rounds=c.oort_blacklist_rounds)


class Scheduler:
    """The ``[resources] scheduling`` policy with what it remembers of past rounds (checkpointed with the engine).

    ``expected_work``: the backend's ``(cycles, upload_bits)`` per device before a
    device has taken part (sequences of N numbers), or ``None``. ``deadline_s``: the
    policies' budget τ (s); ``None``: the round's (``[budget] deadline_s`` in
    ``"deadline"`` rounds, else T/G). An asynchronous run asks it for one free slot's
    device (:meth:`scores`; :mod:`edgesim.asynchrony`, docs/model/asynchrony.md).

    ``devices``: the device ids it ranks and remembers (a hierarchical run's cell, docs/model/hierarchy.md);
    ``None``: all of them. Its scores, gains and rates are then those devices' (in that order), its ranking and
    :attr:`excluded` their ids, and each device's tie-breaking random number the one it has over all devices.
    """

    def __init__(self, config, system, budget, seed: int, expected_work=None, deadline_s=None,
                 clients_per_round=None, devices=None):
        from .policies import POLICIES

        self.config = config
        self.name = config.scheduling
        self.policy = POLICIES["scheduling"][self.name]()
        self.seed = seed
        self.n_all = int(system.n_devices)
        self.devices = None if devices is None else np.asarray(devices, dtype=np.int64)
        self._local = None if devices is None else {int(d): i for i, d in enumerate(self.devices)}
        mine = slice(None) if devices is None else self.devices
        n = self.n_all if devices is None else len(self.devices)
        self.n = n
        from .round import policy_access

        self.access = policy_access(system.access)
        self.bandwidth_hz = float(system.bandwidth_hz)
        if deadline_s is None:
            deadline_s = budget.round_deadline_s if budget.round_mode == "deadline" else budget.round_budget_s
        self.deadline_s = float(deadline_s)
        self.cpu_freq_hz = np.asarray(system.cpu_freqs_hz, dtype=float)[mine]
        if expected_work is not None:
            self.expected_cycles = np.asarray(expected_work[0], dtype=float).reshape(self.n_all)[mine]
            self.expected_bits = np.asarray(expected_work[1], dtype=float).reshape(self.n_all)[mine]
        else:
            self.expected_cycles = self.expected_bits = None
        self.last_round = np.full(n, -1, dtype=np.int64)
        self.rounds_taken = np.zeros(n, dtype=np.int64)
        self.duration_s = np.full(n, np.nan)
        self.cycles = np.full(n, np.nan)
        self.upload_bits = np.full(n, np.nan)
        self.utility = np.full(n, np.nan)
        self.pointer = 0
        # K, the uploads the band is shared among: the backend's, else how many took part in the last round
        self.clients_per_round = None if clients_per_round is None else int(clients_per_round)
        self.last_taken = 0
        self.excluded: tuple[int, ...] = ()  # the last ranking's stragglers (stragglers = "exclude")
        self.utility_history: list[float] = []  # each round's summed reported utility (Oort's pacer)
        self.energy_spent_j = np.zeros(n)  # each device's compute + radio energy so far (J)
        batteries = getattr(system, "batteries_j", None)
        self.battery_j = None if batteries is None else np.asarray(batteries, dtype=float)[mine]

    @staticmethod
    def needed(config) -> bool:
        """Whether a run with this ``[resources]`` table ranks its devices: its scheduling policy ranks (it
        declares ``ranks``), or stragglers are excluded (``stragglers = "exclude"``: the uniform draw, stragglers
        left out)."""
        return declared("scheduling", config.scheduling).ranks or getattr(config, "stragglers", "keep") == "exclude"

    def _predicted(self, seen: np.ndarray, expected: Optional[np.ndarray]) -> np.ndarray:
        """What a device did last time; else what the backend expects; else the mean of the devices seen; else 0."""
        known = ~np.isnan(seen)
        if expected is not None:
            fill = expected
        else:
            fill = np.full(self.n, float(seen[known].mean()) if known.any() else 0.0)
        return np.where(known, seen, fill)

    def schedule(self, round_index: int, gains, rates) -> Optional[tuple[int, ...]]:
        """The round's ranking of the devices (``None``: the algorithm's own draw)."""
        answer = self.scores(round_index, gains, rates)
        if answer is None:
            return None
        order = ranked(*answer)
        return order if self.devices is None else tuple(int(self.devices[i]) for i in order)

    def scores(self, round_index: int, gains, rates) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """The policy's score of every device and the round's common random numbers (ties), checked; ``None``:
        the algorithm's own draw. ``round_index`` keys the random numbers (an asynchronous run: the update's)."""
        from .round import PolicyError

        uniform = np.random.default_rng((self.seed, round_index, STREAM_SCHEDULE)).random(self.n_all)
        if self.devices is not None:
            uniform = uniform[self.devices]
        view = ScheduleView(
            round_index=round_index, n_devices=self.n, access=self.access, bandwidth_hz=self.bandwidth_hz,
            deadline_s=self.deadline_s, channel_gain=np.asarray(gains, dtype=float),
            rate_bps=np.asarray(rates, dtype=float), cpu_freq_hz=self.cpu_freq_hz,
            cycles=self._predicted(self.cycles, self.expected_cycles),
            upload_bits=self._predicted(self.upload_bits, self.expected_bits),
            last_round=self.last_round.copy(), rounds_taken=self.rounds_taken.copy(),
            duration_s=self.duration_s.copy(), utility=self.utility.copy(), uniform=uniform, pointer=self.pointer,
            exploration=float(self.config.oort_exploration), alpha=float(self.config.oort_alpha),
            sharing=self.clients_per_round if self.clients_per_round is not None else self.last_taken,
            config=self.config, utility_history=tuple(self.utility_history),
            energy_spent_j=self.energy_spent_j.copy(), battery_j=self.battery_j,
        )
        where = f"[resources] scheduling = {self.name!r}: round {round_index}"
        try:
            scores = self.policy.allocate(view)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - a plugin's failure (sys.exit too), reported in one line
            raise PolicyError(f"{where}: raised {type(e).__name__}: {e}; expected an answer") from None
        exclude = getattr(self.config, "stragglers", "keep") == "exclude"
        if scores is None:
            if not exclude:
                return None
            scores = uniform  # the algorithm's uniform draw, as a ranking of the round's random numbers
        try:
            scores = np.asarray(scores, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise PolicyError(f"{where}: returned {scores!r}; expected {self.n} scores") from None
        if scores.size != self.n or np.isnan(scores).any():
            raise PolicyError(f"{where}: returned {scores.size} scores (nan: {int(np.isnan(scores).sum())}); "
                              f"expected {self.n} numbers, one per device (-inf: not this round), none nan")
        if exclude:
            late = view.stragglers()
            late_ids = np.flatnonzero(late) if self.devices is None else self.devices[late]
            self.excluded = tuple(int(d) for d in late_ids)
            scores = np.where(late, -np.inf, scores)
        return scores, uniform

    def observe(self, round_index: int, rows, work_by_device, losses=None) -> None:
        """After a round: who took part (a device with cycles or an upload), its work and its time; ``losses``
        (device → :class:`edgesim.backend.DeviceLoss`, the backend's report) set each reported device's
        statistical utility (:func:`formulas.oort_statistical_utility`), kept until it reports again. Device ids
        are the run's; with ``devices``, rows and losses of other devices are not this scheduler's."""
        mine = self._local_id
        taken = 0
        for row in rows:
            work = work_by_device.get(row.device)
            if work is None or mine(row.device) is None:
                continue
            cycles = float(sum(work.compute_cycles.values()))
            if cycles <= 0 and work.upload_bits <= 0:
                continue  # a listener
            d = mine(row.device)
            taken += 1
            self.last_round[d] = round_index
            self.rounds_taken[d] += 1
            self.cycles[d] = cycles
            self.upload_bits[d] = float(work.upload_bits)
            self.duration_s[d] = row.download_s + row.compute_s + row.upload_airtime_s
        for row in rows:
            if mine(row.device) is not None:
                self.energy_spent_j[mine(row.device)] += row.radio_energy_j + row.compute_energy_j
        self.pointer = (self.pointer + taken) % self.n
        self.last_taken = taken
        heard = 0.0
        for device, loss in (losses or {}).items():
            d = mine(int(device))
            if d is None:
                continue
            self.utility[d] = formulas.oort_statistical_utility(loss.sum_sq_loss, loss.n_samples)
            heard += self.utility[d]
        self.utility_history.append(heard)

    def _local_id(self, device: int) -> Optional[int]:
        """Where ``device`` (the run's id) is in this scheduler's arrays; ``None``: not one of its devices."""
        return int(device) if self._local is None else self._local.get(int(device))

    def started(self, index: int, device: int) -> None:
        """An asynchronous run started update ``index`` on ``device``: its age counts from here; round robin's
        pointer moves past it."""
        self.last_round[device] = index
        self.rounds_taken[device] += 1
        self.pointer = (device + 1) % self.n

    def finished(self, device: int, cycles: float, upload_bits: float, duration_s: float) -> None:
        """An asynchronous update of ``device`` arrived: its work and its download + compute + airtime (s)."""
        self.cycles[device] = cycles
        self.upload_bits[device] = upload_bits
        self.duration_s[device] = duration_s

    def state_dict(self) -> dict:
        return {"last_round": self.last_round.tolist(), "rounds_taken": self.rounds_taken.tolist(),
                "duration_s": self.duration_s.tolist(), "cycles": self.cycles.tolist(),
                "upload_bits": self.upload_bits.tolist(), "utility": self.utility.tolist(), "pointer": self.pointer,
                "last_taken": self.last_taken, "utility_history": list(self.utility_history),
                "energy_spent_j": self.energy_spent_j.tolist()}

    def load_state_dict(self, state) -> None:
        self.last_round = np.asarray(state["last_round"], dtype=np.int64)
        self.rounds_taken = np.asarray(state["rounds_taken"], dtype=np.int64)
        for key in ("duration_s", "cycles", "upload_bits", "utility"):
            setattr(self, key, np.asarray(state[key], dtype=float))
        self.pointer = int(state["pointer"])
        self.last_taken = int(state.get("last_taken", 0))
        self.utility_history = [float(x) for x in state.get("utility_history", [])]
        self.energy_spent_j = np.asarray(state.get("energy_spent_j", np.zeros(self.n)), dtype=float)
