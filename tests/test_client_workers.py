"""A round's clients on worker processes or Ray actors (``[run] client_workers``, ``edgesim run --client-workers``,
``--executor ray``): the run folder is the same bytes as one process training every client in turn."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from ray_head import ray_head
from typer.testing import CliRunner

from edgesim.config import ConfigError
from edgesim.learning.balance import deal
from edgesim.learning.client_workers import client_rows, dumps, loads, merge
from edgesim.learning.optim import SGD
from edgesim.learning.tasks import LocalTask, LocalTrainResult, Stream
from edgesim.scenarios.cli import app
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

FILES = ("rounds.csv", "devices.csv", "events.csv", "summary.json", "config.toml")
# FixAvg (a shared model; two streams, augmented views, pseudo-label aux values), Local (personal models)
SETS = ['run.algorithms=["fixavg", "local"]', "budget.rounds=2", "data.labeled_ratio_alpha=0.5"]
runner = CliRunner()


def assert_same_run(a: Path, b: Path) -> None:
    for name in FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.fixture
def sequential_run(tiny_scenario, tmp_path) -> Path:
    return run_scenario(load_scenario(tiny_scenario, SETS), tmp_path / "one")


def test_client_workers_write_the_sequential_bytes(tiny_scenario, sequential_run, tmp_path):
    out = tmp_path / "two"
    result = runner.invoke(app, ["run", str(tiny_scenario), *[x for s in SETS for x in ("--set", s)],
                                 "--client-workers", "2", "--out", str(out), "-q", "--format", "png"])
    assert result.exit_code == 0, result.output
    assert_same_run(sequential_run, out)
    assert "client_workers" not in (out / "config.toml").read_text()  # where the clients train, not what


def test_merge_puts_the_shares_back_in_the_clients_order():
    a = LocalTrainResult([{"w": torch.tensor(0.0)}, {"w": torch.tensor(2.0)}], [0.5, 2.5], [3, 1], {"m": [0.1, 0.3]})
    b = LocalTrainResult([{"w": torch.tensor(1.0)}], [1.5], [2], {})
    out = merge([a, b], [[0, 2], [1]], 3)
    assert [float(p["w"]) for p in out.params] == [0.0, 1.0, 2.0]
    assert out.mean_loss == [0.5, 1.5, 2.5] and out.n_steps == [3, 2, 1] and out.ema is None
    assert out.aux["m"][0] == 0.1 and math.isnan(out.aux["m"][1]) and out.aux["m"][2] == 0.3  # b's client lacks it


def test_deal_by_hand_largest_first_to_the_least_loaded():
    # by hand: 0 (5) -> w0; 1 (4) -> w1; 2 (3) -> w1 (4 < 5, load 7); 3 (3) -> w0 (5 < 7, 8); 4 (3) -> w1 (7 < 8, 10)
    assert deal([5, 4, 3, 3, 3], 2) == [[0, 3], [1, 2, 4]]
    assert deal([1, 9, 1, 1], 2) == [[1], [0, 2, 3]]  # client i to worker i mod 2 would give 10 against 2
    assert deal([2, 7], 4) == [[1], [0]]  # more workers than clients: one client each, no empty share
    assert deal([0, 0, 0], 2) == [[0, 2], [1]]  # no work known: the clients spread by count


def test_deal_is_a_partition_within_list_schedulings_bound():
    rng = torch.Generator().manual_seed(5)
    for _ in range(200):
        k, n = int(torch.randint(1, 30, (1,), generator=rng)), int(torch.randint(1, 9, (1,), generator=rng))
        work = torch.randint(0, 1000, (k,), generator=rng).tolist()
        shares = deal(work, n)
        assert len(shares) == min(n, k) and all(shares) and sorted(sum(shares, [])) == list(range(k))
        assert all(s == sorted(s) for s in shares)
        busiest = max(sum(work[i] for i in s) for s in shares)  # list scheduling: <= mean + the largest item
        assert busiest <= sum(work) / len(shares) + max(work)


def test_client_rows_by_hand():
    task = LocalTask(loss=lambda *a: None, optimizer=SGD(0.1), epochs=2, streams=(Stream("sup", 32), Stream("un", 224)),
                     client_epochs=(2, 3))
    x = {"sup": {"x": torch.zeros(50, 1), "y": torch.zeros(50)}, "un": {"x": torch.zeros(150, 1)}}
    # steps = epochs × max(⌈50/32⌉, ⌈150/224⌉) = 2 × 2; rows a step = min(32, 50) + min(224, 150) = 182
    assert client_rows(task, 0, x) == 4 * 182
    assert client_rows(task, 1, x) == 6 * 182  # the client's own epochs
    assert client_rows(task, 0, {"sup": {"x": torch.zeros(0, 1)}, "un": {"x": torch.zeros(0, 1)}}) == 0


def test_loaded_tensors_travel_as_names():
    x, other = torch.full((64,), 7.25), torch.ones(2)
    names = {id(x): ("client", 0, "x_sup")}

    def loss():  # a closure holding a loaded tensor: it travels as a name too
        return x.sum()

    sent = dumps({"main": (x, other), "list": [x], "loss": loss}, names)
    assert x.numpy().tobytes() not in sent and x.numpy().tobytes() in dumps(x, {})  # the name, not the bytes
    stand_in = torch.arange(3.0) * 10  # what the worker holds under that name
    back = loads(sent, {("client", 0, "x_sup"): stand_in})
    assert back["main"][0] is stand_in and back["list"][0] is stand_in and float(back["loss"]()) == 30.0
    assert torch.equal(back["main"][1], other)


def test_client_workers_need_the_sequential_executor(tiny_scenario, tmp_path):
    sc = load_scenario(tiny_scenario, [*SETS, "run.client_workers=2", 'train.executor="vmap"'])
    with pytest.raises(ConfigError) as e:
        run_scenario(sc, tmp_path / "r")
    assert "[run] client_workers = 2" in str(e.value) and "sequential" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.slow  # ~1 min: `ray start --head`, then a run's clients on two actors of that cluster
def test_ray_actors_write_the_sequential_bytes(tiny_scenario, sequential_run, tmp_path):
    pytest.importorskip("ray")
    with ray_head() as address:
        out = tmp_path / "ray"
        result = runner.invoke(app, ["run", str(tiny_scenario), *[x for s in SETS for x in ("--set", s)],
                                     "--client-workers", "2", "--executor", "ray", "--ray-address",
                                     address, "--out", str(out), "-q"])
        assert result.exit_code == 0, result.output
        assert_same_run(sequential_run, out)
