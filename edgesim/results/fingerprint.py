"""What a run was: its resolved scenario flattened to dotted keys, and the fingerprint that groups seeds.

Runs are only ever combined within one **scenario group**: the runs whose
resolved scenarios (``config.toml``) are the same once the seed is set aside
(:func:`scenario_fingerprint`). :func:`flatten` is the one flattener of a
config (figures, reports, tracking and the API's frames all use it).
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

# Keys of a resolved scenario that do not make it another scenario: the seed (what varies over replications),
# where it was read from, package versions, and the torch thread count (it changes float rounding only).
NOT_SCENARIO = ("seed", "source", "versions", "run.threads")


def flatten(config: Mapping, prefix: str = "") -> dict:
    """``{"system": {"bandwidth_hz": 1e6}}`` → ``{"system.bandwidth_hz": 1e6}`` (lists kept whole)."""
    out = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


# Tables a resolved scenario leaves out when every key has its default (so that config.toml stays what it was before
# the table existed), with those defaults: a config without the table ran them. ``[resources]``'s are
# edgesim.resources.ResourcesConfig's (tests/test_resources.py checks they agree; None-valued keys are left out).
OMITTED_WHEN_DEFAULT = {
    "resources": {"scheduling": "random", "bandwidth": "equal", "power": "fixed", "cpu_freq": "max",
                  "oort_exploration": 0.9, "oort_decay": 0.98, "oort_exploration_min": 0.2, "oort_alpha": 2.0,
                  "oort_cutoff": 0.95, "oort_pacer_window": 20, "oort_pacer_step": 0.1, "oort_blacklist_rounds": 0,
                  "age_exponent": 1.0,
                  "energy_weight": 1.0,
                  "time_price_j_per_s": 1.0, "stragglers": "keep",
                  "resource_blocks": "equal"},
}


def scenario_keys(config: Mapping) -> dict:
    """The flattened resolved scenario without :data:`NOT_SCENARIO` (what makes two runs one scenario), with the
    defaults of a table left out (:data:`OMITTED_WHEN_DEFAULT`) filled in: a sweep over a policy names the
    default's point too, and a run that states the defaults is the same scenario as one that leaves them out."""
    flat = flatten(config)
    for table, defaults in OMITTED_WHEN_DEFAULT.items():  # each key left out (a key added later: also when the
        for k, v in flatten({table: defaults}).items():  # table is there, as resources.resource_blocks)
            flat.setdefault(k, v)
    return {k: v for k, v in flat.items() if not any(k == n or k.startswith(n + ".") for n in NOT_SCENARIO)}


def scenario_fingerprint(config: Mapping) -> str:
    """SHA-256 (64 hex digits) of the resolved scenario minus the seed (:data:`NOT_SCENARIO`); reports show
    its first 12."""
    text = json.dumps(scenario_keys(config), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def scenario_differences(a: Mapping, b: Mapping) -> list[tuple[str, object, object]]:
    """``(key, value in a, value in b)`` for every scenario key on which two resolved configs differ (sorted)."""
    fa, fb = scenario_keys(a), scenario_keys(b)
    missing = object()
    out = []
    for k in sorted(set(fa) | set(fb)):
        va, vb = fa.get(k, missing), fb.get(k, missing)
        if va != vb:
            out.append((k, None if va is missing else va, None if vb is missing else vb))
    return out


def dig(config: Mapping, key: str) -> Any:
    """The value at the dotted ``key`` of a nested config (``None`` when absent); lists and tables as JSON text."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return json.dumps(node) if isinstance(node, (list, dict)) else node
