"""Checkpoints of a run: every N rounds, everything one algorithm needs to go on as if never stopped.

One file per algorithm, ``<out>.incomplete/checkpoints/<algorithm>.pt``
(``torch.save``, or pickle in a physics-only run; written to a temporary name and renamed into place), holding

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
import pickle
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import tomli_w

from edgesim.config import ConfigError
from edgesim.records import DeviceRound, Event, RoundRecord, UpdateRow
from edgesim.results.files import CHECKPOINT_DIR, CONFIG
from edgesim.results.writing import add_to_manifest, atomic_write_bytes

FORMAT_VERSION = 1
_ZIP_MAGIC = b"PK"  # torch.save writes a zip archive; a physics-only run's pickle starts otherwise
# Parts of the resolved config that may differ between a run and its resumption.
_NOT_FINGERPRINTED = ("source", "versions")


@dataclass
class AlgorithmRun:
    """What one algorithm produced: its rounds, its trace and its simulated clock at the end."""

    name: str
    records: list = field(default_factory=list)
    events: list = field(default_factory=list)
    now_s: float = 0.0
    graphs: list = field(default_factory=list)  # (round, end time s, backend.graph()) when the backend has one
    diverged: Optional[str] = None  # why training stopped early (edgesim.backend.Diverged), else None


def normal_form(config: dict) -> dict:
    """A resolved config as a ``config.toml`` reads back, without its source path and versions."""
    normal = tomllib.loads(tomli_w.dumps(config))
    for key in _NOT_FINGERPRINTED:
        normal.pop(key, None)
    return normal


def fingerprint(config: dict) -> str:
    """SHA-256 of a resolved config (as written to ``config.toml``), ignoring its source path and versions."""
    return hashlib.sha256(json.dumps(normal_form(config), sort_keys=True).encode()).hexdigest()


def read_config(config_toml: Path) -> dict:
    """A run folder's recorded scenario; :class:`ConfigError` when it is missing or unreadable."""
    config_toml = Path(config_toml)
    try:
        config = tomllib.loads(config_toml.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{config_toml}: missing, so this folder's scenario is unknown; it is left as it is. "
                          f"Choose another ⟨out⟩, or ⟨overwrite⟩ to replace it") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{config_toml}: unreadable ({e}), so this folder's scenario is unknown; it is left as "
                          f"it is. Choose another ⟨out⟩, or ⟨overwrite⟩ to replace it") from None
    if not isinstance(config.get("name"), str) or not isinstance(config.get("seed"), int):
        raise ConfigError(f"{config_toml}: not a {CONFIG} written by edgesim (no name and seed), so this "
                          f"folder's scenario is unknown; it is left as it is. Choose another ⟨out⟩, or ⟨overwrite⟩")
    return config


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differences(old: dict, new: dict, limit: int = 5) -> list[str]:
    """``key: old -> new`` for each key whose value differs between two resolved configs (at most ``limit``)."""
    a, b = _flatten(normal_form(old)), _flatten(normal_form(new))
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    lines = [f"{k}: {a.get(k, '(absent)')!r} -> {b.get(k, '(absent)')!r}" for k in keys[:limit]]
    if len(keys) > limit:
        lines.append(f"and {len(keys) - limit} more")
    return lines


def check_same_scenario(config_toml: Path, config: dict, hint: str = "Choose another ⟨out⟩, or ⟨overwrite⟩ to replace it") -> None:
    """Refuse (:class:`ConfigError`, naming the keys that differ) a run folder of another scenario."""
    try:
        old = read_config(config_toml)
    except ConfigError as e:
        raise ConfigError(str(e).replace("Choose another ⟨out⟩, or ⟨overwrite⟩ to replace it", hint)) from None
    if normal_form(old) != normal_form(config):
        raise ConfigError(
            f"{config_toml.parent}: holds a run of a different scenario ({'; '.join(differences(old, config))}); "
            f"it is left as it is. {hint}"
        )


def check_resumable(backend, name: str) -> None:
    """A clear error for an algorithm that cannot be checkpointed."""
    missing = [m for m in ("state_dict", "load_state_dict") if not callable(getattr(backend, m, None))]
    if missing:
        raise ConfigError(
            f"[run] checkpoint_every: algorithm {name!r} ({type(backend).__name__}) has no "
            f"{' or '.join(m + '()' for m in missing)}, so it cannot be checkpointed; set run.checkpoint_every = 0"
        )


def record_to_dict(r: RoundRecord) -> dict:
    d = {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name != "devices"}
    d["metrics"], d["info"] = dict(r.metrics), dict(r.info)
    d["devices"] = [tuple(row) for row in r.devices]
    return d


def record_from_dict(d: dict) -> RoundRecord:
    def row(values) -> DeviceRound | UpdateRow:  # an asynchronous round has a row per update
        return (UpdateRow if len(values) > len(DeviceRound._fields) else DeviceRound)(*values)

    return RoundRecord(**{**d, "devices": tuple(row(values) for values in d["devices"])})


def path_for(folder: Path, name: str) -> Path:
    return Path(folder) / CHECKPOINT_DIR / f"{name}.pt"


def save(folder: Path, name: str, *, fingerprint: str, sim, backend, records: list, events: list, done: bool,
         use_torch: bool = True, graphs: Optional[list] = None) -> Path:
    """Write the checkpoint of algorithm ``name`` into ``folder/checkpoints/`` (atomically).

    ``use_torch``: ``torch.save`` (a zip archive); else plain pickle (physics-only runs, no torch).
    """
    payload = {
        "format": FORMAT_VERSION,
        "algorithm": name,
        "fingerprint": fingerprint,
        "done": bool(done),
        "now_s": sim.now_s,
        "engine": sim.state_dict(),
        "backend": backend.state_dict(),
        "records": [record_to_dict(r) for r in records],
        "events": [tuple(e) for e in events],
        "graphs": list(graphs or []),
    }
    buf = io.BytesIO()
    if use_torch:
        import torch

        torch.save(payload, buf)
    else:
        pickle.dump(payload, buf)
    path = path_for(folder, name)
    add_to_manifest(folder, path.relative_to(folder).as_posix())
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())
    return path


def load(folder: Path, name: str, fingerprint: str) -> Optional[dict[str, Any]]:
    """The checkpoint of ``name`` in ``folder`` (records and events rebuilt), or ``None`` if there is none.

    Raises :class:`ConfigError` for a checkpoint of another scenario or format.
    """
    path = path_for(folder, name)
    if not path.exists():
        return None
    # Our own file in the user's own run folder; algorithm states may hold any picklable object.
    try:
        data = path.read_bytes()
        if data[:2] == _ZIP_MAGIC:  # written by torch.save
            import torch

            payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
        else:
            payload = pickle.loads(data)
    except Exception as e:  # noqa: BLE001 - truncated or garbled: whatever the unpickler raised
        raise ConfigError(f"{path}: corrupt checkpoint ({type(e).__name__}: {e}); it is left as it is. "
                          f"Run with ⟨overwrite⟩ to start afresh") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise ConfigError(f"{path}: checkpoint format {found!r}, expected {FORMAT_VERSION}; "
                          f"run with ⟨overwrite⟩ to start afresh")
    if payload.get("fingerprint") != fingerprint:
        raise ConfigError(f"{path}: this checkpoint belongs to a different scenario or overrides; "
                          f"run with ⟨overwrite⟩ to start afresh")
    payload["records"] = [record_from_dict(d) for d in payload["records"]]
    payload["events"] = [Event(*e) for e in payload["events"]]
    payload.setdefault("graphs", [])
    return payload
