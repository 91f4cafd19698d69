"""The registry of access schemes: how the devices of a cell share the uplink (``[system] access``).

A scheme is one class, registered by name with :func:`register_access`. The protocol (every method of
:class:`AccessScheme` may be overridden; ``transmit`` must be):

- ``Options``: a frozen dataclass of the scheme's options (the ``[access]`` table), each field with a default;
  it validates itself in ``__post_init__`` (``edgesim.config.fail`` for one line naming the key, the value and
  what was expected).
- ``__init__(env, cell, options)``: one link for the run's clock; ``cell`` is a :class:`Cell` (the band, the
  noise, the number of devices, the seed).
- ``begin_round(round_index, devices, gains, powers, bits)`` (only when ``rounds`` is true): the round's
  uploads, known at its start (ids, linear channel gains, transmit powers in W, bits), for schemes that decide
  per round (resource blocks, NOMA clusters, over-the-air aggregation).
- ``transmit(env, device, bits, channel_gain, tx_power_w, on_air=None, *, checked=False)``: a SimPy process step,
  ``transfer = yield from link.transmit(...)``, that calls ``on_air(transfer)`` when the transfer goes on air
  and returns the :class:`~edgesim.links.Transfer` with ``end_s``, ``airtime_s``, ``sent_bits`` (all of its bits),
  ``band_hz`` (the band it used, Hz, for ``devices.csv``) and ``resource_blocks`` (an integer count, or 0).
  On :class:`simpy.Interrupt` (a deadline, a device going offline) it records the bits sent so far
  (``sent_bits``), ``airtime_s`` and ``band_hz``, sets ``aborted`` and re-raises.
- ``set_noise_psd(noise_psd_w_per_hz)`` (optional): several cells (:mod:`edgesim.interference`): the noise plus
  the other cells' interference PSD (W/Hz) heard from now on; the link re-times its transfers on air. A scheme
  without it serves one cell only.

What a scheme declares (class attributes, not name lists elsewhere): ``policy_access`` — the access family
(``"tdma"`` or ``"fdma"``) whose ``[resources]`` bandwidth, power and frequency policies apply to it, ``None``
for none of the family-specific ones; ``banded`` — the registered scheme that runs a bandwidth policy's
per-device bands, ``None`` if bands do not apply; ``asynchronous`` — transfers may start at any instant (the
``fedasync``/``fedbuff`` round modes); ``digital`` — the airtime follows the bits (compression applies);
``rounds`` — it needs ``begin_round``; ``columns`` — the ``devices.csv`` columns it fills beyond the band
(``("resource_blocks",)`` for a scheme that counts resource blocks); ``assigns_blocks`` — a ``[resources]
resource_blocks`` policy applies to it; ``async_reason`` — why it has no asynchronous mode (when
``asynchronous`` is false); ``over_the_air`` — the base station receives the sum of the round's updates plus noise
(the link's ``noise_var`` per parameter after ``begin_round``), which the learning side must aggregate.

Torch-free, like all of ``edgesim/``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Optional

from ..config import ACCESS_NAMES, ConfigError, check_access_name
from ..registries import claim, source


@dataclass(frozen=True)
class NoOptions:
    """A scheme without options."""


@dataclass(frozen=True)
class Cell:
    """What every scheme is given about the cell: ``bandwidth_hz`` B (Hz), ``noise_psd_w_per_hz`` N0 (W/Hz),
    ``n_devices``, the run's ``seed`` (for a scheme's own random draws), ``tdma_order`` (the TDMA line's
    order: ``"arrival"`` or ``"shortest_first"``, set by ``[resources] bandwidth``) and the ``[resources]`` table
    (``resources``: its ``resource_blocks`` policy, for a scheme that assigns blocks)."""

    bandwidth_hz: float
    noise_psd_w_per_hz: float
    n_devices: int = 1
    seed: int = 0
    tdma_order: str = "arrival"
    resources: Any = None  # the [resources] table (an edgesim.resources.ResourcesConfig), for per-round policies


class AccessScheme:
    """The base of an access scheme (the protocol is in :mod:`edgesim.access.registry`'s docstring)."""

    name: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions
    policy_access: ClassVar[Optional[str]] = None
    banded: ClassVar[Optional[str]] = None
    asynchronous: ClassVar[bool] = True
    digital: ClassVar[bool] = True
    rounds: ClassVar[bool] = False
    columns: ClassVar[tuple[str, ...]] = ()
    assigns_blocks: ClassVar[bool] = False
    async_reason: ClassVar[str] = "its transfers need every device of a round known at the round's start"
    over_the_air: ClassVar[bool] = False

    def __init__(self, env, cell: Cell, options: Any = None):
        self.env = env
        self.cell = cell
        self.options = options if options is not None else self.Options()

    def begin_round(self, round_index: int, devices, gains, powers, bits) -> None:
        """The round's uploads, known at its start (only called when ``rounds`` is true)."""

    @classmethod
    def check(cls, options: Any, system: Any, per_round: Optional[int], round_mode: str) -> None:
        """Refuse, in one line (``ValueError`` naming the option, its value and what was expected), a cell or run
        this scheme cannot serve with ``options``: ``system`` the ``[system]`` table (an
        :class:`edgesim.config.SystemConfig`), ``per_round`` the devices a round (``None``: unknown), ``round_mode``
        the ``[budget]`` one. Default: every one is fine."""


# name -> scheme class
SCHEMES: dict[str, type] = {}


def register_access(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_access("my_scheme")`` makes ``[system] access = "my_scheme"`` choose it.

    A name already taken is refused in one line naming both classes (a plugin never replaces a built-in:
    :func:`edgesim.registries.claim`)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"access scheme name {name!r}: expected a name of letters, digits and underscores")

    def add(cls: type) -> type:
        if not callable(getattr(cls, "transmit", None)):
            raise ConfigError(f"access scheme {name!r} ({source(cls)}): expected a class with a method transmit(env, "
                              f"device, bits, channel_gain, tx_power_w, on_air=None, *, checked=False)")
        options = getattr(cls, "Options", NoOptions)
        if not (dataclasses.is_dataclass(options) and options.__dataclass_params__.frozen):
            raise ConfigError(f"access scheme {name!r} ({source(cls)}): Options = {options!r}; expected a frozen "
                              f"dataclass of its options")
        claim(SCHEMES, name, cls, "access scheme")
        cls.name = name
        if name not in ACCESS_NAMES:
            ACCESS_NAMES.append(name)
        return cls

    return add


def summary(cls: type) -> str:
    """The first line of a scheme's docstring (what ``edgesim list access`` prints)."""
    return (cls.__doc__ or "").strip().split("\n")[0]


def scheme_class(access: str) -> type:
    """The registered scheme ``access``; ``ConfigError`` naming the key, the value and the names known."""
    check_access_name(access)
    return SCHEMES[access]


def option_owner(key: str) -> Optional[str]:
    """The first registered scheme with an option ``key`` (for the message of an option given to another)."""
    for name, cls in SCHEMES.items():
        if key in {f.name for f in dataclasses.fields(cls.Options)}:
            return name
    return None


def build_options(access: str, values: Optional[Mapping[str, Any]], where: str = "[access]"):
    """The ``[access]`` table as ``access``'s ``Options`` (its defaults when ``values`` is empty or ``None``).

    Refused in one line: an option of another scheme (naming that scheme), an unknown key, a bad value."""
    cls = scheme_class(access)
    values = {} if values is None else values
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected a table of access = {access!r}'s options, got {values!r}")
    names = [f.name for f in dataclasses.fields(cls.Options)]
    for key, value in values.items():
        if key not in names:
            owner = option_owner(key)
            expected = ("one of " + ", ".join(names)) if names else "no options (it has none)"
            if owner is not None:
                raise ConfigError(f"{where}: {key} = {value!r} is an option of access = {owner!r}, not of access = "
                                  f"{access!r}; expected {expected}")
            raise ConfigError(f"{where}: unknown key {key!r} (= {value!r}) for access = {access!r}; "
                              f"expected {expected}")
    try:
        return cls.Options(**values)
    except ConfigError as e:
        raise e.at(where) from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def options_dict(options: Any) -> dict[str, Any]:
    """A scheme's options as a plain dict (for ``config.toml``, fingerprints)."""
    return dataclasses.asdict(options) if options is not None else {}


def make_link(env, access: str, cell: Cell, options: Any = None):
    """The link of scheme ``access`` for ``env``'s clock (``options``: its ``Options``, default the defaults)."""
    cls = scheme_class(access)
    return cls(env, cell, options if options is not None else cls.Options())


def make_uplink(env, access: str, bandwidth_hz: float, noise_psd_w_per_hz: float, tdma_order: str = "arrival",
                options: Any = None, n_devices: int = 1, seed: int = 0, resources: Any = None):
    """The link of the registered access scheme ``access`` for ``env``'s clock, with its ``options`` (``None``: the
    scheme's defaults); TDMA served in ``tdma_order``; ``resources``: the ``[resources]`` table, for a scheme's
    per-round policies. The engines' one way to an uplink."""
    from .._checks import positive

    cell = Cell(positive("bandwidth_hz", bandwidth_hz), positive("noise_psd_w_per_hz", noise_psd_w_per_hz),
                n_devices, seed, tdma_order, resources)
    return make_link(env, access, cell, options)


def make_banded(env, access: str, cell: Cell):
    """The link that runs a bandwidth policy's per-device bands for scheme ``access`` (``None``: bands do not
    apply to it)."""
    banded = scheme_class(access).banded
    return None if banded is None else make_link(env, banded, cell)
