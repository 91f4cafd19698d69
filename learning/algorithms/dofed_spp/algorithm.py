"""DoFed-SPP (Ching, Chang, Kuo, Wang; IEEE TSC 2023), Algorithm 2, on the simulated clock.

Every device n keeps a reciprocal model θ_n^rec (trained on its labelled
train set, Eqs. 14–15) and a target model θ_n^tar (the student, Eqs. 21–22).

Round 0 — Phase 0, cold start (Alg. 2 lines 1–12). Every device trains its
reciprocal model for L warm-up rounds (L·I epochs) and uploads it; the BS
PCA-downsizes all N models (:mod:`edgesim.learning.algorithms.dofed_spp.pca`) and broadcasts them; every
device computes its similarity ratios (Eq. 19, :mod:`edgesim.learning.algorithms.dofed_spp.similarity`).
On the clock: each device computes ``L·I·C_tra·|train| + C_SR`` cycles
(phases ``"train"``, ``"sr"``), uploads m bits and downloads N downsized
models. No (B, K) decision and no time budget apply to this round.

Rounds t >= 1 — Phases 1–4:

1. the BS decides (B, K) and the uploaders [K]: Ineq. (26) with C1, C2, C3 of
   the slowest device (``edgesim.planning.slowest_device_constants``), the pairs
   of §4.4 (``edgesim.budget.examined_pairs``, capped at ``max_b``/``max_k``
   when given) and Algorithm 1 over each pair, keeping the set with the
   largest total SR (``edgesim.selection.best_selection``). No pair fits →
   :class:`edgesim.budget.InfeasibleBudgetError` with the numbers;
2. the K upload (m bits each); the BS downsizes them; every device downloads
   its B (``edgesim.selection.assignment``) at the downsized size and
   pseudo-labels its unlabelled target set with them (Eq. 20,
   :mod:`edgesim.learning.algorithms.dofed_spp.pseudo_labels`);
3. every device trains its target model (never re-initialised) on
   pseudo-labelled ∪ labelled target data (Eq. 22);
4. every device recomputes its similarity ratios (Eq. 19) with the copies it
   holds — the ones just downloaded, cached ones for the rest — and then
   trains its reciprocal model for I epochs (Eq. 15).

On the clock, exactly what was decided: every device computes ``"train"``
(reciprocal I·C_tra·|train| + target E·C_tra·(|unl| + |lab|)), ``"sr"``
(C_SR) and ``"pseudo_label"`` (B·C_pse) cycles; the K selected upload m bits;
every device downloads B downsized models. With identical devices the round
lasts Eq. (23) + Eq. (24) (tests/test_dofed_spp.py). The engine runs download
→ compute → upload; the uploads of round t carry the reciprocal models as
they were at the start of round t, which is what Phases 2–4 use.

Metrics per round: ``accuracy`` — the target models on each device's target
test set; ``labeling_accuracy`` — the round's pseudo-labels against the
hidden true labels (in round 0, before any pseudo-label exists, the initial
target model labels); both as mean with std/min/max over devices. Also
``sr_rows_kept`` (rows of Eq. (19) that kept last round's ratios),
``sr_self`` (mean ρ̂_n^n) and ``uncovered_devices`` (devices none of
whose B models has ρ̂ > 0: they label nothing and train their student on
their labelled data only). ``RoundPlan.info`` carries B, K and the total SR
(objective (27)) of the chosen set as ``sr_value``.

"auto" cycle counts (:func:`auto_cycles`, :func:`phase_cycles`): a forward
pass costs a third of a training pass (``C_fwd = C_tra / 3``, the ratio
:func:`edgesim.learning.models.flops_per_sample` assumes), so
``C_pse = C_fwd·|D_ul|`` per model and
``C_SR = (N + 1)·C_fwd·|D_l|`` (N reciprocal copies and the target model on
the labelled set) ``+ N·C_tra·|D_l|`` when G2 is empirical (a gradient per
model) ``+ 3·P·(N + N(N−1)/2 if G1 is empirical)/flops_per_cycle`` for the
distances (P parameters).
"""

from __future__ import annotations

