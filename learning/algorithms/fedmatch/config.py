"""FedMatch's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.fedmatch.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_choice, check_int, check_number, fail
from edgesim.learning.algorithms import ScenarioFacts, declare, unused_options


@dataclass(frozen=True)
class FedMatchConfig:
    """FedMatch (module docstring); defaults: the official labels-at-server ``config.py``; one option a line.

    ``labels``: where the labelled data are, ``"server"`` (σ trained there) or ``"client"`` (σ and ψ on the clients).
    ``lambda_s``: λ_s, the weight of σ's supervised loss λ_s·CE.
    ``lambda_i``: λ_i, the weight of the helpers' KL consistency term (1/H)Σ_h KL(p_h ‖ p).
    ``lambda_a``: λ_a, the weight of the CE to the agreement vote on the RandAug view.
    ``lambda_l1``: λ_L1, the weight of ψ's sparsity term ‖ψ‖₁.
    ``lambda_l2``: λ_L2, the weight of ‖σ − ψ‖², which keeps ψ near σ.
    ``l1_threshold``: ψ's hard threshold at evaluation, entries with |ψ| at or below it count as 0.
    ``threshold``: τ, the confidence max p an unlabelled row needs to enter ψ's loss.
    ``n_helpers``: H, the helpers (other clients' ψ, nearest by output) a client receives.
    ``helper_interval``: helpers are sent and used in every that many rounds ((r+1) % interval = 0).
    ``psi_factor``: ψ's start as a multiple of σ's initialisation (ψ = factor·σ).
    ``server_epochs``: epochs of σ's training at the server per round (labels at the server).
    ``server_batch_size``: the server's labelled batch for σ's training (labels at the server).
    ``batch_size``: B, the clients' unlabelled batch.
    ``labeled_batch_size``: the clients' labelled batch for σ (labels at the clients).
    ``lr``: the learning rate of clients and server (default 1e-3, the official code's; ``[train] lr`` is not
    used: λ_s weighs the labelled cross-entropy, so the labelled step is λ_s·lr — at a shared 0.05 with momentum
    0.9 it is 0.5 and round 0 diverges, docs/studies/labels_at_server.md).
    """

    labels: str = "server"
    lambda_s: float = 10.0
    lambda_i: float = 1e-2
    lambda_a: float = 1e-2
    lambda_l1: float = 1e-5
    lambda_l2: float = 10.0
    l1_threshold: float = 1e-5
    threshold: float = 0.75
    n_helpers: int = 2
    helper_interval: int = 10
    psi_factor: float = 0.2
    server_epochs: int = 1
    server_batch_size: int = 100
    batch_size: int = 100
    labeled_batch_size: int = 10
    lr: Optional[float] = 1e-3

    def __post_init__(self):
        check_choice("labels", self.labels, ("server", "client"))
        for name in ("lambda_s", "lambda_i", "lambda_a", "lambda_l1", "lambda_l2", "l1_threshold", "psi_factor"):
            check_number(name, getattr(self, name), minimum=0)
        check_number("threshold", self.threshold, minimum=0)
        if self.threshold > 1:
            fail("threshold", self.threshold, "a probability in [0, 1]")
        check_int("n_helpers", self.n_helpers, 0)
        check_int("helper_interval", self.helper_interval, 1)
        check_int("server_epochs", self.server_epochs, 0)
        for name in ("server_batch_size", "batch_size", "labeled_batch_size"):
            check_int(name, getattr(self, name), 1)
        check_number("lr", self.lr, minimum=0, strict=True, allow_none=True)


FedMatchLCConfig = dataclass(frozen=True)(type("FedMatchLCConfig", (FedMatchConfig,), {
    "__doc__": "FedMatch, labels at the clients (official labels-at-client values).",
    "__annotations__": {"labels": str, "lambda_l1": float, "l1_threshold": float},
    "labels": "client", "lambda_l1": 1e-4, "l1_threshold": 5e-6,
}))


def check_fedmatch(cfg: FedMatchConfig, facts: ScenarioFacts) -> None:
    """Labels at the server need a partition that leaves them; H helpers are other devices (at most N - 1)."""
    from edgesim.learning.algorithms.fedmix.config import SERVER_LABEL_PARTITIONS, needs_server_labels

    if cfg.labels == "server":
        needs_server_labels("fedmatch", facts)
    elif facts.data.partition in SERVER_LABEL_PARTITIONS:
        raise ValueError(f"labels = 'client' needs labelled data on the clients, which [data] partition = "
                         f"{facts.data.partition!r} keeps at the server; expected another partition")
    if cfg.n_helpers > facts.n_devices - 1:
        fail("n_helpers", cfg.n_helpers, f"at most n_devices - 1 = {facts.n_devices - 1} (helpers are other devices)")
    unused_options(cfg, {"server_epochs": cfg.labels == "client", "server_batch_size": cfg.labels == "client",
                         "labeled_batch_size": cfg.labels == "server"})


FedMatchConfig.DEFINING = ("labels",)
FedMatchConfig.COMPRESSION_REFUSED = (  # docs/model/compression.md
    "it sends its decomposed sigma/psi parameters and helper models with its own sparsity; not implemented")

declare("fedmatch", FedMatchConfig, module="edgesim.learning.algorithms.fedmatch.algorithm", display="FedMatch", check=check_fedmatch,
        summary="FedMatch, labels at the server: sigma trained at the server, sparse psi at the clients, helpers by "
                "nearest outputs")
declare("fedmatch_lc", FedMatchLCConfig, module="edgesim.learning.algorithms.fedmatch.algorithm", display="FedMatch (labels at client)",
        check=check_fedmatch, summary="FedMatch, labels at the clients: sigma and psi trained and averaged from the clients")
