"""[variants.NAME]: a named instance of an algorithm that runs beside the others in one run, on the same paired random
streams, under its own name in every table and figure (learning/config.py build_variants, scenarios/schema.py)."""

from __future__ import annotations

import csv
import json

import pytest

from edgesim.config import ConfigError

SMALL = {"seed": 3, "system": {"n_devices": 4}, "budget": {"rounds": 2},
         "run": {"algorithms": ["fedavg"], "clients_per_round": 2}}


def _rows(folder) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in csv.DictReader(open(folder / "rounds.csv", newline="")):
        out.setdefault(row["algorithm"], []).append(row)
    return out


@pytest.fixture(scope="module")
def variant_run(tmp_path_factory):
    import edgesim

    out = tmp_path_factory.mktemp("variants") / "run"
    edgesim.run(dict(SMALL), out, quiet=True, plots=True, variants={
        "fedavg_same": {"algorithm": "fedavg"},
        "fedavg_topk": {"algorithm": "fedavg", "lr": 0.1, "compression": {"uplink": {"method": "topk", "fraction": 0.1}}},
    })
    return out


def test_a_variant_that_changes_nothing_gives_its_algorithms_numbers_exactly(variant_run):
    """Paired streams: built by fedavg's builder under fedavg's name, so the same devices, batches and clock."""
    rows = _rows(variant_run)
    columns = ("round", "time_s", "bits_up", "cum_energy_j", "accuracy", "accuracy_std", "train_loss")
    assert [[r[c] for c in columns] for r in rows["fedavg_same"]] == [[r[c] for c in columns] for r in rows["fedavg"]]


def test_a_variants_rows_summary_and_figures_carry_its_name_and_its_own_options(variant_run):
    rows = _rows(variant_run)
    assert list(rows) == ["fedavg", "fedavg_same", "fedavg_topk"] and all(len(v) == 2 for v in rows.values())
    # its own compression: top-k at f = 0.1 sends about 0.1 of the 32-bit values (and their positions)
    assert float(rows["fedavg_topk"][0]["bits_up"]) < 0.2 * float(rows["fedavg"][0]["bits_up"])
    assert rows["fedavg_topk"][0]["accuracy"] != rows["fedavg"][0]["accuracy"]  # its own lr and codec
    summary = json.loads((variant_run / "summary.json").read_text())
    assert {"fedavg", "fedavg_same", "fedavg_topk"} <= set(summary["algorithms"])
    for figure in ("accuracy_vs_time", "accuracy_vs_uplink_bits", "accuracy_vs_energy"):
        assert (variant_run / f"{figure}.png").is_file()
        series = {r["series"] for r in csv.DictReader(open(variant_run / f"{figure}.csv", newline=""))}
        assert {"fedavg_same", "fedavg_topk"} <= series, (figure, series)


def test_config_toml_records_each_variant_and_runs_it_again(variant_run):
    """config.toml holds [variants.NAME] with its algorithm, every option and its compression; read back, it is
    the same scenario (the same resolved config)."""
    import tomllib

    from edgesim.scenarios.algorithm_run import resolved_config
    from edgesim.scenarios.schema import load_scenario

    config = tomllib.loads((variant_run / "config.toml").read_text())
    assert config["run"]["algorithms"] == ["fedavg", "fedavg_same", "fedavg_topk"]
    assert set(config["algorithms"]) == {"fedavg"} and set(config["variants"]) == {"fedavg_same", "fedavg_topk"}
    topk = config["variants"]["fedavg_topk"]
    assert topk["algorithm"] == "fedavg" and topk["lr"] == 0.1 and topk["compression"]["uplink"]["method"] == "topk"
    assert resolved_config(load_scenario(variant_run / "config.toml")) == config


def test_a_variant_inherits_its_algorithms_table_and_sets_its_own_round_mode():
    from edgesim.scenarios.algorithm_run import scenario_for
    from edgesim.scenarios.schema import validate

    sc = validate({**SMALL, "algorithms": {"fedavg": {"lr": 0.02, "mu": 0.0}},
                   "compression": {"uplink": {"method": "fp16"}},
                   "variants": {"late": {"algorithm": "fedavg", "mu": 0.1, "round_mode": "deadline"}}}, "v.toml")
    assert sc.learning["run"].algorithms == ["fedavg", "late"]
    late = sc.learning["algorithms"]["late"]
    assert (late.lr, late.mu) == (0.02, 0.1)
    assert scenario_for(sc, "late").budget.round_mode == "deadline" and scenario_for(sc, "fedavg") is sc
    assert sc.learning["compression"].get("late") is None  # no own table: [compression]'s, as any algorithm


