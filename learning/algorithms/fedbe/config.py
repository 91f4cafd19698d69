"""FedBE's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.fedbe.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_choice, check_int, check_number
from edgesim.learning.algorithms import declare


@dataclass(frozen=True)
class FedBEConfig:
    """FedBE's options (the algorithm's module docstring), one a line; defaults FedBE's ``run.sh`` but one.

    ``server_fraction``: the server's unlabelled set as a fraction of the train split (drawn from no device's data).
    ``server_samples``: the server set's size in samples (unset: ``server_fraction`` of the train split).
    ``n_samples``: models sampled around the global model per round, teachers beside w̄ and the client models.
    ``mode``: how a model is sampled, ``"gaussian"`` (SWAG around w_prev) or ``"dirichlet"`` (Σ π_i w_i).
    ``var_scale``: SWAG's scale of σ in w_s = w_prev + stepsize·ν·(μ + var_scale·σ·ε).
    ``swag_stepsize``: SWAG's step along the clients' mean normalised update (the factor of ν).
    ``dirichlet_alpha``: α of the Dir(α·1) weights π over the client models (``mode = "dirichlet"``).
    ``temperature``: T that sharpens the teachers' mean softmax into the target, p^(1/T) renormalised.
    ``distill_epochs``: epochs of the student's distillation on the server set (FedBE's ``run.sh``: 20).
    ``distill_lr``: the distillation SGD's learning rate.
    ``distill_momentum``: the distillation SGD's momentum.
    ``distill_weight_decay``: the distillation SGD's weight decay.
    ``distill_batch_size``: the distillation's batch of server samples.
    ``weighting``: the weights of w̄'s average, ``"samples"`` (labelled samples of a device) or ``"uniform"``.
    ``server_on_clock``: the server's ensemble and distillation take clock time (false: free, DoFed-SPP §3.1).
    """

    server_fraction: float = 0.05
    server_samples: Optional[int] = None
    n_samples: int = 10
    mode: str = "gaussian"
    var_scale: float = 0.1
    swag_stepsize: float = 1.0
    dirichlet_alpha: float = 1.0
    temperature: float = 0.5
    distill_epochs: int = 2
    distill_lr: float = 1e-3
    distill_momentum: float = 0.9
    distill_weight_decay: float = 1e-5
    distill_batch_size: int = 128
    weighting: str = "samples"
    server_on_clock: bool = True

    def __post_init__(self):
        check_number("server_fraction", self.server_fraction, minimum=0, strict=True)
        if self.server_fraction > 1:
            raise ValueError(f"server_fraction = {self.server_fraction!r}: expected a fraction in (0, 1]")
        if self.server_samples is not None:
            check_int("server_samples", self.server_samples, 1)
        check_int("n_samples", self.n_samples, 0)
        check_choice("mode", self.mode, ("gaussian", "dirichlet"))
        check_number("var_scale", self.var_scale, minimum=0)
        check_number("swag_stepsize", self.swag_stepsize, minimum=0)
        check_number("dirichlet_alpha", self.dirichlet_alpha, minimum=0, strict=True)
        check_number("temperature", self.temperature, minimum=0, strict=True)
        check_int("distill_epochs", self.distill_epochs, 0)
        check_number("distill_lr", self.distill_lr, minimum=0, strict=True)
        check_number("distill_momentum", self.distill_momentum, minimum=0)
        if self.distill_momentum >= 1:
            raise ValueError(f"distill_momentum = {self.distill_momentum!r}: expected a number in [0, 1)")
        check_number("distill_weight_decay", self.distill_weight_decay, minimum=0)
        check_int("distill_batch_size", self.distill_batch_size, 1)
        check_choice("weighting", self.weighting, ("samples", "uniform"))
        if not isinstance(self.server_on_clock, bool):
            raise ValueError(f"server_on_clock = {self.server_on_clock!r}: expected true or false")


FedBEConfig.COMPRESSION_REFUSED = (  # docs/model/compression.md
    "its server fits a distribution to the uploaded models and distils a sampled ensemble; not implemented")

declare("fedbe", FedBEConfig, module="edgesim.learning.algorithms.fedbe.algorithm", display="FedBE",
        summary="FedBE: FedAvg + SWAG-sampled Bayesian ensemble distilled on server unlabelled data")
