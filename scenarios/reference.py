"""The scenario keys' meanings: one line, unit and allowed range per key; ``docs/use/scenario_reference.md`` is made from it.

Type and default come from the config dataclasses themselves (:func:`scenario_tables`); the meaning, unit and
range from each field's own metadata where its class describes its keys (:func:`edgesim.config.key`: the rule that checks a
value also writes its range here, :func:`described_docs`), else from the hand-written entries; :data:`KEY_DOCS`
holds both. ``tests/test_reference.py`` fails when a key has no entry (or an entry no key), and
when ``docs/use/scenario_reference.md`` differs from :func:`reference_markdown` — regenerate it with
``python -m edgesim.scenarios.reference > docs/use/scenario_reference.md``. ``edgesim list`` shows the same lines
(:func:`key_meaning`); an algorithm's options are described from its config's docstring (:func:`field_meaning`).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from edgesim.config import field_meaning  # noqa: F401 - edgesim list's meanings (defined in the core: schema uses it)

# key -> (meaning, unit, allowed values). "" unit: none (a count, a name, a flag). The tables whose config classes
# describe their keys in field metadata (edgesim.config.key: [system], [budget], [train], [run]) are not written here:
# described_docs() reads them, the same rules their checks run.
KEY_DOCS: dict[str, tuple[str, str, str]] = {
    # top level
    "name": ("the scenario's name: the default run folder is runs/<name>", "", "a non-empty folder name"),
    "description": ("one line saying what the scenario studies (shown by `edgesim list scenarios`)", "", "text"),
    "seed": ("the seed every random stream of the run derives from (placement, data split, training)", "",
             "integer in [0, 2^63 - 1]"),
    # [workload]
    "workload.local_iterations": ("local epochs I a device trains per round (Eq. 7); per device: a list or a table "
                                  "(physics-only runs and the FedAvg family)", "epochs",
                                  '>= 1; also a list (one per device) or {dist = "uniform", low, high}'),
    "workload.cycles_per_sample": ("CPU cycles C_tra to train on one sample once", "cycles/sample",
                                   '> 0; physics-only also a list (one per device) or {dist = "uniform", low, high}'),
    "workload.samples_per_device": ("samples D per device that `edgesim plan` assumes (a run charges each device "
                                    "for the data it holds); \"auto\": the median device's in the run's partition "
                                    "(a physics-only run must give it)", "samples",
                                    '>= 1 or "auto"; physics-only also a list or {dist = "uniform", low, high}'),
    "workload.sr_cycles": ("cycles C_SR of DoFed-SPP's similarity step per round; \"auto\": from the model", "cycles",
                           '>= 0 or "auto"'),
    "workload.pseudo_label_cycles_per_model": ("cycles C_pse to pseudo-label with one model; \"auto\": from the "
                                               "model", "cycles", '>= 0 or "auto"'),
    "workload.model_bits": ("size m of one model upload; \"auto\": 32 bits per parameter of the run's model (a "
                            "physics-only run must give it)", "bit", '> 0 or "auto"'),
    "workload.cycles_source": ("where cycles_per_sample comes from: this file, or the model's FLOPs", "",
                               '"given" or "flops"'),
    "workload.flops_per_cycle": ('FLOPs a device does per cycle (cycles_source = "flops")', "FLOP/cycle", "> 0"),
    # [data]
    "data.dataset": ("the data set, by registered name (`edgesim list datasets`)", "", "a registered name"),
    "data.data_dir": ("folder holding the data set's files; default $EDGESIM_DATA; relative to the scenario file",
                      "", "a folder path"),
    "data.partition": ("how the data is split over the devices (`edgesim list partitions`)", "", "a registered name"),
    "data.alpha": ("Dirichlet concentration α of the per-class split (smaller: more skewed)", "", "> 0"),
    "data.labeled_ratio_alpha": ("Dir₂ concentration of each device's labelled fraction (UM-pFSSL)", "", "> 0"),
    "data.min_labeled": ("fewest labelled samples a device gets under the Dirichlet split", "samples", ">= 0"),
    "data.n_clusters": ("class clusters 𝒦 of DoFed-SPP's SUBSET/NORMAL splits", "clusters", ">= 2"),
    "data.size_scale": ("scale of DoFed-SPP's set sizes (500 / 10 / 190·C/𝒦 per device)", "", "> 0"),
    "data.labeled_fraction": ("labelled share of each device's data under the iid split", "", "[0, 1]"),
    "data.labels_per_class": ("labelled samples per class of FedDure's splits", "samples/class", ">= 1"),
    "data.server_labeled": ("labelled samples held by the server (labels-at-server splits)", "samples", ">= 1"),
    "data.server_validation": ("of those, samples held out as the server's validation set", "samples",
                               ">= 0, < server_labeled"),
    "data.train_pool_size": ("draw this many train samples before partitioning; unset: the whole split", "samples",
                             ">= 1, or unset"),
    "data.test_size": ("cap of each device's test set; unset: all eligible", "samples", ">= 1, or unset"),
    "data.validation_size": ("evaluate on this many held-out train samples instead of the test split", "samples",
                             ">= 0 (needs train_pool_size)"),
    "data.file": ('the .npz archive of dataset = "npz", relative to data_dir; unset: the one .npz there', "",
                  "a file path, or unset"),
    "data.image_size": ('[H, W] every image of dataset = "image_folder" is resized to; unset: one size required',
                        "pixels", "two integers >= 1, or unset"),
    "data.test_fraction": ('share of each class dataset = "image_folder" holds out as the test split (no test/ '
                           "folder); unset: 0.2", "", "(0, 1), or unset"),
    "data.hflip": ("whether the augmented views may mirror an image left-right; unset: the data set's own rule "
                   "(off for npz, image_folder and plugin data sets; docs/use/data.md)", "", "true or false, or unset"),
    # [parametric]
    "parametric.a0": ("accuracy before any upload of the physics-only curve", "", "[0, a_max]"),
    "parametric.a_max": ("accuracy the curve tends to", "", "(0, 1]"),
    "parametric.rate": ("rate of a_max − (a_max − a0)·exp(−rate·U/N), U the arrived uploads", "", "> 0"),
    "parametric.download_bits": ("bits each device downloads at the start of a round", "bit", ">= 0"),
    # [async]
    "async.concurrency": ("devices training at once; unset: run.clients_per_round", "devices",
                          "1..n_devices, or unset"),
    "async.alpha": ("FedAsync's mixing weight α", "", "(0, 1]"),
    "async.staleness": ("how an update's weight falls with its staleness", "",
                        '"constant", "polynomial" or "hinge"'),
    "async.staleness_a": ("the staleness function's a", "", ">= 0"),
    "async.staleness_b": ("the hinge function's b", "model versions", ">= 0"),
    "async.buffer_size": ("FedBuff's K: updates per server step; unset: concurrency", "updates", ">= 1, or unset"),
    "async.server_lr": ("FedBuff's server learning rate η_g", "", "> 0"),
    "async.eval_every": ("evaluate the model every this many aggregations", "aggregations", ">= 1"),
    # [availability]
    "availability.model": ("when devices are online", "", '"always", "markov" or "trace"'),
    "availability.mean_on_s": ("mean online duration of the Markov model", "s", "> 0"),
    "availability.mean_off_s": ("mean offline duration of the Markov model", "s", "> 0"),
    "availability.trace": ("CSV of online/offline times (the trace model); relative to the scenario file", "",
                           "a file path, or unset"),
    # [resources]
    "resources.scheduling": ("who takes part in a round (the algorithm takes the first K of the ranking; "
                             "fedasync/fedbuff: a free slot takes the first idle online device)", "",
                             '"random", "round_robin", "best_channel", "fastest", "deadline_feasible", "age", '
                             '"age_channel", "oort" or a plugin'),
    "resources.bandwidth": ("how the uplink band is shared", "",
                            '"equal"; FDMA "equal_static", "proportional", "min_max_time" or "min_energy"; TDMA '
                            '"shortest_first"; or a plugin'),
    "resources.power": ("each uploader's transmit power (the configured one is the maximum)", "",
                        '"fixed"; FDMA "min_energy"; or a plugin'),
    "resources.cpu_freq": ("each device's CPU frequency (the configured one is the maximum)", "",
                           '"max", "min_energy"; FDMA "joint" (with power "min_energy"); or a plugin'),
    "resources.cpu_freq_min_hz": ("the lowest frequency a DVFS policy may choose; unset: a tenth of each "
                                  "device's maximum", "Hz", "[1e3, the slowest cpu_freq_hz], or unset"),
    "resources.oort_exploration": ("Oort's starting share ε of picks among devices never tried", "", "[0, 1]"),
    "resources.oort_decay": ("the factor Oort's ε is multiplied by each round", "", "[0, 1]"),
    "resources.oort_exploration_min": ("the floor Oort's ε decays to", "", "[0, 1]"),
    "resources.oort_alpha": ("Oort's straggler penalty exponent α", "", ">= 0"),
    "resources.oort_cutoff": ("Oort's c: devices above c × the K-th utility are sampled in proportion to it", "",
                              "[0, 1]"),
    "resources.oort_pacer_window": ("Oort's pacer window W: the rounds whose summed utility it compares", "rounds",
                                    ">= 1"),
    "resources.oort_pacer_step": ("Oort's pacer step Δ: the share of τ added to the preferred round duration when "
                                  "the utility stops rising", "", ">= 0"),
    "resources.oort_blacklist_rounds": ("the participations after which Oort no longer picks a device (0: never)",
                                        "rounds", ">= 0"),
    "resources.age_exponent": ("ν of age_channel's priority A^ν · log2(1 + SNR): how much the age of update weighs "
                               "against the channel", "", ">= 0"),
    "resources.energy_weight": ("the weight w of energy in min_energy's objective w·E + (1 − w)·λ·T (1: energy "
                                "alone)", "", "[0, 1]"),
    "resources.stragglers": ("whether a device that cannot meet the round's budget even alone at full power and "
                             "frequency is scheduled", "", '"keep" or "exclude"'),
    "resources.time_price_j_per_s": ("λ in min_energy's objective: the joules one second of round time is worth",
                                     "J/s", ">= 0"),
    "resources.resource_blocks": ("how an OFDMA round's resource blocks are assigned (access = \"ofdma\", "
                                  "docs/model/access_schemes.md)", "",
                                  '"equal", "best_channel", "min_max_time"; or a plugin'),
}
def _codec_docs() -> dict[str, tuple[str, str, str]]:
    """``[compression.uplink]``/``[compression.downlink]``'s keys, from the codec registry: ``method`` names the
    registered codecs, each option's meaning, unit and range are its field's metadata (:mod:`edgesim.codecs`)."""
    from edgesim.compression import DIRECTIONS, lossy_methods, methods, option_fields, readers

    names = [f'"{m}"' for m in methods()]
    out = {}
    for direction in DIRECTIONS:
        out[f"compression.{direction}.method"] = (f"how the {direction} transfer is encoded", "",
                                                  ", ".join(names[:-1]) + f" or {names[-1]}")
        for name, f in option_fields().items():
            only = " or ".join(readers(name))
            out[f"compression.{direction}.{name}"] = (f.metadata.get("meaning", ""), f.metadata.get("unit", ""),
                                                      f"{f.metadata.get('range', '')} with method {only}; else unset")
        out[f"compression.{direction}.error_feedback"] = (
            "carry the compression residual to the next round", "",
            f"true or false (true only with {', '.join(lossy_methods())})" if direction == "uplink" else "false")
    return out


KEY_DOCS.update(_codec_docs())


def scenario_tables() -> dict[str, type | str]:
    """Every table of a scenario (``compression.uplink`` is ``[compression.uplink]``) and its config dataclass
    (``"codec"`` for a compression direction, whose keys come from the codec registry)."""
    from edgesim.asynchrony import AsyncConfig
    from edgesim.availability import AvailabilityConfig
    from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
    from edgesim.curve import ParametricConfig
    from edgesim.learning.config import DataConfig, RunConfig, TrainConfig
    from edgesim.resources import ResourcesConfig

    return {"system": SystemConfig, "budget": BudgetConfig, "workload": WorkloadConfig, "data": DataConfig,
            "train": TrainConfig, "run": RunConfig, "parametric": ParametricConfig, "async": AsyncConfig,
            "availability": AvailabilityConfig, "compression.uplink": "codec", "compression.downlink": "codec",
            "resources": ResourcesConfig}


def described_docs() -> dict[str, tuple[str, str, str]]:
    """``{table.key: (meaning, unit, allowed)}`` of every key whose config class describes it in field metadata
    (:func:`edgesim.config.key`): the allowed values are the text of the very rule its check runs."""
    from edgesim.config import described_keys

    return {f"{table}.{name}": (doc.doc, doc.unit, doc.allowed.text())
            for table, cls in scenario_tables().items() if isinstance(cls, type)
            for name, doc in described_keys(cls).items()}


KEY_DOCS.update(described_docs())


def _type_name(t: Any) -> str:
    """``int``, ``number`` (int or float), ``str or list``, ...: a type as the reference writes it."""
    args = typing.get_args(t)
    if typing.get_origin(t) in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)) and args:
        parts = [_type_name(a) for a in args if a is not type(None)]
    else:
        parts = [t.__name__ if isinstance(t, type) else str(t).replace("typing.", "")]
    if "int" in parts and "float" in parts:
        parts = ["number" if p == "int" else p for p in parts if p != "float"]
    return " or ".join(dict.fromkeys(parts)) or "any"


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def scenario_keys() -> dict[str, tuple[str, Any]]:
    """Every scenario key (``table.key``; top-level ones bare) with its type name and default."""
    from edgesim.scenarios.schema import TOP_LEVEL_KEYS

    top = {"name": "(the file's name)", "description": "", "seed": 0}
    keys: dict[str, tuple[str, Any]] = {k: (t.__name__, top.get(k)) for k, t in TOP_LEVEL_KEYS.items()}
    for table, cls in scenario_tables().items():
        if cls == "codec":  # a direction: method, every registered codec's options, error_feedback
            keys.update(_codec_keys(table))
            continue
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name.startswith("_"):
                continue
            keys[f"{table}.{f.name}"] = (_type_name(hints.get(f.name, f.type)), _default(f))
    return keys


def _codec_keys(table: str) -> dict[str, tuple[str, Any]]:
    """A ``[compression.DIRECTION]`` table's keys with type and default, from the codec registry."""
    from edgesim.compression import CODECS, option_fields

    keys = {f"{table}.method": ("str", "none")}
    for name, f in option_fields().items():
        owner = next(c for c in CODECS.values() if name in {g.name for g in dataclasses.fields(c)})
        keys[f"{table}.{name}"] = (_type_name(typing.get_type_hints(owner).get(name, f.type)), _default(f))
    keys[f"{table}.error_feedback"] = ("bool", False)
    return keys


