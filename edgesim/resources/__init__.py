"""Radio and compute resources as research variables: who transmits, with how much band, power and CPU frequency.

The ``[resources]`` table (:class:`ResourcesConfig`) names one policy per kind
(:data:`KINDS`); each round an :class:`Allocator` runs them on the round's
:class:`RoundResources` and hands the engine a :class:`ResourcePlan`, which it
runs on the same clock (docs/model/resource_policies.md). The formulas are in
:mod:`edgesim.resources.formulas`; the built-in policies in :mod:`edgesim.resources.policies`, their
registry in :mod:`edgesim.resources.registry`. Torch-free, like all of ``edgesim/``.
"""

from .config import KINDS, ResourcesConfig
from .policies import POLICIES, ROUND_MODES, Declared, declared, register_policy, summary
from .round import Allocator, PolicyError, ResourcePlan, RoundResources, check_config, check_round_mode, tdma_order
from .scheduling import Scheduler, ScheduleView  # registers the scheduling policies

__all__ = ["KINDS", "POLICIES", "ROUND_MODES", "Allocator", "Declared", "PolicyError", "ResourcePlan",
           "ResourcesConfig", "RoundResources", "ScheduleView", "Scheduler",
           "check_config", "check_round_mode", "declared", "register_policy", "summary", "tdma_order"]
