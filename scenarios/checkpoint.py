"""Checkpoints of a run: every N rounds, everything one algorithm needs to go on as if never stopped.

One file per algorithm, ``<out>.incomplete/checkpoints/<algorithm>.pt``
(``torch.save``, written to a temporary name and renamed into place), holding

- ``engine``: :meth:`edgesim.engine.Simulation.state_dict` (clock, round
  index, cumulative counters, channel state);
- ``backend``: the algorithm's ``state_dict()`` (its tensors, on the CPU);
- ``records``/``events``: the rounds and the trace so far (the engine keeps
  only those since its last ``load_state_dict``, so they are stored here);
- ``done``: whether the algorithm had finished (a resumed run skips it);
- ``fingerprint``: of the resolved scenario, so a checkpoint is never
  applied to a different one.

Randomness is derived from (seed, round, device) everywhere, so a run resumed
from a checkpoint writes the same bytes as one that was never stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import tomli_w

from edgesim.config import ConfigError
from edgesim.engine import DeviceRound, Event, RoundRecord
from scenarios.runfolder import atomic_write_bytes

CHECKPOINT_DIR = "checkpoints"
FORMAT_VERSION = 1
# Parts of the resolved config that may differ between a run and its resumption.
_NOT_FINGERPRINTED = ("source", "versions")


@dataclass
class AlgorithmRun:
    """What one algorithm produced: its rounds, its trace and its simulated clock at the end."""

    name: str
    records: list = field(default_factory=list)
    events: list = field(default_factory=list)
    now_s: float = 0.0


def fingerprint(config: dict) -> str:
    """SHA-256 of a resolved config (as written to ``config.toml``), ignoring its source path and versions."""
    normal = tomllib.loads(tomli_w.dumps(config))  # the same normal form as a config.toml read back
    for key in _NOT_FINGERPRINTED:
        normal.pop(key, None)
    return hashlib.sha256(json.dumps(normal, sort_keys=True).encode()).hexdigest()


def config_fingerprint(config_toml: Path) -> Optional[str]:
    """The fingerprint of a run folder's ``config.toml`` (``None`` when it is missing or unreadable)."""
    try:
        return fingerprint(tomllib.loads(Path(config_toml).read_text()))
    except (OSError, tomllib.TOMLDecodeError):
        return None


def check_resumable(backend, name: str) -> None:
    """A clear error for an algorithm that cannot be checkpointed."""
    missing = [m for m in ("state_dict", "load_state_dict") if not callable(getattr(backend, m, None))]
    if missing:
        raise ConfigError(
            f"[run] checkpoint_every: algorithm {name!r} ({type(backend).__name__}) has no "
            f"{' or '.join(m + '()' for m in missing)}, so it cannot be checkpointed; set run.checkpoint_every = 0"
        )


def _record_to_dict(r: RoundRecord) -> dict:
    d = {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name != "devices"}
    d["metrics"], d["info"] = dict(r.metrics), dict(r.info)
    d["devices"] = [dataclasses.astuple(row) for row in r.devices]
    return d


def _record_from_dict(d: dict) -> RoundRecord:
    return RoundRecord(**{**d, "devices": tuple(DeviceRound(*row) for row in d["devices"])})


def path_for(folder: Path, name: str) -> Path:
    return Path(folder) / CHECKPOINT_DIR / f"{name}.pt"


def save(folder: Path, name: str, *, fingerprint: str, sim, backend, records: list, events: list, done: bool) -> Path:
    """Write the checkpoint of algorithm ``name`` into ``folder/checkpoints/`` (atomically)."""
    import torch

    payload = {
        "format": FORMAT_VERSION,
        "algorithm": name,
        "fingerprint": fingerprint,
        "done": bool(done),
        "now_s": sim.now_s,
        "engine": sim.state_dict(),
        "backend": backend.state_dict(),
        "records": [_record_to_dict(r) for r in records],
        "events": [dataclasses.astuple(e) for e in events],
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    path = path_for(folder, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())
    return path


def load(folder: Path, name: str, fingerprint: str) -> Optional[dict[str, Any]]:
    """The checkpoint of ``name`` in ``folder`` (records and events rebuilt), or ``None`` if there is none.

    Raises :class:`ConfigError` for a checkpoint of another scenario or format.
    """
    import torch

    path = path_for(folder, name)
    if not path.exists():
        return None
    # Our own file in the user's own run folder; algorithm states may hold any picklable object.
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if payload.get("format") != FORMAT_VERSION:
        raise ConfigError(f"{path}: checkpoint format {payload.get('format')!r}, expected {FORMAT_VERSION}; "
                          f"run without --resume to start afresh")
    if payload.get("fingerprint") != fingerprint:
        raise ConfigError(f"{path}: this checkpoint belongs to a different scenario or overrides; "
                          f"run without --resume to start afresh")
    payload["records"] = [_record_from_dict(d) for d in payload["records"]]
    payload["events"] = [Event(*e) for e in payload["events"]]
    return payload
