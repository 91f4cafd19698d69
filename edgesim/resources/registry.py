"""The one registry of resource policies: ``register_policy(kind, name)``, what each policy declares, and the names
as the key reference lists them (the built-in policies are in :mod:`edgesim.resources.policies`; plugins register
here too). Standard library only, so that the ``[resources]`` table's rules (:mod:`edgesim.resources.config`) read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional

from ..registries import claim

KINDS = ("scheduling", "bandwidth", "power", "cpu_freq")

# kind -> name -> policy class
POLICIES: dict[str, dict[str, type]] = {kind: {} for kind in KINDS}

ROUND_MODES = ("sync", "deadline", "async")  # "async": a free slot of any asynchronous rule
_DEFAULT_ROUND_MODES = {"scheduling": ROUND_MODES}


@dataclass(frozen=True)
class Declared:
    """What a policy class declares (module docstring), its defaults filled in."""

    access: Optional[tuple[str, ...]]
    needs: Mapping[str, str]
    round_modes: tuple[str, ...]
    not_async: str
    needs_deadline: bool
    tdma_order: str
    ranks: bool


def declared(kind: str, name: str) -> Declared:
    """The declarations of policy ``name`` of ``kind`` (a registered one)."""
    cls = POLICIES[kind].get(name)
    if cls is None:
        raise ValueError(f"{kind} = {name!r}: expected one of {', '.join(repr(k) for k in POLICIES[kind])} "
                         f"(`edgesim list policies`)")
    access = getattr(cls, "access", None)
    return Declared(
        access=None if access is None else tuple(access),
        needs=dict(getattr(cls, "needs", {})),
        round_modes=tuple(getattr(cls, "round_modes", _DEFAULT_ROUND_MODES.get(kind, ("sync", "deadline")))),
        not_async=getattr(cls, "not_async", "it does not declare 'async' among its round_modes"),
        needs_deadline=bool(getattr(cls, "needs_deadline", False)),
        tdma_order=getattr(cls, "tdma_order", "arrival"),
        ranks=bool(getattr(cls, "ranks", True)),
    )


def register_policy(kind: str, name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_policy("bandwidth", "my_split")`` makes ``[resources] bandwidth = "my_split"``
    choose it. The class has one method, ``allocate(self, r)``; its docstring's first line is what
    ``edgesim list policies`` prints. A name already taken (a built-in's, another plugin's) is refused in one
    line naming both classes (:func:`edgesim.registries.claim`). Kinds: :data:`KINDS`, and ``"resource_blocks"``
    (an OFDMA round's blocks, :mod:`edgesim.access.ofdma`)."""
    if kind not in POLICIES:
        raise ValueError(f"policy kind {kind!r}: expected one of {', '.join(POLICIES)}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"policy name {name!r}: expected a non-empty string")

    def add(cls: type) -> type:
        if not callable(getattr(cls, "allocate", None)):
            raise ValueError(f"policy {kind} {name!r} ({cls.__name__}): expected a class with a method "
                             f"allocate(self, r)")
        return claim(POLICIES[kind], name, cls, f"policy {kind}")  # a plugin never replaces a built-in silently

    return add


def summary(cls: type) -> str:
    """The first line of a policy's docstring."""
    return (cls.__doc__ or "").strip().split("\n")[0]


def policy_words(kind: str) -> str:
    """The registered policies of ``kind`` as the key reference lists them: those of every access scheme first,
    then each access family's (``FDMA "proportional"``), from what each policy declares; a plugin may add more."""
    groups: dict[str, list[str]] = {}
    for name in POLICIES.get(kind, {}):
        d = declared(kind, name)
        needs = ", ".join(f'{k} = "{v}"' for k, v in d.needs.items())
        groups.setdefault("" if d.access is None else " or ".join(a.upper() for a in d.access), []).append(
            f'"{name}"' + (f" (with {needs})" if needs else ""))
    parts = [(f"{family} " if family else "") + ", ".join(names) for family, names in groups.items()]
    return "; ".join(parts) + "; or a plugin"


