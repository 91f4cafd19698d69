"""The built-in resource policies and the one registry of policies (plugins register here too).

A policy is one class with one method, ``allocate(self, r)``, where ``r`` is the
round's :class:`~edgesim.resources.round.RoundResources` (the devices, their
channels, work and limits, and what the policies before it decided). It returns
one number per device of ``r`` (in ``r.devices`` order):

- ``scheduling``: a score per device of the cell (higher is picked first;
  ``-inf``: never), or ``None`` for the algorithm's own draw;
- ``bandwidth``: each device's uplink band in Hz (their sum at most the band),
  or ``None`` for the link's own sharing (TDMA: the whole band in turn; FDMA:
  processor sharing);
- ``power``: each device's transmit power in W (at most its configured one);
- ``cpu_freq``: each device's CPU frequency in Hz (at most its configured one).

The policies run in the order bandwidth → cpu_freq → power each round (the
scheduling first, before the algorithm plans). A class declares what it applies to
(:func:`declared`; a scenario that breaks it is refused in one line before anything runs):

- ``access``: the access schemes (default: every one);
- ``needs``: the other keys' values it needs;
- ``round_modes``: ``"sync"``, ``"deadline"`` (rounds) and ``"async"`` (a free slot of any asynchronous rule,
  one update at a time); default: every mode for a scheduling policy (it ranks the devices a slot takes the
  first idle one of), the two round modes for the others; ``not_async``: why it has no meaning for a free slot;
- ``needs_deadline``: it plans against a latency target τ (a round has T/G; an asynchronous run needs
  ``[budget] deadline_s``, each update's);
- ``tdma_order``: the TDMA uplink's waiting line (``"arrival"``, default, or ``"shortest_first"``);
- ``ranks`` (a scheduling policy): whether it hands over a ranking (default); ``False``: never, the
  algorithm's own draw (the engines then keep no scheduler).

A bandwidth policy may also have ``round_time_s(self, r)``: the time (s from the round's start, at most τ)
the round's devices plan to end by; the frequency and power policies then plan against it instead of τ
(``min_energy`` with ``energy_weight`` < 1).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import formulas, min_energy
from .registry import (  # noqa: F401 - the registry, named here too (plugins and tests import it from here)
    KINDS,
    POLICIES,
    ROUND_MODES,
    Declared,
    declared,
    register_policy,
    summary,
)

# --------------------------------------------------------------------------- bandwidth


@register_policy("bandwidth", "equal")
class EqualBandwidth:
    """Today's sharing: TDMA, the whole band in turn; FDMA, processor sharing (B/n among the uploads on air).

    Dynamic (a device's share grows as others finish), not EB-FDMA's static B/K — that is ``equal_static``."""

    round_modes = ROUND_MODES

    def allocate(self, r) -> Optional[np.ndarray]:
        return None


@register_policy("bandwidth", "proportional")
class ProportionalBandwidth:
    """FDMA: each uploader holds b_k = B s_k / Σ s_j for the round (in proportion to its upload bits)."""

    access = ("fdma",)
    not_async = "its bands are planned for one round's set of uploaders, and an asynchronous band's uploaders change " \
                "with every start and arrival"

    def allocate(self, r) -> np.ndarray:
        return formulas.proportional_bands_hz(r.bandwidth_hz, r.upload_bits)


@register_policy("bandwidth", "min_max_time")
class MinMaxTimeBandwidth:
    """FDMA: the bands that make every uploader finish at one time, min_b max_k (a_k + s_k / r_k(b_k)), Σ b = B."""

    access = ("fdma",)
    not_async = ProportionalBandwidth.not_async

    def allocate(self, r) -> np.ndarray:
        return formulas.min_max_time_bands_hz(r.bandwidth_hz, r.ready_s(), r.upload_bits, r.channel_gain,
                                              r.tx_power_w, r.noise_psd_w_per_hz)


@register_policy("bandwidth", "equal_static")
class EqualStaticBandwidth:
    """FDMA: B / K to each of the K uploaders, fixed for the round (EB-FDMA, the literature's "equal bandwidth")."""

    access = ("fdma",)
    round_modes = ("sync", "deadline")
    not_async = "its B / K is one round's split among its K uploaders, and an asynchronous update uploads alone " \
                "while the others come and go"

    def allocate(self, r) -> np.ndarray:
        return formulas.equal_bands_hz(r.bandwidth_hz, r.upload_bits)


@register_policy("bandwidth", "min_energy")
class MinEnergyBandwidth:
    """FDMA: the bands of the least-energy round, w·E + (1 − w)·λ·T (Yang et al., IEEE TWC 2021), solved exactly.

    With ``cpu_freq = "joint"`` and ``power = "min_energy"`` (which it needs) the round runs the optimum's powers
    and frequencies (:mod:`edgesim.resources.min_energy`)."""

    access = ("fdma",)
    needs = {"power": "min_energy", "cpu_freq": "joint"}
    options = ("energy_weight", "time_price_j_per_s", "cpu_freq_min_hz")
    round_modes = ("sync", "deadline")
    needs_deadline = True
    not_async = "it solves one round's bands, powers and frequencies together for that round's uploaders and its " \
                "deadline, and an asynchronous update uploads alone while the others come and go"

    @staticmethod
    def _args(r):
        return (r.server_before_s + r.download_s, r.cycles, r.upload_bits, r.channel_gain, r.noise_psd_w_per_hz,
                r.kappa, r.cpu_freq_min_hz, r.cpu_freq_max_hz, r.tx_power_max_w)

    def round_time_s(self, r) -> float:
        """The round time T the devices plan to end by (s from the round's start): τ at ``energy_weight`` = 1."""
        return min_energy.weighted_round_time_s(r.energy_weight, r.time_price_j_per_s, r.bandwidth_hz, r.deadline_s,
                                                *self._args(r))

    def allocate(self, r) -> np.ndarray:
        return min_energy.min_energy_bands_hz(r.bandwidth_hz, r.deadline_s, *self._args(r))


@register_policy("bandwidth", "shortest_first")
class ShortestFirstBandwidth:
    """TDMA: the waiting upload with the shortest airtime goes on air next (non-preemptive), whole band."""

    access = ("tdma",)
    round_modes = ROUND_MODES
    tdma_order = "shortest_first"

    def allocate(self, r) -> Optional[np.ndarray]:
        return None  # the order lives in the link (edgesim.links.TdmaUplink, order="shortest_first")


# --------------------------------------------------------------------------- CPU frequency


@register_policy("cpu_freq", "max")
class MaxFrequency:
    """Each device computes at its configured CPU frequency (today's)."""

    round_modes = ROUND_MODES

    def allocate(self, r) -> np.ndarray:
        return r.cpu_freq_max_hz


@register_policy("cpu_freq", "min_energy")
class MinEnergyFrequency:
    """DVFS: the lowest frequency that meets the round's deadline given the upload,
    f = C / (τ − t_up) in [f_min, f_max]."""

    options = ("cpu_freq_min_hz",)
    round_modes = ROUND_MODES
    needs_deadline = True

    def allocate(self, r) -> np.ndarray:
        return formulas.min_energy_freq_hz(r.cycles, r.compute_window_s(), r.cpu_freq_min_hz, r.cpu_freq_max_hz)


@register_policy("cpu_freq", "joint")
class JointFrequency:
    """FDMA: per device, the split of the time left between compute and upload that minimises κ C f² + p t_up."""

    access = ("fdma",)
    needs = {"power": "min_energy"}
    options = ("cpu_freq_min_hz",)
    not_async = "it splits a round's time left between compute and an upload on the round's band, and an " \
                "asynchronous upload's FDMA share changes with every arrival"

    def allocate(self, r) -> np.ndarray:
        f, _ = formulas.joint_split(r.cycles, r.upload_bits, r.upload_band_hz(), r.time_left_s(), r.channel_gain,
                                    r.noise_psd_w_per_hz, r.kappa, r.cpu_freq_min_hz, r.cpu_freq_max_hz,
                                    r.tx_power_max_w)
        return f


# --------------------------------------------------------------------------- power


@register_policy("power", "fixed")
class FixedPower:
    """Each device transmits at its configured power (today's)."""

    round_modes = ROUND_MODES

    def allocate(self, r) -> np.ndarray:
        return r.tx_power_max_w


@register_policy("power", "min_energy")
class MinEnergyPower:
    """FDMA: the least power that ends the upload within the device's time left, p = (2^{s/(bτ)} − 1) N0 b / g."""

    access = ("fdma",)
    round_modes = ROUND_MODES
    needs_deadline = True

    def allocate(self, r) -> np.ndarray:
        return formulas.min_energy_power_w(r.upload_bits, r.upload_band_hz(), r.upload_window_s(), r.channel_gain,
                                           r.tx_power_max_w, r.noise_psd_w_per_hz)
