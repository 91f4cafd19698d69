"""pFedMe's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.pfedme.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_int, check_number
from edgesim.learning.algorithms import declare


@dataclass(frozen=True)
class PFedMeConfig:
    """``lam`` λ, ``inner_steps`` K, ``personal_lr`` η_p, ``beta`` β (module docstring); ``lr`` η overrides
    ``[train] lr``."""

    lam: float = 15.0
    inner_steps: int = 5
    personal_lr: float = 0.09
    beta: float = 1.0
    lr: Optional[float] = None

    def __post_init__(self):
        check_number("lam", self.lam, minimum=0)
        check_int("inner_steps", self.inner_steps, 1)
        check_number("personal_lr", self.personal_lr, minimum=0, strict=True)
        check_number("beta", self.beta, minimum=0, strict=True)
        check_number("lr", self.lr, minimum=0, strict=True, allow_none=True)


PFedMeConfig.COMPRESSION_REFUSED = (  # docs/compression.md
    "its bi-level personal models are not wired to the encoders; not implemented")

declare("pfedme", PFedMeConfig, module="edgesim.learning.algorithms.pfedme.algorithm", display="pFedMe",
        summary="pFedMe: personalised models by Moreau envelopes, every device trains")
