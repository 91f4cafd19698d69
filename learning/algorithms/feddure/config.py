"""FedDure's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.feddure.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_choice, check_int, check_number, fail
from edgesim.learning.algorithms import ScenarioFacts, declare_variants, unused_options, variant

SIGNS = {"paper": 1.0, "flipped": -1.0}
NORMS = ("mean", "sum")
FREG_FORMS = ("fc_sigmoid", "mlp_relu")
FREG_INPUTS = ("attached", "detached")


@dataclass(frozen=True)
class FedDureConfig:
    """FedDure's options (module docstring; defaults from the paper, §4.1, and docs/studies/feddure.md).

    ``lr`` η (local model), ``creg_lr`` η_s (C-reg, and the virtual step),
    ``freg_lr`` η_w (F-reg); unset, η_s and η_w are η (§4.1: "learning rates = 0.0005 for η_s, η and η_w",
    one rate; a study that tunes ``lr`` tunes all three); ``optimizer`` ``"adam"`` or ``"sgd"`` for the
    three real steps. ``labeled_batch`` B; ``unlabeled_ratio`` μ (μB
    unlabelled rows per step). ``feedback_sign`` ``"paper"`` (+d) or
    ``"flipped"`` (−d; formerly ``"code"``); ``weight_norm`` ``"mean"`` or ``"sum"`` (Σm);
    ``creg``/``freg`` the regulators (Table 2's ablations); ``threshold`` τ
    of the fixed threshold that replaces F-reg; ``freg_hidden`` its width;
    ``freg_form`` its shape: ``"mlp_relu"`` (Linear–ReLU–Linear–Sigmoid, the
    release's WNet: one per-sample output, the default since issue 54.2) or
    ``"fc_sigmoid"`` (the mean of the FC layer's H sigmoids: a reading that pins
    the weight near 0.5); ``freg_input`` ``"attached"`` (the paper: Eqs. 2 and 4
    differentiate H(w; φ) = f_w(f_d(T_s u; φ); w) w.r.t. φ, so ∂H/∂φ is kept) or
    ``"detached"`` (the earlier reading, F-reg's input a constant).
    """

    lr: float = 5e-4
    creg_lr: Optional[float] = None
    freg_lr: Optional[float] = None
    optimizer: str = "adam"
    labeled_batch: int = 10
    unlabeled_ratio: int = 7
    feedback_sign: str = "paper"
    weight_norm: str = "mean"
    creg: bool = True
    freg: bool = True
    threshold: float = 0.95
    freg_hidden: int = 128
    freg_form: str = "mlp_relu"
    freg_input: str = "attached"

    @property
    def eta_s(self) -> float:
        """η_s: ``creg_lr``, or η when unset (the paper's one rate)."""
        return self.lr if self.creg_lr is None else self.creg_lr

    @property
    def eta_w(self) -> float:
        """η_w: ``freg_lr``, or η when unset."""
        return self.lr if self.freg_lr is None else self.freg_lr

    def __post_init__(self):
        for name in ("lr", "creg_lr", "freg_lr"):
            if name == "lr" or getattr(self, name) is not None:
                check_number(name, getattr(self, name), minimum=0, strict=True)
        check_choice("optimizer", self.optimizer, ("adam", "sgd"))
        check_int("labeled_batch", self.labeled_batch, 1)
        check_int("unlabeled_ratio", self.unlabeled_ratio, 1)
        if self.feedback_sign == "code":
            fail("feedback_sign", self.feedback_sign, '"flipped" (renamed: it flips the sign of d and is not the '
                 'official code\'s algorithm, which is the registered variant feddure_code)')
        check_choice("feedback_sign", self.feedback_sign, tuple(SIGNS))
        check_choice("weight_norm", self.weight_norm, NORMS)
        for name in ("creg", "freg"):
            if not isinstance(getattr(self, name), bool):
                fail(name, getattr(self, name), "true or false")
        if not (self.creg or self.freg):
            fail("creg", self.creg, "true when freg = false (without both regulators FedDure is FixMatch: fixavg)")
        check_number("threshold", self.threshold, minimum=0)
        if self.threshold > 1:
            fail("threshold", self.threshold, "a probability in [0, 1]")
        check_int("freg_hidden", self.freg_hidden, 1)
        check_choice("freg_form", self.freg_form, FREG_FORMS)
        check_choice("freg_input", self.freg_input, FREG_INPUTS)


FedDureConfig.DEFINING = ("creg", "freg")
# [compression] (docs/model/compression.md): θ's update up, θ down; C-reg's φ and F-reg's w never leave the device.
FedDureConfig.COMPRESSION = "the model θ's update (uplink) and θ (downlink)"

VARIANTS = {
    "feddure": (FedDureConfig, "FedDure", "FedDure: dual regulators (C-reg feedback, F-reg instance weights)"),
    "feddure_no_creg": (variant(FedDureConfig, "FedDureNoCRegConfig", "FedDure without C-reg (Table 2).", creg=False),
                        "FedDure w/o C-reg", "FedDure without C-reg: no feedback term, F-reg learnt through θ"),
    "feddure_no_freg": (variant(FedDureConfig, "FedDureNoFRegConfig", "FedDure without F-reg (Table 2).", freg=False),
                        "FedDure w/o F-reg", "FedDure without F-reg: a fixed confidence threshold weights pseudo-labels"),
}


def check_feddure(cfg: FedDureConfig, facts: ScenarioFacts) -> None:
    """``threshold`` replaces F-reg (read only without it); ``freg_hidden``, ``freg_form``, ``freg_input``,
    ``freg_lr`` are F-reg's."""
    unused_options(cfg, {"threshold": cfg.freg, "freg_hidden": not cfg.freg, "freg_form": not cfg.freg,
                         "freg_input": not cfg.freg})


declare_variants(VARIANTS, module="edgesim.learning.algorithms.feddure.algorithm", check=check_feddure)
