"""pFedMe's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.pfedme.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_int, check_number
from edgesim.learning.algorithms import declare


@dataclass(frozen=True)
class PFedMeConfig:
    """pFedMe's options (Dinh et al., NeurIPS 2020; the algorithm module's docstring has the update rules).

    ``lam``: λ, how strongly a device's personalised model θ is pulled toward its local model (Eq. 7).
    ``inner_steps``: K, the gradient steps on θ per mini-batch that approximately solve Eq. (7).
    ``personal_lr``: η_p, the step size of those inner steps on θ.
    ``beta``: β, the server's mixing of the devices' average into the global model (Eq. 10), 1 taking the average.
    ``lr``: η, the local model's step toward θ (unset: ``[train] lr``).
    """

    lam: float = 15.0
    inner_steps: int = 5
    personal_lr: float = 0.09
    beta: float = 1.0
    lr: Optional[float] = None

    def divergence_hint(self) -> str:
        """The other step size to lower when a run diverges. The K inner steps are gradient descent on
        f_k(θ) + (λ/2)‖θ − w_k‖², whose curvature is L + λ (L: the batch loss's largest Hessian eigenvalue), so they
        are stable only while η_p·(L + λ) < 2: η_p = 0.09 with λ = 15 allows L < 7.2 (docs/model/fedavg_family.md)."""
        return (f"personal_lr (= {self.personal_lr:g}; the inner steps need personal_lr * (L + lam) < 2, L the "
                f"loss's curvature: lam = {self.lam:g} leaves L < {2 / self.personal_lr - self.lam:.3g})")

    def __post_init__(self):
        check_number("lam", self.lam, minimum=0)
        check_int("inner_steps", self.inner_steps, 1)
        check_number("personal_lr", self.personal_lr, minimum=0, strict=True)
        check_number("beta", self.beta, minimum=0, strict=True)
        check_number("lr", self.lr, minimum=0, strict=True, allow_none=True)


PFedMeConfig.COMPRESSION_REFUSED = (  # docs/model/compression.md
    "its bi-level personal models are not wired to the encoders; not implemented")

declare("pfedme", PFedMeConfig, module="edgesim.learning.algorithms.pfedme.algorithm", display="pFedMe",
        summary="pFedMe: personalised models by Moreau envelopes, every device trains")
