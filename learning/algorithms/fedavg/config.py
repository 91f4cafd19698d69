"""The FedAvg family's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.fedavg.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_choice, check_int, check_number, fail
from edgesim.learning.algorithms import ScenarioFacts, declare_variants, unused_options, variant
from edgesim.learning.server_optim import check_server_options

OBJECTIVES = ("supervised", "fixmatch", "uda")
DATA = ("labeled", "all_labels")
LOCAL = ("none", "batchnorm", "head", "lg")


@dataclass(frozen=True)
class FedAvgConfig:
    """Options of the FedAvg family (module docstring; defaults and sources in docs/model/fedavg_family.md), one a line.

    ``weighting``: ``"samples"`` (by the samples a device trained on) or ``"uniform"``: the average's weights.
    ``mu``: μ of FedProx's proximal term (μ/2)‖w − w_global‖² (Li et al., MLSys 2020, Eq. 2), 0 is FedAvg.
    ``objective``: the local loss, ``"supervised"`` (cross-entropy), ``"fixmatch"`` or ``"uda"`` (+ unlabelled data).
    ``data``: what a supervised device trains on, ``"labeled"`` or ``"all_labels"`` (the -SL bound: true labels).
    ``local``: keys that never leave a device, ``"none"``, ``"batchnorm"``, ``"head"`` or ``"lg"`` (LG-FedAvg).
    ``lg_global_layers``: with ``local = "lg"``, how many last weight layers are global (averaged, sent to all).
    ``threshold``: FixMatch's τ, the confidence max q a pseudo-label needs (Sohn et al., NeurIPS 2020).
    ``lambda_u``: FixMatch's λ_u, the unlabelled loss's weight.
    ``unlabeled_ratio``: μ, unlabelled rows per labelled row in a step (μB, B = ``[train] batch_size``).
    ``uda_threshold``: UDA's β, the confidence max p an unlabelled row needs to count (Xie et al., NeurIPS 2020).
    ``uda_temperature``: UDA's T, the sharpening temperature of the weak view's target.
    ``uda_lambda``: UDA's λ, the consistency term's weight once ramped up.
    ``uda_ramp_steps``: local steps over which UDA's λ grows linearly from 0 to its full value.
    ``optimizer``: the local optimizer, ``"sgd"`` or ``"adam"`` (unset: ``[train] optimizer``).
    ``lr``: the local learning rate (unset: ``[train] lr``).
    ``nesterov``: Nesterov momentum for the local SGD (unset: ``[train] nesterov``).
    ``schedule``: the local learning-rate schedule, ``"constant"`` or ``"cosine"`` (unset: ``[train] schedule``).
    ``server_optimizer``: the server step after averaging, ``"sgd"``, ``"momentum"``, ``"adam"`` or ``"yogi"``.
    ``server_lr``: the server step's η (Reddi et al., ICLR 2021, Algorithm 2), 1 with ``"sgd"`` is FedAvg.
    ``server_momentum``: FedAvgM's momentum β, or β₁ of FedAdam and FedYogi.
    ``server_beta2``: β₂ of FedAdam and FedYogi, the second moment's decay.
    ``server_tau``: τ of FedAdam and FedYogi, the adaptivity added to √v.
    ``ema_decay``: d, evaluate the moving average ē ← d·ē + (1 − d)·w of the global model (unset: w itself).
    """

    weighting: str = "samples"
    mu: float = 0.0
    objective: str = "supervised"
    data: str = "labeled"
    local: str = "none"
    lg_global_layers: int = 2
    threshold: float = 0.95
    lambda_u: float = 1.0
    unlabeled_ratio: int = 7
    uda_threshold: float = 0.6
    uda_temperature: float = 1.0
    uda_lambda: float = 8.0
    uda_ramp_steps: int = 20
    optimizer: Optional[str] = None
    lr: Optional[float] = None
    nesterov: Optional[bool] = None
    schedule: Optional[str] = None
    server_optimizer: str = "sgd"
    server_lr: float = 1.0
    server_momentum: float = 0.9
    server_beta2: float = 0.99
    server_tau: float = 1e-3
    ema_decay: Optional[float] = None

    def __post_init__(self):
        check_choice("weighting", self.weighting, ("samples", "uniform"))
        check_number("mu", self.mu, minimum=0)
        check_choice("objective", self.objective, OBJECTIVES)
        check_choice("data", self.data, DATA)
        check_choice("local", self.local, LOCAL)
        check_int("lg_global_layers", self.lg_global_layers, 1)
        for name in ("threshold", "uda_threshold"):
            check_number(name, getattr(self, name), minimum=0)
            if getattr(self, name) > 1:
                fail(name, getattr(self, name), "a probability in [0, 1]")
        check_number("lambda_u", self.lambda_u, minimum=0)
        check_int("unlabeled_ratio", self.unlabeled_ratio, 1)
        check_number("uda_temperature", self.uda_temperature, minimum=0, strict=True)
        check_number("uda_lambda", self.uda_lambda, minimum=0)
        check_int("uda_ramp_steps", self.uda_ramp_steps, 1)
        if self.data == "all_labels" and self.objective != "supervised":
            fail("data", self.data, '"labeled" unless objective = "supervised" (all labels leave nothing unlabelled)')
        if self.optimizer is not None:
            check_choice("optimizer", self.optimizer, ("sgd", "adam"))
        check_number("lr", self.lr, minimum=0, strict=True, allow_none=True)
        if self.nesterov is not None and not isinstance(self.nesterov, bool):
            fail("nesterov", self.nesterov, "true or false")
        if self.schedule is not None:
            check_choice("schedule", self.schedule, ("constant", "cosine"))
        check_server_options(self)
        check_number("ema_decay", self.ema_decay, minimum=0, allow_none=True)
        if self.ema_decay is not None and self.ema_decay >= 1:
            fail("ema_decay", self.ema_decay, "a decay in [0, 1) (1 would never move from the initial model)")


FedAvgConfig.DEFINING = ("objective", "data", "local", "server_optimizer")
# [compression] (docs/model/compression.md): the global keys' update up, the global keys' model down.
FedAvgConfig.COMPRESSION = "the global keys' update (uplink) and model (downlink)"

FedProxConfig = variant(FedAvgConfig, "FedProxConfig", "FedProx: μ = 0.01 (docs/model/fedavg_family.md).", mu=0.01)
FedBNConfig = variant(FedAvgConfig, "FedBNConfig", "FedBN: BatchNorm kept local.", local="batchnorm")
# Server optimizers (Reddi et al., ICLR 2021; FedAvgM: Hsu et al. 2019): η, β₁, β₂, τ as Reddi et al.'s defaults
# (β₁ = 0.9, β₂ = 0.99, τ = 1e-3); η = 0.01 for the adaptive ones is a start to tune (their Table 8 grid).
FedAvgMConfig = variant(FedAvgConfig, "FedAvgMConfig", "FedAvgM: server momentum β = 0.9, η = 1.",
                        server_optimizer="momentum")
FedAdamConfig = variant(FedAvgConfig, "FedAdamConfig", "FedAdam: Adam at the server, η = 0.01.",
                        server_optimizer="adam", server_lr=0.01)
FedYogiConfig = variant(FedAvgConfig, "FedYogiConfig", "FedYogi: Yogi at the server, η = 0.01.",
                        server_optimizer="yogi", server_lr=0.01)
_SL = "fully labelled (the unlabelled data's true labels are used): an upper bound"
VARIANTS = {
    "fedavg": (FedAvgConfig, "FedAvg", "FedAvg: sample K devices, average their models weighted by sample count"),
    "fedprox": (FedProxConfig, "FedProx", "FedProx: FedAvg with a proximal term (mu/2)||w - w_global||^2"),
    "fedbn": (FedBNConfig, "FedBN", "FedBN: FedAvg with BatchNorm layers kept local"),
    "fedavgm": (FedAvgMConfig, "FedAvgM", "FedAvgM: FedAvg with server momentum (Hsu et al. 2019)"),
    "fedadam": (FedAdamConfig, "FedAdam", "FedAdam: FedAvg with Adam as the server optimizer (Reddi et al. 2021)"),
    "fedyogi": (FedYogiConfig, "FedYogi", "FedYogi: FedAvg with Yogi as the server optimizer (Reddi et al. 2021)"),
    "fedavg_labeled": (variant(FedAvgConfig, "FedAvgLabeledConfig", "FedAvg on labelled data only.", data="labeled"),
                       "FedAvg*", "FedAvg*: FedAvg on the labelled data only (FedDure's floor)"),
    "fedavg_sl": (variant(FedAvgConfig, "FedAvgSLConfig", _SL, data="all_labels"), "FedAvg-SL", f"FedAvg-SL: {_SL}"),
    "fedprox_sl": (variant(FedAvgConfig, "FedProxSLConfig", _SL, data="all_labels", mu=0.01), "FedProx-SL", f"FedProx-SL: {_SL}"),
    "fedbn_sl": (variant(FedAvgConfig, "FedBNSLConfig", _SL, data="all_labels", local="batchnorm"), "FedBN-SL", f"FedBN-SL: {_SL}"),
    "fixavg": (variant(FedAvgConfig, "FixAvgConfig", "FedAvg + FixMatch.", objective="fixmatch"), "FixAvg",
               "FixAvg: FedAvg with FixMatch local training"),
    "fixprox": (variant(FedAvgConfig, "FixProxConfig", "FedProx + FixMatch.", objective="fixmatch", mu=0.01), "FixProx",
                "FixProx: FedProx with FixMatch local training"),
    "fixbn": (variant(FedAvgConfig, "FixBNConfig", "FedBN + FixMatch.", objective="fixmatch", local="batchnorm"), "FixBN",
              "FixBN: FedBN with FixMatch local training"),
    "fedavg_uda": (variant(FedAvgConfig, "FedAvgUDAConfig", "FedAvg + UDA.", objective="uda"), "FedAvg+UDA",
                   "FedAvg+UDA: FedAvg with UDA local training"),
    "fedprox_uda": (variant(FedAvgConfig, "FedProxUDAConfig", "FedProx + UDA.", objective="uda", mu=0.01), "FedProx+UDA",
                    "FedProx+UDA: FedProx with UDA local training"),
    "fedper": (variant(FedAvgConfig, "FedPerConfig", "FedPer: the last linear layer stays on the device.", local="head"), "FedPer",
               "FedPer: FedAvg of the base layers, the head kept personal"),
    "lg_fedavg": (variant(FedAvgConfig, "LGFedAvgConfig", "LG-FedAvg: only the last layers are global.", local="lg"), "LG-FedAvg",
                  "LG-FedAvg: local representation layers, global last layers sent to every device"),
}


def check_fedavg(cfg: FedAvgConfig, facts: ScenarioFacts) -> None:
    """Options of another objective or locality are refused, not ignored; LG-FedAvg's global layers must exist."""
    unused_options(cfg, {
        **{k: cfg.objective != "fixmatch" for k in ("threshold", "lambda_u")},
        "unlabeled_ratio": cfg.objective == "supervised",
        **{k: cfg.objective != "uda" for k in ("uda_threshold", "uda_temperature", "uda_lambda", "uda_ramp_steps")},
        "lg_global_layers": cfg.local != "lg",
        "server_momentum": cfg.server_optimizer == "sgd",
        **{k: cfg.server_optimizer in ("sgd", "momentum") for k in ("server_beta2", "server_tau")},
    })
    if cfg.local == "lg" and facts.model_layers is not None and cfg.lg_global_layers > facts.model_layers:
        fail("lg_global_layers", cfg.lg_global_layers,
             f"at most the {facts.model_layers} weight layers of [train] model = {facts.train.model!r}")


def has_hierarchical_form(config_cls: type) -> bool:
    """Whether a variant has HierFAVG's form (docs/model/hierarchy.md): every key shared (``local = "none"``: a
    device's personal keys would have no edge or cloud model) and the plain average at the server (``"sgd"`` with
    η = 1: a server optimizer's state has no per-cell meaning in the paper) — FedAvg, FedProx and the FixMatch and
    UDA objectives, the -SL bounds. ``ema_decay`` is checked when the mode is made."""
    cfg = config_cls()
    return cfg.local == "none" and cfg.server_optimizer == "sgd" and cfg.server_lr == 1.0


declare_variants(VARIANTS, module="edgesim.learning.algorithms.fedavg.algorithm", check=check_fedavg,
                 asynchronous=True,  # FedAvg.asynchronous(): FedAsync and FedBuff
                 per_device_iterations=True,  # FedAvg.task_for / cycles_of: each device its own I_k
                 hierarchical=has_hierarchical_form)  # FedAvg.hierarchical(): HierFAVG