from typing import Optional, Union

import numpy as np
import torch

from edgesim.backend import DeviceWork, RoundOutcome, RoundPlan, SystemView
from edgesim.budget import FeasibilityConstants, InfeasibleBudgetError, examined_pairs, infeasibility_message
from edgesim.config import ConfigError
from edgesim.learning.algorithms import register
from edgesim.learning.algorithms.common import (
    accuracy_metrics,
    accuracy_per_device,
    due_devices,
    evaluate_personal,
    labeling_accuracy,
    mean_loss,
    measured,
    sgd_cycles,
    sgd_task,
    start_label_rates_of,
    step_metrics,
    to_cpu,
    to_device,
    train_devices,
)
from edgesim.learning.algorithms.dofed_spp.config import DofedSppConfig
from edgesim.learning.algorithms.dofed_spp.pca import compressed_bits
from edgesim.learning.algorithms.dofed_spp.pseudo_labels import (
    batched_pseudo_labels,
    ensemble_pseudo_labels,
    weight_matrix,
)
from edgesim.learning.algorithms.dofed_spp.similarity import device_similarity
from edgesim.learning.context import Context
from edgesim.learning.costs import forward_cycles_per_sample
from edgesim.learning.inference import predict_proba
from edgesim.learning.label_quality import label_rates, round_label_metrics
from edgesim.learning.state import sent_numbers
from edgesim.planning import slowest_device_constants
from edgesim.selection import assignment, best_selection

# --------------------------------------------------------------------------- cycles


def phase_cycles(
    n_devices: int,
    n_labeled: int,
    n_unlabeled: int,
    n_params: int,
    cycles_per_sample: float,
    flops_per_cycle: float,
    g1: Union[str, float] = "empirical",
    g2: Union[str, float] = "empirical",
) -> tuple[float, float]:
    """``(C_SR, C_pse)`` in cycles for one device (formulas in the module docstring)."""
    fwd = forward_cycles_per_sample(cycles_per_sample)
    c_pse = fwd * n_unlabeled
    c_sr = (n_devices + 1) * fwd * n_labeled
    if g2 == "empirical":
        c_sr += n_devices * float(cycles_per_sample) * n_labeled
    pairs = n_devices + (n_devices * (n_devices - 1) / 2 if g1 == "empirical" else 0)
    c_sr += 3.0 * n_params * pairs / float(flops_per_cycle)
    return float(c_sr), float(c_pse)


def auto_cycles(name: str, scenario, model, dataset, cycles_per_sample: float) -> float:
    """The number ``edgesim.learning.sizing`` puts for a workload field set to ``"auto"``.

    ``name``: ``"sr_cycles"`` (C_SR) or ``"pseudo_label_cycles_per_model"``
    (C_pse); set sizes from the SUBSET/NORMAL split (``edgesim.learning.data.partitions.dofed_sizes``).
    """
    from edgesim.learning.data.partitions import dofed_sizes

    data = scenario.learning.data
    if data.partition not in ("subset", "normal"):
        raise ConfigError(
            f"{scenario.path}: [workload] {name} = \"auto\" needs data.partition \"subset\" or \"normal\" "
            f"(DoFed-SPP's set sizes), got {data.partition!r}; give {name} as a number of cycles"
        )
    sizes = dofed_sizes(dataset.n_classes, data.n_clusters, data.size_scale)
    cfg = scenario.learning.options("dofed_spp")
    sr, pse = phase_cycles(
        scenario.system.n_devices, sizes.labeled, sizes.unlabeled, sent_numbers(model.state_dict()), cycles_per_sample,
        scenario.workload.flops_per_cycle, cfg.g1, cfg.g2,
    )
    if name == "sr_cycles":
        return sr
    if name == "pseudo_label_cycles_per_model":
        return pse
    raise ValueError(f"name(={name!r}) must be 'sr_cycles' or 'pseudo_label_cycles_per_model'")


# --------------------------------------------------------------------------- the algorithm


