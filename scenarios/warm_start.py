"""``[run] warm_start``: the run's first R rounds of a supervised method, computed once and shared by every algorithm.

``warm_start = {algorithm = "fedavg_labeled", rounds = R}`` runs the named
algorithm (a FedAvg on the labelled data alone,
:func:`edgesim.learning.config.warm_start_algorithms`) for R rounds on its own clock,
once per run. What it leaves — its global model, the engine's state after R
rounds (simulated clock, cumulative bits and energy, the channel's state) and
its R round records and events — is where every algorithm of the run starts:

- each algorithm's backend is built on the run's context with
  ``start_state`` = the warm model, so ``ctx.init_state()`` (every
  algorithm's common initial model) is that model: paired starts;
- each algorithm's clock is the warm start's engine state (as a resumed
  checkpoint is), so round R begins at the warm start's simulated time, with
  its bits and energy already counted, and the channel, client sampling and
  local randomness of round R onward are what they would be without it
  (streams named by what they draw, by round and device: docs/use/metrics.md);
- the R warm rounds are the first R rows of every algorithm in
  ``rounds.csv``, with ``warm_start = 1`` (the algorithm's own rounds: 0).

A warm start is computed before any algorithm runs, in the process that
writes the run folder; ``--jobs`` workers receive it (pickled), so it is
computed once per run and the folder is the same bytes with any ``--jobs``.
With checkpoints it is saved to ``checkpoints/warm-start.pt`` and a resumed
run reads it back instead of recomputing it.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from edgesim.backend import Diverged
from edgesim.config import ConfigError
from edgesim.engine import RoundRecord, Simulation

FLAG = "warm_start"  # the rounds.csv column: 1 for a warm-start round, 0 for the algorithm's own
FILE = "warm-start.pt"  # in the checkpoint folder (not an algorithm name: those have no "-")


@dataclass
class WarmStart:
    """A computed warm start: which algorithm, its flagged records and events, the engine state after its rounds
    (:meth:`edgesim.engine.Simulation.state_dict`) and its global model (CPU tensors)."""

    algorithm: str
    records: list = field(default_factory=list)
    events: list = field(default_factory=list)
    engine: dict = field(default_factory=dict)
    model: dict = field(default_factory=dict)

    @property
    def now_s(self) -> float:
        """Simulated seconds at the end of the warm start (where round R begins)."""
        return float(self.engine["now_s"])

    def summary(self) -> dict:
        """What ``summary.json`` says of it."""
        last = self.records[-1]
        return {"algorithm": self.algorithm, "rounds": len(self.records), "simulated_time_s": self.now_s,
                "accuracy": last.metrics.get("accuracy"), "cum_bits_up": last.cum_bits_up,
                "cum_energy_j": last.cum_energy_j}


def flagged(record: RoundRecord, warm: bool) -> RoundRecord:
    """``record`` with ``info["warm_start"]`` = 1.0 (a warm-start round) or 0.0 (the algorithm's own)."""
    return dataclasses.replace(record, info={**record.info, FLAG: 1.0 if warm else 0.0})


def compute(sc, build_backend: Callable) -> WarmStart:
    """Run ``[run] warm_start``'s algorithm for its rounds on a fresh clock (the run's seed); raise
    :class:`ConfigError` (one line) when it diverges."""
    from edgesim.learning.algorithms.common import to_cpu

    ws = sc.learning.run.warm_start
    name = ws["algorithm"]
    backend = build_backend(name)
    sim = Simulation(sc.system, sc.budget, backend, seed=sc.seed, resources=sc.resources, access_options=sc.access)
    records = []
    for _ in range(ws["rounds"]):
        try:
            records.append(flagged(sim.run_round(), True))
        except Diverged as e:
            raise ConfigError(f"{sc.path}: [run] warm_start: {e}") from None
    return WarmStart(name, records, sim.events, sim.state_dict(), to_cpu(backend.global_state))


def save(folder: Path, warm: WarmStart, fingerprint: str) -> Path:
    """Write ``warm`` into ``folder``'s checkpoint folder (atomically; listed in the manifest)."""
    import torch

    from edgesim.results.files import CHECKPOINT_DIR
    from edgesim.results.writing import add_to_manifest, atomic_write_bytes
    from edgesim.scenarios.checkpoint import FORMAT_VERSION, record_to_dict

    payload = {"format": FORMAT_VERSION, "fingerprint": fingerprint, "algorithm": warm.algorithm,
               "records": [record_to_dict(r) for r in warm.records], "events": [tuple(e) for e in warm.events],
               "engine": warm.engine, "model": warm.model}
    buf = io.BytesIO()
    torch.save(payload, buf)
    path = Path(folder) / CHECKPOINT_DIR / FILE
    add_to_manifest(folder, path.relative_to(folder).as_posix())
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())
    return path


def load(folder: Path, fingerprint: str) -> Optional[WarmStart]:
    """The saved warm start of ``folder`` (``None`` if there is none); :class:`ConfigError` for a corrupt file
    or one of another scenario."""
    import torch

    from edgesim.engine import Event
    from edgesim.results.files import CHECKPOINT_DIR
    from edgesim.scenarios.checkpoint import FORMAT_VERSION, record_from_dict

    path = Path(folder) / CHECKPOINT_DIR / FILE
    if not path.exists():
        return None
    try:
        payload = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - truncated or garbled: whatever the unpickler raised
        raise ConfigError(f"{path}: corrupt warm start ({type(e).__name__}: {e}); it is left as it is. "
                          f"Run with ⟨overwrite⟩ to start afresh") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION \
            or payload.get("fingerprint") != fingerprint:
        raise ConfigError(f"{path}: this warm start belongs to a different scenario or format; "
                          f"run with ⟨overwrite⟩ to start afresh")
    return WarmStart(payload["algorithm"], [record_from_dict(d) for d in payload["records"]],
                     [Event(*e) for e in payload["events"]], payload["engine"], payload["model"])


def obtain(sc, build_backend: Callable, folder: Optional[Path], fingerprint: str, resuming: bool) -> Optional[WarmStart]:
    """The run's warm start (``None`` without one): read back from ``folder``'s checkpoints when resuming,
    else computed — and saved there when the run checkpoints (``folder`` given and ``run.checkpoint_every`` > 0)."""
    if sc.physics_only or sc.learning.run.warm_start is None:
        return None
    keep = folder is not None and sc.learning.run.checkpoint_every > 0
    if keep and resuming:
        warm = load(folder, fingerprint)
        if warm is not None:
            return warm
    warm = compute(sc, build_backend)
    if keep:
        save(folder, warm, fingerprint)
    return warm