def key_meaning(key: str) -> str:
    """The one-line meaning of a scenario key (``""`` when it has none)."""
    return KEY_DOCS.get(key, ("", "", ""))[0]


def _toml(value: Any) -> str:
    import json

    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        value = list(value)
    if dataclasses.is_dataclass(value):
        return "(table)"
    return json.dumps(value, ensure_ascii=False)


def reference_markdown() -> str:
    """``docs/use/scenario_reference.md``: per table, every key's meaning, unit, type, default and allowed values."""
    keys = scenario_keys()
    lines = [
        "# Scenario reference",
        "",
        "Every key a scenario file may hold: its meaning, unit, type, default and allowed values. Generated from",
        "the configuration classes — for [system], [budget], [train] and [run], their fields' own metadata, whose",
        "rule also checks each value (`edgesim/config.py`: `key`) — and `edgesim/scenarios/reference.py` by",
        "`python -m edgesim.scenarios.reference > docs/use/scenario_reference.md`; a test fails when a key has no",
        "description or this page is stale. The options of each algorithm (`[algorithms.NAME]`) are listed by",
        "`edgesim list algorithms` (type, default and meaning), and its page in `docs/` gives the sources.",
        "",
        "`budget.rounds` vs `run.rounds`: `budget.rounds` is G of the budget — the per-round budget is",
        "`total_time_s / rounds` (Eq. 13), which a deadline and DoFed-SPP's plan use — and the run's length when",
        "`run.rounds` is unset; `run.rounds` changes only how many rounds the run lasts, never the per-round budget.",
        "",
    ]
    groups: dict[str, list[str]] = {}
    for key in keys:
        table = key.rpartition(".")[0]
        groups.setdefault(table, []).append(key)
    for table, names in groups.items():
        lines += [f"## {'Top level' if not table else f'[{table}]'}", "",
                  "| key | meaning | unit | type | default | allowed |", "|---|---|---|---|---|---|"]
        for key in names:
            meaning, unit, allowed = KEY_DOCS.get(key, ("", "", ""))
            type_name, default = keys[key]
            cell = [f"`{key.rpartition('.')[2]}`", meaning, unit, type_name, f"`{_toml(default)}`", allowed]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cell) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - regenerates docs/use/scenario_reference.md
    print(reference_markdown(), end="")
