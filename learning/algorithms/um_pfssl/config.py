"""UM-pFSSL's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.um_pfssl.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from edgesim.config import check_choice, check_int, check_number, fail
from edgesim.learning.algorithms import ScenarioFacts, declare

FORMS = ("arxiv", "journal")
HELPER_DEVICES = ("all", "sampled")
UPDATE_RULES = ("every_nu", "from_nu")
LABEL_RULES = ("most_certain", "mean", "corr_weighted")
LOCAL_STEPS = ("per_batch", "per_epoch")


@dataclass(frozen=True)
class UMPFSSLConfig:
    """``helpers`` M, ``replace`` R, ``search_rounds`` F, ``update_every`` ν, ``mc_passes`` T (defaults: arXiv's,
    T = 10 our choice); ``corr_form``: "arxiv" or "journal"; ``helper_devices``: who runs ReplaceHelper and
    UpdateHelper, "all" K devices (arXiv) or the "sampled" ones (journal); ``update_rule``: "every_nu" (t % ν
    = 0, arXiv) or "from_nu" (every round once t ≥ ν, the journal's Alg. 1); ``warmup_epochs``: the
    warm-up's local epochs on labelled data (round 0); ``vectorize``: a device's helper stack in one vmap
    ("on"), one model at a time ("off"), or "auto" (vmap on a GPU; on a CPU the loop is faster,
    benchmarks/RESULTS.md). The two agree to float rounding, not bit for bit. ``lr``: overrides ``[train]
    lr`` for the local steps (unset: ``[train]``'s; each mini-batch takes two steps, docs/studies/um_pfssl.md).

    ``label_rule``: how a device's soft label of x comes from its helpers' MC-dropout predictions P_j(x):
    "most_certain" (Eq. 11: P_{j*} with j* = argmin_j H_j(x), default), "mean" ((1/|H_k|) Σ_j P_j) or
    "corr_weighted" (Σ_j Corr(k|j)·P_j / Σ_j Corr(k|j), the aggregation's weights). ``label_threshold``: unset
    (Alg. 1: every x) or τ ∈ (0, 1]: the KL step trains only on the x whose soft label has max_c ŷ_c ≥ τ (a
    masked mean over the batch, FixMatch's form). ``local_steps``: "per_batch" (each mini-batch one CE step, then
    one KL step, default) or "per_epoch" (Alg. 1 read literally: each epoch one epoch of CE steps over D^s, then
    one epoch of KL steps over D^u, the optimizer state restarting at each phase)."""

    helpers: int = 5
    replace: int = 2
    search_rounds: int = 30
    update_every: int = 10
    mc_passes: int = 10
    corr_form: str = "arxiv"
    helper_devices: str = "all"
    update_rule: str = "every_nu"
    warmup_epochs: int = 5
    vectorize: str = "auto"
    lr: Optional[float] = None
    label_rule: str = "most_certain"
    label_threshold: Optional[float] = None
    local_steps: str = "per_batch"

    def __post_init__(self):
        check_int("helpers", self.helpers, 1)
        check_int("replace", self.replace, 0)
        if self.replace > self.helpers - 1:
            fail("replace", self.replace, f"at most helpers - 1 = {self.helpers - 1} (a device never replaces itself)")
        check_int("search_rounds", self.search_rounds, 0)
        check_int("update_every", self.update_every, 1)
        check_int("mc_passes", self.mc_passes, 1)
        check_choice("corr_form", self.corr_form, FORMS)
        check_choice("helper_devices", self.helper_devices, HELPER_DEVICES)
        check_choice("update_rule", self.update_rule, UPDATE_RULES)
        check_int("warmup_epochs", self.warmup_epochs, 0)
        check_choice("vectorize", self.vectorize, ("auto", "on", "off"))
        check_number("lr", self.lr, minimum=0, strict=True, allow_none=True)
        check_choice("label_rule", self.label_rule, LABEL_RULES)
        check_number("label_threshold", self.label_threshold, minimum=0, strict=True, allow_none=True)
        if self.label_threshold is not None and self.label_threshold > 1:
            fail("label_threshold", self.label_threshold, "a confidence in (0, 1] (or unset: no threshold)")
        check_choice("local_steps", self.local_steps, LOCAL_STEPS)


def check_um_pfssl(cfg: UMPFSSLConfig, facts: ScenarioFacts) -> None:
    """M helpers among the other devices: at most N - 1 (K - 1 when only the sampled devices help)."""
    n = facts.n_devices if cfg.helper_devices == "all" else facts.clients_per_round
    if cfg.helpers > n - 1:
        who = "n_devices" if cfg.helper_devices == "all" else "run.clients_per_round (helper_devices = 'sampled')"
        fail("helpers", cfg.helpers, f"at most {who} - 1 = {n - 1} (a device's helpers are other devices)")


UMPFSSLConfig.COMPRESSION = (  # docs/model/compression.md
    "its model's difference from the server's copy (uplink) and every helper model it downloads (downlink)")

declare("um_pfssl", UMPFSSLConfig, module="edgesim.learning.algorithms.um_pfssl.algorithm", display="UM-pFSSL", check=check_um_pfssl,
        summary="UM-pFSSL: helpers chosen by uncertainty pseudo-label each device's data",
        chooses_devices=True)  # each round's helpers and devices are its own choice
