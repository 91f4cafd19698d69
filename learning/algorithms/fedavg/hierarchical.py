"""The FedAvg family under ``round_mode = "hierarchical"``: HierFAVG (docs/model/hierarchy.md).

HierFAVG (Liu, Zhang, Song and Letaief, IEEE ICC 2020, Algorithm 1) with the family's round as its edge round:

- **edge round** of cell ℓ: its scheduled devices start from the edge model ``w^ℓ``, train their local steps
  (the family's task: FedAvg's supervised loss, FixAvg's FixMatch, FedProx's proximal term...) and upload; the
  edge server aggregates what arrived exactly as the flat server does (:meth:`FedAvg.learn`, then
  :meth:`FedAvg.aggregate`: ``w^ℓ ← Σ_i |D_i| w_i / Σ_i |D_i|`` over the arrived devices of the cell);
- **cloud aggregation** (every κ-th edge round): ``w ← Σ_ℓ |D^ℓ| w^ℓ / Σ_ℓ |D^ℓ|``, ``|D^ℓ|`` the samples of
  every device of cell ℓ (HierFAVG's weighting; :func:`edgesim.hierarchy.cloud_weights`), through
  :func:`edgesim.learning.aggregation.weighted_average`; every edge model becomes ``w``.

Each edge round's devices are K = ``[run] clients_per_round`` of the cell's (all of them when it has fewer),
drawn uniformly from the round's stream ``rng(seed, "sample", r)``: cell 0's draw first, then cell 1's, ... —
with one cell exactly FedAvg's draw. With a ``[resources]`` scheduling policy, the first K of the cell's ranking
(``SystemView.schedule``, each cell ranked on its own: :mod:`edgesim.hierarchy`), fewer when it rules devices out.
With ``[compression] backhaul`` the edge model travels as its difference from the cloud model and the cloud model
is broadcast encoded (:class:`edgesim.learning.compression.Backhaul`).

Evaluation follows the model each device holds: after an edge aggregation every device on its cell's edge
model (one model for all when the cells hold the same: one pass), after a cloud aggregation the cloud model.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from edgesim.backend import RoundOutcome, RoundPlan, SystemView
from edgesim.hierarchy import cell_samples, cloud_weights
from edgesim.learning.aggregation import weighted_average
from edgesim.learning.algorithms.common import (
    accuracy_metrics,
    evaluate_shared,
    has_unlabeled,
    labeling_accuracy,
    round_metrics,
    to_cpu,
    to_device,
)
from edgesim.learning.compression import Backhaul


class HierFedAvg:
    """A FedAvg-family backend (``inner``) driven by :class:`edgesim.hierarchy.HierarchicalSimulation`."""

    def __init__(self, inner):
        cfg = inner.cfg
        if cfg.ema_decay is not None:
            raise ValueError(f"ema_decay = {cfg.ema_decay!r} with round_mode = 'hierarchical': the moving average "
                             f"is of one server model, and HierFAVG has one per cell and the cloud's; expected it "
                             f"unset")
        self.inner = inner
        self.backhaul = Backhaul(inner.ctx, list(inner.global_state), inner.bits)
        self.assign_cells((0,) * inner.ctx.n_devices, 1)

    @property
    def name(self) -> str:
        return self.inner.name

    # -- the cells
    def assign_cells(self, cell_of: Sequence[int], n_cells: int) -> None:
        inner = self.inner
        self.cell_of = tuple(int(c) for c in cell_of)
        self.n_cells = int(n_cells)
        self.members = tuple(np.flatnonzero(np.asarray(self.cell_of) == c) for c in range(self.n_cells))
        samples = [float(sum(inner.sizes[d].values())) for d in range(inner.ctx.n_devices)]
        self.cell_data = cell_samples(self.cell_of, samples, self.n_cells)
        self.edge = [inner.global_state] * self.n_cells  # every edge model starts as the cloud's
        self.selected: dict[int, tuple[int, ...]] = {}
        self._draws: dict[int, list[tuple[int, ...]]] = {}

    def backhaul_bits(self) -> tuple[float, float]:
        return self.backhaul.bits, self.backhaul.bits

    def draw(self, r: int) -> list[tuple[int, ...]]:
        """Each cell's K devices of edge round ``r`` (module docstring), sorted."""
        if r not in self._draws:
            rng = self.inner.ctx.rng("sample", r)
            k = self.inner.ctx.run_cfg.clients_per_round
            self._draws = {r: [tuple(sorted(int(d) for d in rng.choice(m, size=min(k, len(m)), replace=False)))
                               for m in self.members]}
        return self._draws[r]

    # -- an edge round
    def plan_edge(self, cell: int, devices: tuple[int, ...], view: SystemView) -> RoundPlan:
        if view.schedule is not None:  # a scheduling policy: the first K of the cell's ranking (fewer if it rules out)
            k = min(self.inner.ctx.run_cfg.clients_per_round, len(self.members[cell]))
            self.selected[cell] = tuple(sorted(int(d) for d in view.schedule[:k]))
        else:
            self.selected[cell] = self.draw(view.round_index)[cell]
        return self.inner.plan_for(self.selected[cell])

    def complete_edge(self, cell: int, outcome: RoundOutcome) -> dict[str, float]:
        inner = self.inner
        updates, result, extra = inner.learn(outcome, self.selected.pop(cell), self.edge[cell])
        self.edge[cell] = inner.aggregate(self.edge[cell], updates)
        models = [self.edge[c] for c in self.cell_of]
        shared = models[0] if all(m is models[0] for m in models) else None
        return {**round_metrics(inner.ctx, models, result, shared=shared), **extra}

    # -- the cloud
    def aggregate_cloud(self, index: int) -> dict[str, float]:
        inner = self.inner
        cloud = inner.global_state
        sent = [(self.backhaul.up(index, c, self.edge[c], cloud), w)
                for c, w in enumerate(cloud_weights(self.cell_data)) if w > 0]
        inner.global_state = weighted_average(sent)
        self.edge = [self.backhaul.down(index, inner.global_state)] * self.n_cells
        return self.cloud_metrics()

    def cloud_metrics(self) -> Mapping[str, float]:
        """The cloud model's accuracy on every device's test set (and as a labeller, with unlabelled data)."""
        ctx, state = self.inner.ctx, self.inner.global_state
        out = accuracy_metrics(evaluate_shared(ctx, state))
        if has_unlabeled(ctx):
            out.update(accuracy_metrics(labeling_accuracy(ctx, [state] * ctx.n_devices), "labeling_accuracy"))
        return out

    # -- checkpoints
    def state_dict(self) -> dict:
        """The inner backend's state and the edge models, each distinct model once (cells that hold the same model
        hold it again after a resume: evaluated in one pass, as before)."""
        distinct = list({id(m): m for m in self.edge}.values())
        return {"inner": self.inner.state_dict(), "edge_models": [to_cpu(m) for m in distinct],
                "edge": [next(i for i, m in enumerate(distinct) if m is e) for e in self.edge]}

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state["inner"])
        if len(state["edge"]) != self.n_cells:
            raise ValueError(f"checkpoint of {len(state['edge'])} edge models, the run has {self.n_cells} cells")
        models = [to_device(self.inner.ctx, m) for m in state["edge_models"]]
        self.edge = [models[i] for i in state["edge"]]
