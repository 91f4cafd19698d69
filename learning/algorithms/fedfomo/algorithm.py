"""FedFomo (Zhang, Sapra, Fidler, Yeung, Alvarez; ICLR 2021), a DoFed-SPP baseline (docs/studies/dofed_spp.md).

Each round K devices federate (sampled as in FedAvg). Device i:

1. downloads M models from the server, chosen ε-greedily from its affinity
   vector P_i (with probability ``ε − round·ε_decay`` a random device, else
   the next best by P_i, random tie-break) among the devices that have
   uploaded at least once;
2. scores each against its own current model θ_i (the baseline) on its
   validation set: ``δ_n = (L_i(θ_i) − L_i(θ_n)) / ‖θ_n − θ_i‖`` (L1 norm by
   default, the code's ``model_delta_norm``);
3. updates ``P_i[n] += δ_n / |Σ_m δ_m|`` and its model
   ``θ_i ← θ_i + Σ_n w_n (θ_n − θ_i)`` with ``w_n = max(δ_n, 0) / Σ max(δ, 0)``
   (no positive δ: θ_i is kept);
4. trains I local epochs on its labelled data and uploads.

Devices not federating keep their models. What the code fixes and we follow
(NVlabs/FedFomo ``federation.py``, ``client.py``): P_i[i] starts at 0.1 and
the others at 0; a device never downloads its own model; the |Σδ|
normaliser gets +1e-9 when below 1e-9.

In DoFed-SPP's setting (docs/studies/dofed_spp.md): M = 10; every device
trains on train ∪ labelled target; the validation set is the labelled target
set (``validation = "labeled"``, default — the only data of the target
distribution a device has; it stays in the training set too) or a random
``val_fraction`` of the device's labelled data held out of training
(``"split"``, FedFomo's own protocol). Its one classifier also labels the
unlabelled target set (labelling accuracy).

On the clock: a federating device downloads its M models (m bits each),
computes ``"train"`` (I·C_tra·|train set|) and ``"fomo_weights"``
((M + 1)·C_fwd·|validation set|, the forward passes that score the models,
C_fwd = C_tra/3) cycles, and uploads m bits.
"""

from __future__ import annotations

import numpy as np
import torch

from edgesim.backend import DeviceWork, RoundOutcome, RoundPlan, SystemView
from edgesim.learning.algorithms import register
from edgesim.learning.algorithms.common import (
    accuracy_metrics,
    evaluate_personal,
    has_unlabeled,
    labeling_accuracy,
    mean_loss,
    sample_clients,
    sgd_cycles,
    sgd_task,
    step_metrics,
    to_cpu,
    to_device,
    train_devices,
)
from edgesim.learning.algorithms.fedfomo.config import FedFomoConfig
from edgesim.learning.context import Context
from edgesim.learning.costs import forward_cycles_per_sample
from edgesim.learning.inference import cross_entropy_losses
from edgesim.learning.state import flatten_states

MIN_DISTANCE = 1e-12


def epsilon_greedy(
    affinity: np.ndarray, candidates, m: int, epsilon: float, rng: np.random.Generator
) -> list[int]:
    """M picks from ``candidates``: each with probability ``epsilon`` the next of a random order,
    else the next by ``affinity`` (descending, random tie-break); no repeats (NVlabs ``get_federating_clients``)."""
    cands = [int(c) for c in candidates]
    m = min(m, len(cands))
    if m == 0:
        return []
    vals = np.asarray([affinity[c] for c in cands], dtype=float)
    ties = rng.random(len(cands))
    top = [cands[j] for j in np.lexsort((ties, vals))[::-1]]
    shuffled = [cands[j] for j in rng.permutation(len(cands))]
    chosen: list[int] = []
    for _ in range(m):
        source = shuffled if rng.uniform() < epsilon else top
        while source[0] in chosen:
            source.pop(0)
        chosen.append(source.pop(0))
    return chosen


def fomo_weights(baseline_loss: float, losses, distances) -> tuple[np.ndarray, np.ndarray]:
    """``(δ, w)``: ``δ_n = (L(baseline) − L_n) / d_n`` and ``w_n = max(δ_n, 0) / Σ max(δ, 0)`` (all 0 if none > 0)."""
    losses = np.asarray(losses, dtype=float)
    d = np.maximum(np.asarray(distances, dtype=float), MIN_DISTANCE)
    delta = (float(baseline_loss) - losses) / d
    pos = np.maximum(delta, 0.0)
    total = pos.sum()
    return delta, (pos / total if total > 0 else np.zeros_like(pos))


def affinity_update(delta) -> np.ndarray:
    """What is added to P_i for the scored models: ``δ / |Σ δ|`` (+1e-9 to the normaliser below 1e-9)."""
    delta = np.asarray(delta, dtype=float)
    norm = abs(delta.sum())
    if norm < 1e-9:
        norm += 1e-9
    return delta / norm


def fomo_update(baseline, models, weights):
    """``θ_i + Σ_n w_n (θ_n − θ_i)`` on the floating-point entries; the rest stay the baseline's."""
    out = {}
    for k, b in baseline.items():
        if not b.is_floating_point():
            out[k] = b
            continue
        acc = b.clone()
        for m, w in zip(models, weights):
            if w:
                acc.add_(m[k] - b, alpha=float(w))
        out[k] = acc
    return out


