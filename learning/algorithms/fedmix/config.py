"""FedMix/FedFreq's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.fedmix.algorithm`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_choice, check_int, check_number, fail
from edgesim.learning.algorithms import ScenarioFacts, declare_variants, variant

WEIGHTINGS = ("freq", "samples", "uniform")
SIGMA_STARTS = ("theta", "persist")
LABELLERS = ("theta", "sigma", "psi")
SERVER_VIEWS = ("weak", "clean")
PULLS = ("sum", "mean")


@dataclass(frozen=True)
class FedMixConfig:
    """FedMix + FedFreq (module docstring); defaults: the reconstruction of docs/studies/labels_at_server.md; one a line.

    ``alpha``: α, the weight of the clients' average ψ̄ in θ^{t+1} = α·ψ̄ + β·σ + γ·θ^t (Eq. 9, α + β + γ = 1).
    ``beta``: β, the weight of the server's supervised model σ^t in Eq. 9's mix.
    ``gamma``: γ, the weight of the previous global model θ^t in Eq. 9's mix.
    ``weighting``: the clients' weights p_k in ψ̄, ``"freq"`` (FedFreq, Eq. 10), ``"samples"`` or ``"uniform"``.
    ``freq_power``: FedFreq's exponent, p_k ∝ (1/c_k)^power with c_k the rounds client k has trained in.
    ``lambda_s``: λ_s, the weight of the server's loss λ_s·CE(y, f_σ(x)) (Eq. 6).
    ``lambda_1``: λ₁, the weight of the clients' pseudo-label term (Eq. 7).
    ``lambda_c``: λ_c, the weight of the optional KL consistency term KL(q ‖ f_ψ(π(u))) (0: off).
    ``lambda_2``: λ₂, the weight of the pull of ψ toward its anchor (its norm and stiffness: ``pull``).
    ``n_views``: A, the random flip∘shift copies whose mean prediction q labels a sample (Eq. 8).
    ``threshold``: τ, the confidence max q a pseudo-label needs (Eq. 8).
    ``sigma_start``: where the server's σ^t starts, ``"theta"`` (the global θ^t) or ``"persist"`` (its σ^{t−1}).
    ``send_sigma``: also broadcast σ^t (m more bits per client) as ψ's anchor (false: θ^t is the anchor).
    ``server_epochs``: epochs of σ's training on the server's labelled set per round.
    ``server_batch_size``: the server's labelled batch.
    ``batch_size``: the clients' unlabelled batch.
    ``lr``: the learning rate of clients and server (unset: ``[train] lr``).
    ``labeller``: the model whose A views label a client's rows (issue 54.3): ``"theta"`` θ^t, the received
    global model, frozen for the round (default); ``"sigma"`` σ^t (needs ``send_sigma``); ``"psi"`` ψ, the model
    being trained (the earlier reading: it labels itself at every step).
    ``server_views``: σ's training rows, ``"weak"`` (the flip∘shift views the labels come from, default) or
    ``"clean"`` (the earlier reading).
    ``pull``: λ₂'s norm, ``"sum"`` (λ₂·‖ψ − a‖², stiffness 2·λ₂ per entry, default) or ``"mean"`` (λ₂ over the
    P entries, stiffness 2·λ₂/P: the earlier reading, ≈ 5·10⁻⁶ for the ``cnn``, effectively off).
    """

    alpha: float = 0.5
    beta: float = 0.3
    gamma: float = 0.2
    weighting: str = "freq"
    freq_power: float = 1.0
    lambda_s: float = 10.0
    lambda_1: float = 1.0
    lambda_c: float = 0.0
    lambda_2: float = 1.0
    n_views: int = 2
    threshold: float = 0.75
    sigma_start: str = "theta"
    send_sigma: bool = False
    server_epochs: int = 1
    server_batch_size: int = 100
    batch_size: int = 100
    lr: Optional[float] = None
    labeller: str = "theta"
    server_views: str = "weak"
    pull: str = "sum"

    def __post_init__(self):
        for name in ("alpha", "beta", "gamma"):
            check_number(name, getattr(self, name), minimum=0)
        total = self.alpha + self.beta + self.gamma
        if not math.isclose(total, 1.0, rel_tol=0, abs_tol=1e-9):
            fail("alpha + beta + gamma", total, "1 (Eq. 9 mixes ψ̄, σ and θ with weights that sum to 1)")
        check_choice("weighting", self.weighting, WEIGHTINGS)
        check_number("freq_power", self.freq_power, minimum=0)
        for name in ("lambda_s", "lambda_1", "lambda_c", "lambda_2"):
            check_number(name, getattr(self, name), minimum=0)
        check_int("n_views", self.n_views, 1)
        check_choice("sigma_start", self.sigma_start, SIGMA_STARTS)
        if not isinstance(self.send_sigma, bool):
            fail("send_sigma", self.send_sigma, "true or false")
        check_number("threshold", self.threshold, minimum=0)
        if self.threshold > 1:
            fail("threshold", self.threshold, "a probability in [0, 1]")
        check_int("server_epochs", self.server_epochs, 0)
        check_int("server_batch_size", self.server_batch_size, 1)
        check_int("batch_size", self.batch_size, 1)
        check_number("lr", self.lr, minimum=0, strict=True, allow_none=True)
        check_choice("labeller", self.labeller, LABELLERS)
        if self.labeller == "sigma" and not self.send_sigma:
            fail("labeller", self.labeller, '"theta" or "psi" unless send_sigma = true (σ^t must reach the client)')
        check_choice("server_views", self.server_views, SERVER_VIEWS)
        check_choice("pull", self.pull, PULLS)


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


FedMixConfig.COMPRESSION_REFUSED = (  # docs/model/compression.md
    "it broadcasts theta (and sigma) and uploads psi of a split model; not implemented")

declare_variants(VARIANTS, module="edgesim.learning.algorithms.fedmix.algorithm", check=check_fedmix)
