"""`edgesim plan` as a module (edgesim.scenarios.plan): `edgesim.plan()` returns what the command prints, the local
steps come from the run's own partition (min/median/max per device), and too few of them are warned of by `plan`
and `run` before any training."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_cli import HAND
from typer.testing import CliRunner

import edgesim
from edgesim.scenarios.cli import app
from edgesim.scenarios.plan import FEW_LOCAL_STEPS, PlanReport, local_steps

runner = CliRunner()


def test_local_steps_by_hand():
    assert local_steps(1, 72, 16) == 5  # ⌈72/16⌉ = ⌈4.5⌉
    assert local_steps(3, 24, 24) == 3  # exactly one batch per epoch
    assert local_steps(2, 0, 16) == 0  # a device without data takes no step (the limiting case)
    assert local_steps(1, 1, 16) == 1  # any data at all is one (short) batch
    for n in range(0, 200, 7):  # property: never fewer than I·D/B, less than one batch more
        assert n / 16 <= local_steps(1, n, 16) < n / 16 + 1


@pytest.mark.parametrize("args", [[], ["--set", "run.algorithms=fedavg,dofed_spp"]])
def test_edgesim_plan_returns_what_the_command_prints(tmp_path, args):
    p = tmp_path / "hand.toml"
    p.write_text(HAND)
    sets = [a for a in args if a != "--set"]
    text = runner.invoke(app, ["plan", str(p), *args])
    as_json = runner.invoke(app, ["plan", str(p), "--json", *args])
    assert text.exit_code == 0 and as_json.exit_code == 0, text.output
    overrides = {"run.algorithms": ["fedavg", "dofed_spp"]} if sets else {}
    report = edgesim.plan(str(p), **overrides)
    assert isinstance(report, PlanReport)
    assert text.stdout == report.text() + "\n"
    assert json.loads(as_json.stdout) == report.to_dict()
    assert report.plan.round_budget_s == 10 and report.infeasible is None


def test_edgesim_plan_of_the_bundled_default_and_an_infeasible_budget(tmp_path):
    report = edgesim.plan()
    assert runner.invoke(app, ["plan"]).stdout == report.text() + "\n"
    assert isinstance(report.workload.model_bits, int)  # "auto" resolved: the model's own bits
    p = tmp_path / "hand.toml"
    p.write_text(HAND)
    tight = edgesim.plan(str(p), **{"budget.total_time_s": 30})  # T/G = 3 s: no (B, K) fits DoFed-SPP
    assert tight.infeasible.startswith(f"{p}: No (B, K) pair fits the budget")
    result = runner.invoke(app, ["plan", str(p), "--set", "budget.total_time_s=30"])
    assert result.exit_code == 1 and result.stderr.splitlines()[0] == f"error: {tight.infeasible}"
    assert result.stderr.splitlines()[1:] == [f"warning: {w}" for w in tight.warnings]  # I·⌈20/32⌉ = 2 steps


def test_plan_counts_local_steps_over_each_devices_own_data(tiny_scenario):
    """The run's own split (same seed and streams): each device's labelled samples D_n, I·⌈D_n/B⌉ steps."""
    from edgesim.learning.data.datasets import load_dataset
    from edgesim.learning.data.partitions import device_splits

    sc = edgesim.load_scenario(str(tiny_scenario), **{"workload.local_iterations": 2})
    report = edgesim.plan(sc)
    data = sc.learning["data"]
    ds = load_dataset(data.dataset, data.data_dir)
    _, _, splits = device_splits(ds.y_train, ds.y_test, ds.n_classes, data, 6, sc.seed)
    held = [len(s.train) + len(s.labeled) for s in splits]
    steps = [2 * -(-n // 16) for n in held]
    assert report.device_steps == {"min": min(steps), "median": float(np.median(steps)), "max": max(steps),
                                   "samples_min": min(held), "samples_median": float(np.median(held)),
                                   "samples_max": max(held)}
    line = next(x for x in report.text().splitlines() if "over each device's own data" in x)
    assert f"{min(steps)} / {np.median(steps):g} / {max(steps)} steps" in line
    # the very split a run trains on: build_context's devices hold the same labelled sets
    from edgesim.learning.context import build_context

    ctx = build_context(sc.seed, data, sc.learning["train"], sc.learning["run"], sc.workload, 6, dataset=ds)
    assert [len(c.x_sup) for c in ctx.clients] == held


def test_too_few_local_steps_are_warned_of_by_plan_and_run_before_training(tiny_scenario, tmp_path):
    big = ["--set", "train.batch_size=512"]  # every device's labelled data is one batch: 1 step a round
    planned = runner.invoke(app, ["plan", str(tiny_scenario), *big])
    assert planned.exit_code == 0, planned.output
    warning = [line for line in planned.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and f"fewer than {FEW_LOCAL_STEPS}" in warning[0]
    assert "the median device takes 1 local step(s) a round" in warning[0]
    assert edgesim.plan(str(tiny_scenario), **{"train.batch_size": 512}).warnings == (warning[0][len("warning: "):],)
    ran = runner.invoke(app, ["run", str(tiny_scenario), *big, "--set", "run.rounds=1", "--set",
                              "run.algorithms=fedavg", "--out", str(tmp_path / "r"), "-q"])
    assert ran.exit_code == 0, ran.output
    assert ran.stderr.splitlines()[0] == warning[0]  # said first, before any round
    quiet = runner.invoke(app, ["plan", str(tiny_scenario), "--set", "train.batch_size=4"])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr


def test_the_bundled_default_is_warned_of_two_steps_a_round():
    """Its median device holds ~24 labelled samples: ⌈23.5/16⌉ = 2 steps of FedAvg a round (docs/use/metrics.md)."""
    report = edgesim.plan()
    assert report.device_steps["median"] == 2 and report.device_steps["samples_median"] == 23.5
    assert len(report.warnings) == 1 and "the median device takes 2 local step(s) a round" in report.warnings[0]
    assert edgesim.plan(**{"workload.local_iterations": 2}).warnings == ()  # 4 steps: enough


def test_workload_defaults_come_from_the_run_itself(tiny_scenario):
    """Unset model_bits and samples_per_device are "auto": the model's bits and the median device's samples in the
    run's own partition; a physics-only run must give both (issue 52)."""
    from edgesim.config import ConfigError
    from edgesim.learning.data.datasets import load_dataset
    from edgesim.learning.data.partitions import device_splits
    from edgesim.learning.sizing import median_samples

    assert median_samples([3, 1, 2]) == 2 and median_samples([1, 2, 3, 10]) == 3  # ⌈2.5⌉
    assert median_samples([0, 0]) == 1  # never a D of 0
    text = tiny_scenario.read_text().replace("samples_per_device = 50\n", "").replace('model_bits = "auto"\n', "")
    tiny_scenario.write_text(text)
    sc = edgesim.load_scenario(str(tiny_scenario))
    assert (sc.workload.model_bits, sc.workload.samples_per_device) == ("auto", "auto")
    report = edgesim.plan(sc)
    data = sc.learning["data"]
    ds = load_dataset(data.dataset, data.data_dir)
    _, _, splits = device_splits(ds.y_train, ds.y_test, ds.n_classes, data, 6, sc.seed)
    held = sorted(len(s.train) + len(s.labeled) + len(s.unlabeled) for s in splits)
    assert report.workload.samples_per_device == -(-(held[2] + held[3]) // 2)  # 6 devices: the middle two's mean, up
    from edgesim.learning.models import build_model, model_bits

    assert report.workload.model_bits == model_bits(build_model("cnn", ds.input_shape, ds.n_classes, ds.vocab_size))
    assert f"⌈{report.workload.samples_per_device}/16⌉" in report.text()
    physics = ('[workload]\nmodel_bits = 1e6\n[run]\nbackend = "parametric"\nclients_per_round = 2\n')
    phys = tiny_scenario.with_name("phys.toml")
    phys.write_text(physics)
    with pytest.raises(ConfigError, match=r"\[workload\] samples_per_device = 'auto' \(the default: unset\): a "
                                          r"physics-only run has no data to count; expected a number"):
        edgesim.load_scenario(str(phys))


def test_plans_samples_are_the_runs_supervised_ones_and_not_what_make_backends_counts(tiny_scenario):
    """For every registered partition (synthetic blobs, an MLP): the plan's D_n (train + labelled, loaded once more
    by `run` for its warning, scenarios/run.py plan_warnings) is each device's supervised set len(x_sup) in the run's
    context; make_backends' count (what a device holds) adds its unlabelled data, so the two differ wherever a
    partition leaves devices unlabelled samples (all but "iid" at its default labeled_fraction = 1)."""
    from edgesim.learning.data.partitions import PARTITIONS
    from edgesim.scenarios.algorithm_run import make_backends
    from edgesim.scenarios.plan import held_samples

    differ = set()
    for name in PARTITIONS:
        sc = edgesim.load_scenario(str(tiny_scenario), **{
            "data.dataset": "synthetic", "data.partition": name, "train.model": "mlp", "data.size_scale": 0.02,
            "data.labels_per_class": 2, "data.server_labeled": 20, "run.algorithms": ["fedavg"]})
        planned = held_samples(sc)
        build, _, extra = make_backends(sc)
        clients = build("fedavg").ctx.clients
        assert planned == [len(c.x_sup) for c in clients], name
        held = [len(c.x_sup) + len(c.x_unl) for c in clients]
        counted = extra["samples_per_device"]
        assert (counted["min"], counted["max"]) == (min(held), max(held)), name
        if held != planned:
            differ.add(name)
    assert "iid" not in differ and {"dirichlet", "subset", "feddure_iid_iid", "labels_at_server"} <= differ