class FedFomo:
    name = "fedfomo"

    def __init__(self, ctx: Context, cfg: FedFomoConfig):
        self.ctx, self.cfg = ctx, cfg
        n = ctx.n_devices
        self.task = sgd_task(ctx)
        first = ctx.init_state()
        self.models = [first] * n
        self.federated = [first] * n  # each device's model right after its last FedFomo update
        self.server: dict[int, dict] = {}
        self.affinity = np.zeros((n, n))
        np.fill_diagonal(self.affinity, cfg.self_affinity)
        self.train_sets, self.val_sets = [], []
        for d, c in enumerate(ctx.clients):
            if cfg.validation == "labeled":
                self.train_sets.append((c.x_sup, c.y_sup))
                self.val_sets.append((c.x_lab, c.y_lab))
            else:
                k = c.y_sup.shape[0]
                n_val = min(k - 1, max(1, int(round(cfg.val_fraction * k)))) if k > 1 else 0
                perm = torch.as_tensor(ctx.rng(self.name, "val", d).permutation(k), device=c.y_sup.device)
                val, tr = perm[:n_val], perm[n_val:]
                self.train_sets.append((c.x_sup[tr], c.y_sup[tr]))
                self.val_sets.append((c.x_sup[val], c.y_sup[val]))
        self.selected: tuple[int, ...] = ()
        self.downloads: dict[int, list[int]] = {}

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx, cfg, r = self.ctx, self.cfg, view.round_index
        self.selected = sample_clients(ctx, r, ctx.run_cfg.clients_per_round, view)
        eps = max(cfg.epsilon - r * cfg.epsilon_decay, 0.0)
        available = sorted(self.server)
        self.downloads = {
            i: epsilon_greedy(self.affinity[i], [j for j in available if j != i], cfg.n_download, eps,
                              ctx.rng(self.name, "download", r, i))
            for i in self.selected
        }
        fwd = forward_cycles_per_sample(ctx.cycles_per_sample)
        work = tuple(
            DeviceWork(
                device=i,
                compute_cycles={
                    "train": sgd_cycles(ctx, self.task, self.train_sets[i][1].shape[0]),
                    "fomo_weights": (len(self.downloads[i]) + 1) * fwd * self.val_sets[i][1].shape[0],
                },
                upload_bits=ctx.model_bits,
                download_bits=len(self.downloads[i]) * ctx.model_bits,
            )
            for i in self.selected
        )
        return RoundPlan(work, info={"K": len(self.selected), "M": float(np.mean([len(v) for v in self.downloads.values()] or [0]))})

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, cfg, r = self.ctx, self.cfg, outcome.round_index
        starts, n_positive = [], 0
        for i in self.selected:
            base, cands = self.models[i], self.downloads[i]
            if not cands or self.val_sets[i][1].shape[0] == 0:
                starts.append(base)
                continue
            states = [self.server[j] for j in cands]
            x, y = self.val_sets[i]
            losses = cross_entropy_losses(ctx.model, [base] + states, [x], [y],
                                          batch_size=ctx.train_cfg.eval_batch_size, vectorize=ctx.device.type == "cuda")
            flat = flatten_states([base] + states)
            p = 1 if cfg.distance == "l1" else 2
            dist = (flat[1:] - flat[:1]).norm(p=p, dim=1).double().cpu().numpy()
            delta, w = fomo_weights(float(losses[0, 0]), losses[1:, 0].numpy(), dist)
            self.affinity[i, cands] += affinity_update(delta)
            n_positive += int((w > 0).sum())
            starts.append(fomo_update(base, states, w) if w.sum() > 0 else base)
        sel = list(self.selected)
        for d, start in zip(sel, starts):
            self.federated[d] = start
        result = train_devices(ctx, self.name, r, sel, starts, [self.train_sets[d] for d in sel], self.task)
        arrived = set(outcome.arrived)
        for d, state in zip(sel, result.params):
            self.models[d] = state
            if d in arrived:
                self.server[d] = state
        metrics = {**accuracy_metrics(evaluate_personal(ctx, self.models)), "train_loss": mean_loss(result),
                   **step_metrics(result)}
        if has_unlabeled(ctx):
            metrics.update(accuracy_metrics(labeling_accuracy(ctx, self.models), "labeling_accuracy"))
        if cfg.report_federated:
            metrics.update(accuracy_metrics(evaluate_personal(ctx, self.federated), "federated_accuracy"))
            if has_unlabeled(ctx):
                metrics.update(accuracy_metrics(labeling_accuracy(ctx, self.federated), "federated_labeling_accuracy"))
        metrics["fomo_positive"] = n_positive / max(1, len(sel))
        return metrics

    def state_dict(self) -> dict:
        return {
            "models": [to_cpu(m) for m in self.models],
            "federated": [to_cpu(m) for m in self.federated],
            "server": {d: to_cpu(m) for d, m in self.server.items()},
            "affinity": self.affinity.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.models = [to_device(self.ctx, m) for m in state["models"]]
        self.federated = [to_device(self.ctx, m) for m in state["federated"]]
        self.server = {int(d): to_device(self.ctx, m) for d, m in state["server"].items()}
        self.affinity = np.array(state["affinity"], dtype=float)


@register("fedfomo", FedFomoConfig, "FedFomo: personalised first-order weighting of M downloaded models", display="FedFomo")
def build_fedfomo(ctx: Context, cfg: FedFomoConfig) -> FedFomo:
    return FedFomo(ctx, cfg)