class DofedSpp:
    """DoFed-SPP as a :class:`edgesim.backend.LearningBackend` (see the module docstring)."""

    name = "dofed_spp"

    def __init__(self, ctx: Context, cfg: DofedSppConfig):
        self.ctx, self.cfg = ctx, cfg
        n = ctx.n_devices
        self.gamma = float(cfg.gamma if cfg.gamma is not None else ctx.train_cfg.lr)
        self.vectorize = cfg.vectorize == "on" or (cfg.vectorize == "auto" and ctx.device.type == "cuda")
        self.rec_task = sgd_task(ctx)
        self.warmup_task = sgd_task(ctx, epochs=cfg.warmup_rounds * ctx.epochs)
        self.target_task = sgd_task(ctx, epochs=cfg.target_epochs)
        rec0 = ctx.init_state()  # the run's common initial model (as every algorithm's)
        tar0 = ctx.init_state("target")
        self.rec = [rec0] * n  # θ_n^rec (never modified in place: training returns new tensors)
        self.rec_prev = [rec0] * n  # θ_n^rec one local update older (Eq. 19's reference)
        self.tar = [tar0] * n
        self.rho: Optional[np.ndarray] = None
        # What each device holds of the others' reciprocal models: version ids into self.store.
        # Version 0 is the common initial model, which every device knows (model_init of Alg. 2 line 3).
        self.store: dict[int, dict] = {0: rec0}
        self.cache = np.zeros((n, n), dtype=np.int64)
        self.next_version = 1
        self.selected: tuple[int, ...] = ()
        self.b = 0
        # Cycles per device and phase.
        c = ctx.cycles_per_sample
        self.rec_cycles = [sgd_cycles(ctx, self.rec_task, cl.y_train.shape[0]) for cl in ctx.clients]
        self.tar_cycles = [cfg.target_cycles(c, cl.x_unl.shape[0] + cl.y_lab.shape[0]) for cl in ctx.clients]
        self.warmup_cycles = [cfg.warmup_rounds * x for x in self.rec_cycles]
        w = ctx.workload
        n_params = sent_numbers(ctx.model.state_dict())
        self.sr_cycles, self.pse_cycles = [], []
        for cl in ctx.clients:
            sr, pse = phase_cycles(n, cl.y_lab.shape[0], cl.x_unl.shape[0], n_params, c, w.flops_per_cycle, cfg.g1, cfg.g2)
            self.sr_cycles.append(sr if w.sr_cycles == "auto" else float(w.sr_cycles))
            self.pse_cycles.append(pse if w.pseudo_label_cycles_per_model == "auto" else float(w.pseudo_label_cycles_per_model))
        template = ctx.model.state_dict()
        full = compressed_bits(template, 1.0)
        self.pca_bits = int(round(ctx.model_bits * compressed_bits(template, cfg.pca_rank_fraction) / full))
        self.round_index = -1
        self.uploaded: tuple[int, ...] = ()  # this round's arrived uploads and each device's B models (graph())
        self.assign: dict[int, tuple] = {}
        self.owner = torch.cat([torch.full((cl.x_unl.shape[0],), d, dtype=torch.long) for d, cl in enumerate(ctx.clients)])

    # -- the budget of a round t >= 1 (Ineq. 26)
    def round_train_cycles(self) -> list[float]:
        """Each device's training cycles in a round t >= 1: the reciprocal model's I epochs on its train set (Eq. 15)
        and the target model's E_tar epochs on its labelled and unlabelled target sets (Eq. 22)."""
        return [r + t for r, t in zip(self.rec_cycles, self.tar_cycles)]

    def budget_constants(self, view: SystemView) -> FeasibilityConstants:
        """C1, C2, C3 of Ineq. (26) for a round t >= 1 as this backend charges it, for the slowest device
        (:func:`edgesim.planning.slowest_device_constants`) at ``view``'s rates: what ``plan_round`` decides on and
        what ``edgesim plan`` prints for this scenario."""
        return slowest_device_constants(view.round_budget_s, self.round_train_cycles(), self.sr_cycles,
                                        self.pse_cycles, view.cpu_freq_hz, self.ctx.model_bits, view.uplink_rate_bps)

    def check_budget(self, view: SystemView) -> None:
        """Before the first round: :class:`InfeasibleBudgetError` when no (B, K) fits a round t >= 1 at ``view``."""
        consts = self.budget_constants(view)
        if not examined_pairs(consts, self.ctx.n_devices):
            raise InfeasibleBudgetError("dofed_spp: " + infeasibility_message(consts, view.round_budget_s))

    # -- plan
    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx, n = self.ctx, self.ctx.n_devices
        self.round_index = view.round_index
        if view.n_devices != n:
            raise ValueError(f"the engine has {view.n_devices} devices, the data {n}")
        if view.round_index == 0:
            work = tuple(
                DeviceWork(
                    device=d,
                    compute_cycles={"train": self.warmup_cycles[d], "sr": self.sr_cycles[d]},
                    upload_bits=ctx.model_bits,
                    download_bits=n * self.pca_bits,
                )
                for d in range(n)
            )
            self.selected, self.b = tuple(range(n)), 0
            return RoundPlan(work, info={"B": 0, "K": n, "sr_value": 0.0})
        train = self.round_train_cycles()
        consts = self.budget_constants(view)
        pairs = examined_pairs(consts, n)
        if not pairs:
            raise InfeasibleBudgetError(f"dofed_spp, round {view.round_index}: " + infeasibility_message(consts, view.round_budget_s))
        cap_b = self.cfg.max_b or n
        cap_k = self.cfg.max_k or n
        capped = sorted({(min(b, cap_b, min(k, cap_k)), min(k, cap_k)) for b, k in pairs}, key=lambda p: (p[1], p[0]))
        sel = best_selection(self.rho, capped, self.cfg.coverage_b if self.cfg.selection == "coverage" else None)
        self.selected, self.b = sel.devices, sel.b
        work = tuple(
            DeviceWork(
                device=d,
                compute_cycles={"train": train[d], "sr": self.sr_cycles[d], "pseudo_label": sel.b * self.pse_cycles[d]},
                upload_bits=ctx.model_bits if d in sel.devices else 0.0,
                download_bits=sel.b * self.pca_bits,
            )
            for d in range(n)
        )
        return RoundPlan(work, info={"B": sel.b, "K": sel.k, "sr_value": sel.value})

    # -- learn
    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        if outcome.round_index == 0:
            return self._cold_start(outcome)
        return self._round(outcome)

    def _train(self, kind: str, round_index: int, starts, datasets, task):
        ctx = self.ctx
        devices = list(range(ctx.n_devices))
        # the reciprocal model trains on what every algorithm's local training draws; the target model its own
        stream = "target" if kind == "target" else "train"
        return train_devices(ctx, f"{self.name} ({kind} model)", round_index, devices, starts, datasets, task, stream)

    def _publish(self, devices) -> dict[int, int]:
        """The BS downsizes the uploads of ``devices``; returns {device: version id}."""
        from edgesim.learning.algorithms.dofed_spp.pca import downsize

        devices = list(devices)
        versions = {}
        for d, state in zip(devices, downsize([self.rec[d] for d in devices], self.cfg.pca_rank_fraction)):
            versions[d] = self.next_version
            self.store[self.next_version] = state
            self.next_version += 1
        return versions

    def _similarity(self, targets) -> dict[str, float]:
        ctx, n = self.ctx, self.ctx.n_devices
        off = ~np.eye(n, dtype=bool)
        distinct = sorted(set(self.cache[off].tolist())) or [0]
        pos = {v: j for j, v in enumerate(distinct)}
        index = np.array([[pos[v] for v in row] for row in np.where(off, self.cache, distinct[0])], dtype=np.int64)
        index[np.arange(n), np.arange(n)] = len(distinct) + np.arange(n)  # a device holds its own model in full
        models = [self.store[v] for v in distinct] + list(self.rec)
        res = device_similarity(
            ctx.model, models, index, self.rec_prev, targets,
            [c.x_lab for c in ctx.clients], [c.y_lab for c in ctx.clients],
            gamma=self.gamma, g1=self.cfg.g1, g2=self.cfg.g2, previous=self.rho,
            batch_size=ctx.train_cfg.eval_batch_size, vectorize=self.vectorize,
        )
        self.rho = res.rho
        return {"sr_rows_kept": float(res.kept.sum()), "sr_self": float(np.mean(np.diag(res.rho)))}

    def _pseudo_labels(self, up, versions, assign) -> torch.Tensor:
        """Eq. (20) for every device, concatenated in device order (−1 where a device has no model).

        When every device uses all K uploaded models (B = K), one stacked call
        labels all devices' data; otherwise each device runs its own B-model
        stack on its own data, so the host does the B·|D_ul| forward passes per
        device that the clock charges, not K·|D_ul|.
        """
        ctx = self.ctx
        x_unl = torch.cat([c.x_unl for c in ctx.clients])
        if not up or x_unl.shape[0] == 0:
            return torch.full((x_unl.shape[0],), -1, dtype=torch.long, device=ctx.device)
        w = weight_matrix(self.rho, assign, up)
        kw = dict(batch_size=ctx.train_cfg.eval_batch_size, vectorize=self.vectorize)
        if all(len(ids) == len(up) for ids in assign.values()):
            probs = predict_proba(ctx.model, [self.store[versions[i]] for i in up], x_unl, **kw)
            return batched_pseudo_labels(probs, torch.as_tensor(w, dtype=probs.dtype), self.owner.to(probs.device))
        col = {i: k for k, i in enumerate(up)}
        out = []
        for d, c in enumerate(ctx.clients):
            ids = assign.get(d, ())
            if not ids or c.x_unl.shape[0] == 0:
                out.append(torch.full((c.x_unl.shape[0],), -1, dtype=torch.long, device=c.x_unl.device))
                continue
            probs = predict_proba(ctx.model, [self.store[versions[i]] for i in ids], c.x_unl, **kw)
            weights = torch.as_tensor(w[d, [col[i] for i in ids]], dtype=probs.dtype, device=probs.device)
            out.append(ensemble_pseudo_labels(probs, weights))
        return torch.cat(out)

    def _gc(self) -> None:
        live = set(self.cache.ravel().tolist()) | {0}
        for v in [v for v in self.store if v not in live]:
            del self.store[v]

    def _cold_start(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx = self.ctx
        init = self.rec
        result = self._train("warmup", 0, init, [(c.x_train, c.y_train) for c in ctx.clients], self.warmup_task)
        self.rec, self.rec_prev = result.params, list(init)
        versions = self._publish(d for d in outcome.arrived)
        for i, v in versions.items():
            self.cache[:, i] = v
        extra = self._similarity(self.tar)
        self._gc()
        metrics = {**accuracy_metrics(evaluate_personal(ctx, self.tar))}
        metrics.update(accuracy_metrics(labeling_accuracy(ctx, self.tar), "labeling_accuracy"))
        metrics.update({"train_loss": mean_loss(result), **step_metrics(result), **extra})
        return metrics

    def _round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, n, r = self.ctx, self.ctx.n_devices, outcome.round_index
        arrived = set(outcome.arrived)
        up = [d for d in self.selected if d in arrived]
        versions = self._publish(up)
        # Phase 2: each device downloads its B of the uploaded models and pseudo-labels (Eq. 20).
        assign = assignment(self.rho, up, self.b) if up else {d: () for d in range(n)}
        self.uploaded, self.assign = tuple(up), assign
        for d, ids in assign.items():
            for i in ids:
                if i != d:
                    self.cache[d, i] = versions[i]
        pseudo = self._pseudo_labels(up, versions, assign)
        # uncovered devices: none of their B models has ρ̂ > 0, so they label nothing and their student
        # trains on its labelled data only (edgesim.learning.algorithms.dofed_spp.pseudo_labels); as a labeller each is scored by its own
        # target model, the one labeller it has (as in round 0)
        uncovered = [d for d, ids in assign.items() if not ids or self.rho[d, list(ids)].sum() <= 0]
        scored = set(due_devices(ctx, labels=True) or ())  # the labelling diagnostic's devices this round
        own_ids = [d for d in uncovered if d in scored]
        own = dict(zip(own_ids, accuracy_per_device(ctx, [self.tar[d] for d in own_ids],
                                                    [(ctx.clients[d].x_unl, ctx.clients[d].y_unl_hidden)
                                                     for d in own_ids])))
        starts = start_label_rates_of(ctx, range(n), self.tar)  # the one rule: each device's own target model
        datasets, lab_acc, pl_rates, start = [], [], [], 0
        for d, c in enumerate(ctx.clients):
            k = c.x_unl.shape[0]
            p = pseudo[start:start + k]
            start += k
            keep = p >= 0
            lab_acc.append(own[d] if d in own else float("nan") if d in uncovered or not k
                           else float((p == c.y_unl_hidden).float().mean()))
            pl_rates.append({**label_rates(p, c.y_unl_hidden, keep), **starts[d]})  # scored, never trained on
            datasets.append((torch.cat([c.x_unl[keep], c.x_lab]), torch.cat([p[keep].to(c.y_lab.dtype), c.y_lab])))
        # Phase 3: teacher–student step on pseudo ∪ labelled target data (Eq. 22).
        tar_before = self.tar
        tar_result = self._train("target", r, self.tar, datasets, self.target_task)
        self.tar = tar_result.params
        # Phase 4: similarity ratios with the copies each device holds (Eq. 19), then Eq. (15).
        extra = self._similarity(tar_before)
        rec_result = self._train("rec", r, self.rec, [(c.x_train, c.y_train) for c in ctx.clients], self.rec_task)
        self.rec_prev, self.rec = self.rec, rec_result.params
        self._gc()
        metrics = {**accuracy_metrics(evaluate_personal(ctx, self.tar))}
        metrics.update(accuracy_metrics(measured(ctx, lab_acc, labels=True), "labeling_accuracy"))
        metrics.update(round_label_metrics(pl_rates))
        metrics.update({
            "train_loss": mean_loss(rec_result),
            "target_train_loss": mean_loss(tar_result),
            **step_metrics(tar_result, rec_result),
            "n_uploaded": float(len(up)),
            "uncovered_devices": float(len(uncovered)),
            **extra,
        })
        return metrics

    def graph(self) -> dict:
        """This round's uploads and downloads (``edgesim.scenarios.graphs``): nodes flag the K chosen uploaders whose model
        arrived; an edge d → i for each of the B models device d labelled with, weighted by ρ̂_{d,i} (Eq. 19)."""
        nodes = {d: {"uploaded": d in self.uploaded} for d in range(self.ctx.n_devices)}
        edges = [(d, int(i), {"weight": float(self.rho[d, i])} if self.rho is not None else {})
                 for d, ids in sorted(self.assign.items()) for i in ids if int(i) != d]
        return {"graph": {"kind": "dofed_spp_downloads", "B": int(self.b)}, "nodes": nodes, "edges": edges}

    # -- checkpoints
    def state_dict(self) -> dict:
        return {
            "rec": [to_cpu(s) for s in self.rec],
            "rec_prev": [to_cpu(s) for s in self.rec_prev],
            "tar": [to_cpu(s) for s in self.tar],
            "rho": None if self.rho is None else self.rho.copy(),
            "store": {v: to_cpu(s) for v, s in self.store.items()},
            "cache": self.cache.copy(),
            "next_version": self.next_version,
        }

    def load_state_dict(self, state: dict) -> None:
        self.rec = [to_device(self.ctx, s) for s in state["rec"]]
        self.rec_prev = [to_device(self.ctx, s) for s in state["rec_prev"]]
        self.tar = [to_device(self.ctx, s) for s in state["tar"]]
        self.rho = None if state["rho"] is None else np.array(state["rho"], dtype=float)
        self.store = {int(v): to_device(self.ctx, s) for v, s in state["store"].items()}
        self.cache = np.array(state["cache"], dtype=np.int64)
        self.next_version = int(state["next_version"])


@register("dofed_spp", DofedSppConfig, "DoFed-SPP: reciprocal + target models, similarity ratios, B/K on the budget", display="DoFed-SPP")
def build_dofed_spp(ctx: Context, cfg: DofedSppConfig) -> DofedSpp:
    return DofedSpp(ctx, cfg)
