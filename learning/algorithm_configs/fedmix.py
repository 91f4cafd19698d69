"""FedMix/FedFreq's options (torch-free; the algorithm: :mod:`learning.algorithms.fedmix`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_choice, check_int, check_number, fail
from learning.algorithm_configs import ScenarioFacts, declare_variants, variant


WEIGHTINGS = ("freq", "samples", "uniform")


@dataclass(frozen=True)
class FedMixConfig:
    """FedMix + FedFreq (module docstring). Defaults: ALGORITHMS reconstruction, FedMatch's values.

    ``alpha, beta, gamma``: the weights of ψ̄, σ and θ^t in Eq. 9 (sum 1).
    ``weighting``: the clients' weights p_k in ψ̄ — ``"freq"`` (FedFreq),
    ``"samples"`` (unlabelled samples held) or ``"uniform"``. ``freq_power``:
    the exponent of 1/c_k. ``lambda_s``, ``lambda_1``, ``lambda_2``: the
    server loss weight, the pseudo-label weight and the pull toward σ.
    ``threshold``: τ. ``server_epochs``/``server_batch_size``: the server's
    training per round; ``batch_size``: the clients' unlabelled batch.
    ``lr``: overrides ``[train] lr`` for clients and server.
    """

    alpha: float = 0.5
    beta: float = 0.3
    gamma: float = 0.2
    weighting: str = "freq"
    freq_power: float = 1.0
    lambda_s: float = 10.0
    lambda_1: float = 1e-2
    lambda_2: float = 10.0
    threshold: float = 0.75
    server_epochs: int = 1
    server_batch_size: int = 100
    batch_size: int = 100
    lr: Optional[float] = None

    def __post_init__(self):
        for name in ("alpha", "beta", "gamma"):
            check_number(name, getattr(self, name), minimum=0)
        total = self.alpha + self.beta + self.gamma
        if not math.isclose(total, 1.0, rel_tol=0, abs_tol=1e-9):
            fail("alpha + beta + gamma", total, "1 (Eq. 9 mixes ψ̄, σ and θ with weights that sum to 1)")
        check_choice("weighting", self.weighting, WEIGHTINGS)
        check_number("freq_power", self.freq_power, minimum=0)
        for name in ("lambda_s", "lambda_1", "lambda_2"):
            check_number(name, getattr(self, name), minimum=0)
        check_number("threshold", self.threshold, minimum=0)
        if self.threshold > 1:
            fail("threshold", self.threshold, "a probability in [0, 1]")
        check_int("server_epochs", self.server_epochs, 0)
        check_int("server_batch_size", self.server_batch_size, 1)
        check_int("batch_size", self.batch_size, 1)
        check_number("lr", self.lr, minimum=0, strict=True, allow_none=True)


FedMixConfig.DEFINING = ("weighting",)

VARIANTS = {
    "fedmix": (FedMixConfig, "FedMix+FedFreq", "FedMix + FedFreq: server-trained sigma, client psi, theta = a*psi + b*sigma + g*theta, weights 1/c_k"),
    "fedmix_samples": (variant(FedMixConfig, "FedMixSamplesConfig", "FedMix mixing with sample-count weights.", weighting="samples"),
                       "FedMix", "FedMix alone: the three-way mix with sample-count client weights"),
    "fedfreq": (variant(FedMixConfig, "FedFreqConfig", "FedFreq weights with plain averaging (theta = psi-bar).",
                         alpha=1.0, beta=0.0, gamma=0.0),
                "FedFreq", "FedFreq alone: client weights 1/c_k, plain averaging theta = psi-bar"),
}


SERVER_LABEL_PARTITIONS = ("labels_at_server", "labels_at_server_iid")


def needs_server_labels(algorithm: str, facts: ScenarioFacts) -> None:
    """A method whose server trains on labels needs a partition that leaves it a labelled set."""
    if facts.data.partition not in SERVER_LABEL_PARTITIONS:
        raise ValueError(f"needs a labelled set at the server, which [data] partition = {facts.data.partition!r} "
                         f"does not leave; expected partition = \"labels_at_server\" or \"labels_at_server_iid\"")


def check_fedmix(cfg: FedMixConfig, facts: ScenarioFacts) -> None:
    needs_server_labels("fedmix", facts)


declare_variants(VARIANTS, module="learning.algorithms.fedmix", check=check_fedmix)
