"""The label-scarce scenarios (issue 35): they validate and plan, and every method takes >= 2,000 local steps."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgesim.learning.context import build_context
from edgesim.scenarios.cli import app
from edgesim.scenarios.schema import load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
SCARCE = SCENARIOS / "arena_label_scarce.toml"
SCARCE_CPU = SCENARIOS / "label_scarce_cpu.toml"  # 2 devices, 20 rounds of 20 epochs (docs/studies/ssl_limit.md)
LAYOUTS = ['data.partition="feddure_iid_iid"', 'data.partition="feddure_dir_dir"']


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_label_scarce_arena_plans(shared_data, layout):
    result = CliRunner().invoke(app, ["plan", str(SCARCE), "--json", "--set", layout,
                                      "--set", f'data.data_dir="{shared_data}"'])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["local_steps"]["local_steps_per_device"] == 8 * 60  # FedAvg-SL: 8·⌈600/10⌉


@pytest.mark.parametrize("scenario", [SCARCE, SCARCE_CPU], ids=["full", "cpu"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_method_takes_two_thousand_local_steps_per_device_equivalent(shared_data, layout, scenario):
    """From the drawn partition: labelled-only E·⌈n_lab/B⌉, the FixMatch family E·max(⌈n_lab/B⌉, ⌈n_unl/μB⌉) a
    round (B = 10, μ = 7), every device every round; the mean over devices times the rounds is >= 2,000."""
    sc = load_scenario(scenario, [layout, f'data.data_dir="{shared_data}"'])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    e, g, b, mu = sc.workload.local_iterations, sc.budget.rounds, sc.learning["train"].batch_size, 7
    assert sc.learning["run"].clients_per_round == sc.system.n_devices  # every device trains every round
    labelled = [e * math.ceil(c.x_sup.shape[0] / b) * g for c in ctx.clients]
    fixmatch = [e * max(math.ceil(c.x_sup.shape[0] / b), math.ceil(c.x_unl.shape[0] / (mu * b))) * g
                for c in ctx.clients]
    assert sum(c.x_sup.shape[0] for c in ctx.clients) == 50 * sc.system.n_devices  # 5 per class a device
    assert sum(labelled) / len(labelled) >= 2000 and sum(fixmatch) / len(fixmatch) >= 2000
    if layout.endswith('iid_iid"'):
        assert set(labelled) == {2000} and set(fixmatch) == {3200}


@pytest.mark.parametrize("labels", [100, 250])
def test_labels_at_server_with_fewer_labels_plans(shared_data, labels):
    """las_fmnist_550 with 100 or 250 server labels (--set data.server_labeled=N): validates and plans."""
    path = SCENARIOS / "las_fmnist_550.toml"
    sc = load_scenario(path, [f"data.server_labeled={labels}"])
    assert sc.learning["data"].server_labeled == labels
    result = CliRunner().invoke(app, ["plan", str(path), "--set", f"data.server_labeled={labels}",
                                      "--set", f'data.data_dir="{shared_data}"'])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("labels", [100, 250])
def test_fewer_server_labels_keep_the_clients_550_images(shared_data, labels):
    """The fewer-labels study (label_scarce_study.sh STAGE=las) sets train_pool_size = 55,000 + N: the server holds
    N class-balanced labels, a fifth of them held out for tuning, and each of the 100 clients still 550 unlabelled
    images, as at 1,000 labels — only the server's labels change."""
    held = labels // 5
    sc = load_scenario(SCENARIOS / "las_fmnist_550.toml",
                       [f"data.server_labeled={labels}", f"data.train_pool_size={55000 + labels}",
                        f"data.server_validation={held}", f'data.data_dir="{shared_data}"'])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    assert {c.x_unl.shape[0] for c in ctx.clients} == {550}
    assert ctx.server_x.shape[0] == labels - held and ctx.val_x.shape[0] == held
    assert sorted(ctx.server_y.bincount(minlength=10).tolist()) == [(labels - held) // 10] * 10
    assert sorted(ctx.val_y.bincount(minlength=10).tolist()) == [held // 10] * 10


def test_the_tuning_reads_the_rate_each_method_trained_with(shared_data):
    """label_scarce_study.py ``choose`` credits a run's score to the rate in its config.toml (``rate_used``): a
    method's own [algorithms.NAME] lr (the CPU cut's 0.02 for FedAvg*, FedDure's Adam 0.002) wins over [train] lr,
    which a method without its own rate (FixAvg) trains with — a grid over train.lr moves FixAvg, not FedAvg*."""
    from edgesim.scenarios.algorithm_run import resolved_config

    study = _study()
    sc = load_scenario(SCARCE_CPU, ["train.lr=0.05", f'data.data_dir="{shared_data}"'])
    config = resolved_config(sc)
    assert {a: study.rate_used(config, a) for a in ("fedavg_labeled", "fixavg", "feddure", "fedavg_sl")} == {
        "fedavg_labeled": 0.02, "fixavg": 0.05, "feddure": 0.002, "fedavg_sl": 0.02}
    sc = load_scenario(SCARCE_CPU, ["algorithms.fixavg.lr=0.005", f'data.data_dir="{shared_data}"'])
    assert study.rate_used(resolved_config(sc), "fixavg") == 0.005


def _study():
    import importlib.util

    spec = importlib.util.spec_from_file_location("label_scarce_study", SCENARIOS.parent / "benchmarks" /
                                                  "label_scarce_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    return study


def test_a_rate_that_diverged_in_a_tuning_seed_is_never_chosen(monkeypatch, capsys):
    """pFedMe on the CPU cut diverged (NaN loss) in one of two tuning seeds at rates whose other seed scored well:
    ``choose`` scores such a rate as diverged, not by its surviving seed, and ``final`` leaves a diverged seed out of
    the mean and counts it."""
    import numpy as np
    import pandas as pd

    study = _study()
    rows, rates = [], {}
    for run, lr, seed, acc, div in [("a", 0.01, 100, 0.80, np.nan), ("b", 0.01, 101, 0.50, 3.0),  # 0.01 diverged once
                                    ("c", 0.05, 100, 0.60, np.nan), ("d", 0.05, 101, 0.62, np.nan)]:
        rates[run] = lr
        for rnd in range(6):
            rows.append(dict(run=run, seed=seed, algorithm="pfedme", round=rnd, accuracy=acc, diverged_round=div))
    frame = pd.DataFrame(rows)
    monkeypatch.setattr(study, "load_runs", lambda paths: frame.copy())
    monkeypatch.setattr(study, "_layout", lambda run: "feddure_iid_iid")
    monkeypatch.setattr(study, "_config", lambda run: {"train": {"lr": rates[run]}, "algorithms": {}})
    study.choose(["tune"])
    out, err = capsys.readouterr()
    assert out.strip() == "--set algorithms.pfedme.lr=0.05"  # not 0.01 (mean 65 % over its rows, 80 % at the seed that survived)
    assert "0.01: diverged (2 seeds)" in err and "0.05: 61.0 (2 seeds)" in err
    study.final(["final"], baseline="pfedme", last=3)
    assert "| feddure_iid_iid | pfedme | 3 (+1 diverged) |" in capsys.readouterr().out


def test_choose_tunes_feddure_regulator_rates_with_its_rate(monkeypatch, capsys):
    """FedDure's tuning grid is η × (η_s = η_w) (issue 54.2): ``choose`` scores each (lr, creg_lr, freg_lr) point
    apart — averaging over the regulator rates would credit a rate with another point's score — and prints the best
    point's three ``--set`` lines; a method whose runs vary only ``lr`` prints one line."""
    import pandas as pd

    study = _study()
    rows, configs = [], {}
    points = [("a", 0.001, 0.0005, 0.70), ("b", 0.001, 0.002, 0.60), ("c", 0.002, 0.0005, 0.50),
              ("d", 0.002, 0.002, 0.68)]  # by lr alone 0.001 scores 65 and 0.002 59; the best point is (0.001, 5e-4)
    for run, lr, reg, acc in points:
        configs[run] = {"train": {"lr": 0.01}, "algorithms": {"feddure": {"lr": lr, "creg_lr": reg, "freg_lr": reg}}}
        rows += [dict(run=run, seed=100, algorithm="feddure", round=r, accuracy=acc) for r in range(5)]
    for run, lr, acc in [("e", 0.01, 0.6), ("f", 0.02, 0.7)]:
        configs[run] = {"train": {"lr": 0.01}, "algorithms": {"fixavg": {"lr": lr}}}
        rows += [dict(run=run, seed=100, algorithm="fixavg", round=r, accuracy=acc) for r in range(5)]
    frame = pd.DataFrame(rows)
    monkeypatch.setattr(study, "load_runs", lambda paths: frame.copy())
    monkeypatch.setattr(study, "_layout", lambda run: "feddure_iid_iid")
    monkeypatch.setattr(study, "_config", lambda run: configs[run])
    study.choose(["tune"])
    out, err = capsys.readouterr()
    assert out.split("\n")[:4] == ["--set algorithms.feddure.lr=0.001", "--set algorithms.feddure.creg_lr=0.0005",
                                   "--set algorithms.feddure.freg_lr=0.0005", "--set algorithms.fixavg.lr=0.02"]
    assert "0.002, creg_lr 0.002, freg_lr 0.002: 68.0 (1 seeds)" in err
    assert study.tuned_options([configs["e"], configs["f"]], "fixavg") == []


def test_cut_auc_of_the_one_rule_columns():
    """``cut_auc``: the AUC of one confidence cut at 0.95 from the one-rule columns. By hand, issue 54's audit figures
    (72.4 % right, 53 % of rows above 0.95, 91 % of those right): TPR = 0.53·0.91/0.724 = 0.66616, FPR =
    0.53·0.09/0.276 = 0.17283, AUC = 0.5 + 0.5·(0.66616 − 0.17283) = 0.74667. Limits: no row above the cut, or a cut
    as accurate as the rest (a = A), separates nothing (0.5); a cut holding every right label and no wrong one, 1."""
    import pandas as pd

    study = _study()
    auc = study.cut_auc(pd.Series([0.724, 0.7, 0.6, 0.6]), pd.Series([0.53, 0.0, 0.4, 0.6]),
                        pd.Series([0.91, math.nan, 0.6, 1.0]))
    assert auc.tolist() == pytest.approx([0.74667, 0.5, 0.5, 1.0], abs=1e-5)