@pytest.mark.parametrize("variants, message", [
    ({"fast": {"algorithm": "fedavgg"}}, "[variants.fast]: algorithm = 'fedavgg': unknown algorithm; expected one of:"),
    ({"fedprox": {"algorithm": "fedavg"}}, "[variants.fedprox]: the name 'fedprox' is a registered algorithm's; "
                                          "expected a name of its own"),
    ({"fast": {"lr": 0.1}}, "[variants.fast]: algorithm: missing; expected the registered algorithm"),
    ({"fast": {"algorithm": "fedavg", "speed": 2}}, "[variants.fast]: unknown key 'speed' (= 2); expected one of:"),
    ({"fast": {"algorithm": "fedavg", "round_mode": "fedbuff"}},
     "[variants.fast]: round_mode = 'fedbuff': expected one of 'sync', 'deadline'"),
    ({"a/b": {"algorithm": "fedavg"}}, "[variants.a/b]: name 'a/b': expected letters, digits"),
    ({"fast": {"algorithm": "fedavg", "compression": {"uplink": {"method": "zip"}}}},
     "[variants.fast.compression] uplink.method = 'zip'"),
])
def test_a_bad_variant_is_one_line_naming_its_table(variants, message):
    from edgesim.scenarios.schema import validate

    with pytest.raises(ConfigError) as e:
        validate({**SMALL, "variants": variants}, "v.toml")
    assert message in str(e.value) and str(e.value).startswith("v.toml: ") and "\n" not in str(e.value)


# ----------------------------------------------------------------------------------------------- plot --overlay


@pytest.fixture(scope="module")
def two_scenarios(tmp_path_factory):
    import edgesim

    root = tmp_path_factory.mktemp("overlay")
    for bw in (1e6, 2e5):
        edgesim.run(dict(SMALL), root / f"bw{bw:g}", quiet=True, system={"n_devices": 4, "bandwidth_hz": bw})
    return root


def test_plot_overlay_draws_different_scenarios_on_one_figure_labelled_by_the_key_that_differs(two_scenarios):
    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    runs = [str(two_scenarios / "bw1e+06"), str(two_scenarios / "bw200000")]
    refused = CliRunner().invoke(app, ["plot", *runs, "--out", str(two_scenarios / "mixed")])
    assert refused.exit_code == 2 and "add --overlay to draw them on one figure" in refused.stderr  # never averaged
    for args in ([], ["--label", "system.bandwidth_hz"]):
        out = two_scenarios / f"fig{len(args)}"
        done = CliRunner().invoke(app, ["plot", "--overlay", *runs, "--out", str(out), *args])
        assert done.exit_code == 0, done.output
        for figure in ("accuracy_vs_time", "accuracy_vs_uplink_bits", "accuracy_vs_energy"):
            rows = list(csv.DictReader(open(out / f"{figure}.csv", newline="")))
            assert {r["series"] for r in rows} == {"FedAvg (system.bandwidth_hz=1000000.0)",
                                                   "FedAvg (system.bandwidth_hz=200000.0)"}, figure
            assert (out / f"{figure}.png").is_file()
    by_series: dict[str, list[float]] = {}
    for r in csv.DictReader(open(two_scenarios / "fig0" / "accuracy_vs_time.csv", newline="")):
        by_series.setdefault(r["series"], []).append(float(r["x"]))
    # the same learning (paired seeds), a slower uplink: the 200 kHz curve ends later on the simulated clock
    assert max(by_series["FedAvg (system.bandwidth_hz=200000.0)"]) > max(by_series["FedAvg (system.bandwidth_hz=1000000.0)"])


@pytest.mark.parametrize("args, message", [
    (["--label", "system.nope"], "--label 'system.nope': not a scenario key of these runs; expected a dotted key of "
                                 "their config.toml, such as one that differs here: system.bandwidth_hz"),
    (["--label", "budget.rounds"], "--label budget.rounds: runs of different scenarios would share the label "
                                   "'budget.rounds=2'; expected keys that tell them apart: system.bandwidth_hz"),
    (["--separate"], "--overlay and --separate: give one of them"),
])
def test_plot_overlay_bad_labels_are_one_line(two_scenarios, args, message):
    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    runs = [str(two_scenarios / "bw1e+06"), str(two_scenarios / "bw200000")]
    bad = CliRunner().invoke(app, ["plot", "--overlay", *runs, "--out", str(two_scenarios / "bad"), *args])
    assert bad.exit_code == 2 and message in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_label_without_overlay_is_one_line(two_scenarios):
    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    bad = CliRunner().invoke(app, ["plot", str(two_scenarios / "bw1e+06"), "--label", "system.bandwidth_hz"])
    assert bad.exit_code == 2 and "--label 'system.bandwidth_hz': labels the curves of --overlay" in bad.stderr


def test_the_report_ranks_each_variant_under_its_name(variant_run, tmp_path):
    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    done = CliRunner().invoke(app, ["report", str(variant_run), "--out", str(tmp_path / "report")])
    assert done.exit_code == 0, done.output
    ranked = {r["algorithm"] for r in csv.DictReader(open(tmp_path / "report" / "leaderboard.csv", newline=""))}
    assert {"fedavg", "fedavg_same", "fedavg_topk"} <= ranked
