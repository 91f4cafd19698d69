"""``feddure_code``'s options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.feddure_code.algorithm`).

The official FedDure release (White1973/FedDure @ 50ecb77) runs another
algorithm than the paper's; its defaults here are the release's CIFAR-10
config (``configs/cifar10/res9_cifar10_dir_dir_5.yaml``, ``client:``
section), except the learning rate (the paper's 5e-4, as the CINIC-10
config; the CIFAR one has 6e-4). Sources: docs/studies/feddure.md, "feddure_code".
"""

from __future__ import annotations

from dataclasses import dataclass

from edgesim.config import check_choice, check_int, check_number, fail
from edgesim.learning.algorithms import declare_variants


@dataclass(frozen=True)
class FedDureCodeConfig:
    """The release's options (module docstring).

    ``lr`` the local model's ("teacher") learning rate, ``student_lr`` the
    student's (both ``optimizer.lr`` in the release). ``optimizer``: both
    models' optimizer, ``"adam"`` (the release's) or ``"sgd"`` (no momentum). ``labeled_batch`` B;
    ``unlabeled_ratio`` μ (μB unlabelled rows per step); ``finetune_epochs``:
    supervised-only epochs on the labelled data before the round's MPL steps
    (the release's ``fine_tune_steps`` = 5 is one epoch of 50 labels at
    B = 10); ``warmup_steps`` W and ``student_wait_steps`` of the release's
    learning-rate schedule; ``uda_threshold`` τ (``teacher_thre``),
    ``uda_lambda`` (its 8) and ``uda_ramp_steps`` (``uda_steps``) of its UDA
    term.
    """

    lr: float = 5e-4
    student_lr: float = 5e-4
    optimizer: str = "adam"
    labeled_batch: int = 10
    unlabeled_ratio: int = 7
    finetune_epochs: int = 1
    warmup_steps: int = 10
    student_wait_steps: int = 2
    uda_threshold: float = 0.6
    uda_lambda: float = 8.0
    uda_ramp_steps: int = 20

    def __post_init__(self):
        for name in ("lr", "student_lr"):
            check_number(name, getattr(self, name), minimum=0, strict=True)
        check_choice("optimizer", self.optimizer, ("adam", "sgd"))
        check_int("labeled_batch", self.labeled_batch, 1)
        check_int("unlabeled_ratio", self.unlabeled_ratio, 1)
        check_int("finetune_epochs", self.finetune_epochs, 0)
        check_int("warmup_steps", self.warmup_steps, 0)
        check_int("student_wait_steps", self.student_wait_steps, 0)
        check_number("uda_threshold", self.uda_threshold, minimum=0)
        if self.uda_threshold > 1:
            fail("uda_threshold", self.uda_threshold, "a probability in [0, 1]")
        check_number("uda_lambda", self.uda_lambda, minimum=0)
        check_int("uda_ramp_steps", self.uda_ramp_steps, 1)


VARIANTS = {
    "feddure_code": (FedDureCodeConfig, "FedDure (code)",
                     "FedDure as the official release runs it: weak-view student, -d x CE of the strong-view "
                     "argmax, UDA term, supervised fine-tuning, learning-rate warm-up"),
}

FedDureCodeConfig.COMPRESSION_REFUSED = (  # docs/model/compression.md
    "the official release's algorithm is not wired to the encoders (feddure is); not implemented")

declare_variants(VARIANTS, module="edgesim.learning.algorithms.feddure_code.algorithm")
