"""Server optimizers of the FedAvg family (Reddi et al., "Adaptive Federated Optimization", ICLR 2021).

The server treats the change the round's average makes,
``Δ = average(arrived models) − x``, as a pseudo-gradient and takes one
optimizer step with it (Reddi et al., Algorithm 2):

- ``"sgd"``: ``x ← x + η Δ`` — with ``η = server_lr = 1`` this *is* FedAvg
  (the average itself, bit for bit);
- ``"momentum"`` (FedAvgM, Hsu et al. 2019): ``v ← β v + Δ``, ``x ← x + η v``;
- ``"adam"`` (FedAdam): ``m ← β₁ m + (1 − β₁) Δ``, ``v ← β₂ v + (1 − β₂) Δ²``,
  ``x ← x + η m / (√v + τ)``;
- ``"yogi"`` (FedYogi): as Adam with ``v ← v − (1 − β₂) Δ² sign(v − Δ²)``.

``v`` starts at ``τ²`` and ``m`` at zero (Reddi et al., Alg. 2). The step
applies to the model's trainable parameters; buffers (BatchNorm running
statistics, counters) take the average as they are, so an adaptive step never
makes a running variance negative. β is ``server_momentum`` (β₁ for Adam and
Yogi), β₂ ``server_beta2``, τ ``server_tau``.

Torch is imported only by :meth:`ServerOptimizer.step`, so configs validate torch-free.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from edgesim.config import check_choice, check_number, fail

SERVER_OPTIMIZERS = ("sgd", "momentum", "adam", "yogi")


def check_server_options(cfg) -> None:
    """Validate a config's ``server_optimizer``, ``server_lr``, ``server_momentum``, ``server_beta2``, ``server_tau``."""
    check_choice("server_optimizer", cfg.server_optimizer, SERVER_OPTIMIZERS)
    check_number("server_lr", cfg.server_lr, minimum=0, strict=True)
    for name in ("server_momentum", "server_beta2"):
        check_number(name, getattr(cfg, name), minimum=0)
        if getattr(cfg, name) >= 1:
            fail(name, getattr(cfg, name), "a number in [0, 1)")
    check_number("server_tau", cfg.server_tau, minimum=0, strict=True)


class ServerOptimizer:
    """One server step per round on the keys in ``trainable``; its moments are checkpointed with the algorithm."""

    def __init__(self, kind: str, lr: float, momentum: float, beta2: float, tau: float, trainable: Iterable[str]):
        self.kind, self.lr, self.momentum, self.beta2, self.tau = kind, float(lr), float(momentum), float(beta2), float(tau)
        self.trainable = frozenset(trainable)
        self.m: dict = {}
        self.v: dict = {}

    @property
    def is_plain_average(self) -> bool:
        """FedAvg exactly: the new global model is the average."""
        return self.kind == "sgd" and self.lr == 1.0

    def step(self, current: Mapping, average: Mapping) -> dict:
        """The new global state from the current one and the average of the arrived uploads."""
        if self.is_plain_average:
            return dict(average)
        import torch

        out = {}
        for key, avg in average.items():
            x = current[key]
            if key not in self.trainable or not x.is_floating_point():
                out[key] = avg
                continue
            delta = avg - x
            if self.kind == "sgd":
                out[key] = x + self.lr * delta
            elif self.kind == "momentum":
                v = self.m.get(key)
                self.m[key] = v = delta.clone() if v is None else self.momentum * v + delta
                out[key] = x + self.lr * v
            else:
                m = self.m.get(key, torch.zeros_like(x))
                v = self.v.get(key, torch.full_like(x, self.tau ** 2))
                m = self.momentum * m + (1 - self.momentum) * delta
                d2 = delta * delta
                v = self.beta2 * v + (1 - self.beta2) * d2 if self.kind == "adam" else v - (1 - self.beta2) * d2 * torch.sign(v - d2)
                self.m[key], self.v[key] = m, v
                out[key] = x + self.lr * m / (v.sqrt() + self.tau)
        return out

    def state_dict(self) -> dict:
        return {"m": {k: t.detach().cpu().clone() for k, t in self.m.items()},
                "v": {k: t.detach().cpu().clone() for k, t in self.v.items()}}

    def load_state_dict(self, state: dict, device) -> None:
        self.m = {k: t.to(device) for k, t in state["m"].items()}
        self.v = {k: t.to(device) for k, t in state["v"].items()}
