"""Compressed transfers (issue 34): the bits by hand, encode/decode by hand, QSGD unbiased, top-k's residual,
the scenario keys and their one-line refusals, and runs: none is today's bytes, executors agree, resume."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from edgesim.compression import (
    Codec,
    CompressionConfig,
    build_compression,
    compression_for,
    encoded_bits,
    index_bits,
    parse_compression,
    scaled_encoded_bits,
    topk_count,
)
from edgesim.config import ConfigError
from edgesim.learning.compression import Transfers, decode, encode, payload_bits, relative_error
from edgesim.scenarios.cli import app
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

QSGD8, TOP40, SIGN = Codec("qsgd", bits=8), Codec("topk", fraction=0.4), Codec("sign")
X = [torch.tensor([3.0, -4.0]), torch.tensor([0.0, 1.0, -2.0])]  # P = 5 numbers in T = 2 tensors


# --------------------------------------------------------------------------- the bits, by hand


@pytest.mark.parametrize("codec, bits", [
    (Codec(), 32 * 5),
    (Codec("fp16"), 16 * 5),
    (Codec("bf16"), 16 * 5),
    (Codec("qsgd", bits=2), 32 * 2 + 3 * 5),  # one norm per tensor (bucket 512), sign + 2 level bits per number
    (Codec("qsgd", bits=1, bucket=2), 32 * (1 + 2) + 2 * 5),  # buckets [3,-4] | [0,1] [-2]
    (TOP40, 32 * 2 + min(2 * 3, 5)),  # k = 2 values; 2 indices of ceil(log2 5) = 3 bits > a 5-bit bitmap
    (SIGN, 32 * 2 + 5),  # one scale per tensor, one bit per number
])
def test_bits_by_hand(codec, bits):
    assert encoded_bits(codec, [2, 3]) == bits
    assert payload_bits(encode(codec, X, torch.Generator().manual_seed(0))) == bits  # the parts, counted


def test_topk_positions_are_indices_or_a_bitmap_whichever_is_smaller():
    assert index_bits(1000) == 10 and index_bits(1024) == 10 and index_bits(1025) == 11 and index_bits(1) == 0
    assert encoded_bits(Codec("topk", fraction=0.01), [1000]) == 32 * 10 + 10 * 10  # indices
    assert encoded_bits(Codec("topk", fraction=0.5), [1000]) == 32 * 500 + 1000  # bitmap
    assert encoded_bits(Codec("topk", fraction=1.0), [7, 9]) == 33 * 16  # limit: everything, and a full bitmap
    assert topk_count(0.07, 100) == 7 and topk_count(1e-9, 10) == 1 and topk_count(0.5, 0) == 0


def test_bits_limits():
    assert all(encoded_bits(c, []) == 0 for c in (Codec(), QSGD8, TOP40, SIGN))
    # QSGD with one number per bucket sends a norm per number: no gain over 32-bit floats, by construction
    assert encoded_bits(Codec("qsgd", bits=1, bucket=1), [10]) == 32 * 10 + 2 * 10
    # a typed model_bits scales the encoded size as it scales uncompressed transfers; "auto" leaves it exact
    assert scaled_encoded_bits(QSGD8, [600, 400], 32 * 1000, 1000) == encoded_bits(QSGD8, [600, 400])
    assert scaled_encoded_bits(Codec(), [600], 1e6, 1000) == round(1e6 * 600 / 1000)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=5), b=st.integers(1, 15),
       f=st.floats(0.001, 0.999))
def test_bits_grow_with_bits_and_fraction_and_stay_below_floats(sizes, b, f):
    p = sum(sizes)
    assert encoded_bits(Codec("qsgd", bits=b), sizes) <= encoded_bits(Codec("qsgd", bits=b + 1), sizes)
    assert encoded_bits(Codec("topk", fraction=f), sizes) <= encoded_bits(Codec("topk", fraction=min(1.0, 2 * f)), sizes)
    if p >= 1000:  # for any vector of a useful size every method beats 32-bit floats
        for c in (Codec("fp16"), Codec("qsgd", bits=b), SIGN):
            assert encoded_bits(c, sizes) < 32 * p


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(0, 700), min_size=1, max_size=4), seed=st.integers(0, 2**31),
       method=st.sampled_from([Codec(), Codec("fp16"), Codec("qsgd", bits=3, bucket=100), Codec("topk", fraction=0.03),
                               SIGN]))
def test_the_encoders_parts_are_the_formulas_bits(sizes, seed, method):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, generator=g) for n in sizes]
    enc = encode(method, xs, g)
    assert payload_bits(enc) == encoded_bits(method, sizes)
    assert decode(enc).shape == (sum(sizes),)


# --------------------------------------------------------------------------- encode/decode, by hand


def test_casts_and_topk_and_sign_by_hand():
    for m in ("none", "fp16", "bf16"):
        assert decode(encode(Codec(m), X)).tolist() == [3.0, -4.0, 0.0, 1.0, -2.0]
    assert decode(encode(Codec("fp16"), [torch.tensor([1 / 3])])).item() == pytest.approx(0.333251953125, abs=0)
    assert decode(encode(Codec("bf16"), [torch.tensor([1 / 3])])).item() == pytest.approx(0.333984375, abs=0)
    assert decode(encode(TOP40, X)).tolist() == [3.0, -4.0, 0.0, 0.0, 0.0]  # over the whole vector, not per tensor
    # scaled sign: ‖v‖₁/d per tensor (3.5 and 1), sgn(0) = +1
    assert decode(encode(SIGN, X)).tolist() == [3.5, -3.5, 1.0, 1.0, -1.0]


def test_qsgd_by_hand():
    # exact levels: |v_i|/‖v‖ · s an integer, nothing random: [0, 5] has norm 5, levels 0 and s
    assert decode(encode(Codec("qsgd", bits=2), [torch.tensor([0.0, -5.0])])).tolist() == [0.0, -5.0]
    # [3, -4]: norm 5, s = 1: r = 0.6, 0.8 -> level 1 with probability 0.6, 0.8, drawn from the generator's uniforms
    u = torch.rand(2, generator=torch.Generator().manual_seed(7))
    enc = encode(Codec("qsgd", bits=1), [torch.tensor([3.0, -4.0])], torch.Generator().manual_seed(7))
    levels = [int(u[0] < 0.6), int(u[1] < 0.8)]
    assert enc.parts["levels"].tolist() == levels and enc.parts["norms"].tolist() == [5.0]
    assert decode(enc).tolist() == [5.0 * levels[0], -5.0 * levels[1]]
    # s = 3 (2 bits): r = 1.8, 2.4 -> levels {1, 2} and {2, 3}; decoded 5·level/3
    enc = encode(Codec("qsgd", bits=2), [torch.tensor([3.0, -4.0])], torch.Generator().manual_seed(7))
    expect = [1 + int(u[0] < 0.8), 2 + int(u[1] < 0.4)]
    assert enc.parts["levels"].tolist() == expect
    assert decode(enc).tolist() == pytest.approx([5 * expect[0] / 3, -5 * expect[1] / 3])
    # buckets: bucket = 1 sends every number exactly (its own norm, level s)
    assert decode(encode(Codec("qsgd", bits=1, bucket=1), X)).tolist() == [3.0, -4.0, 0.0, 1.0, -2.0]


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_qsgd_is_unbiased_within_its_variance_bound(bits):
    """Alistarh et al. 2017, Lemma 3.1: E[Q(v)] = v and E‖Q(v) − v‖² ≤ min(d/s², √d/s)·‖v‖²."""
    d, n, s = 64, 3000, 2**bits - 1
    v = torch.randn(d, generator=torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(2)
    draws = torch.stack([decode(encode(Codec("qsgd", bits=bits), [v], g)) for _ in range(n)])
    bound = min(d / s**2, math.sqrt(d) / s) * float(v.norm()) ** 2
    sq_err = ((draws - v) ** 2).sum(1)
    assert float(sq_err.mean()) <= bound
    # the mean of n decodes is v within its standard error: per coordinate var ≤ ‖v‖²/(4s²)
    se = float(v.norm()) / (2 * s) / math.sqrt(n)
    assert float((draws.mean(0) - v).abs().max()) <= 5 * se
    assert float(((draws.mean(0) - v) ** 2).sum()) <= 3 * bound / n


def test_relative_error():
    assert relative_error(torch.tensor([3.0, 0.0]), torch.tensor([3.0, 4.0])) == pytest.approx(0.8)
    assert relative_error(torch.zeros(2), torch.zeros(2)) == 0.0


# --------------------------------------------------------------------------- top-k's residual (error feedback)


def _ctx(template, model_bits=None):
    full = sum(v.numel() for v in template.values() if v.is_floating_point())
    return SimpleNamespace(template_state=template, model_bits=model_bits or 32 * full, device=torch.device("cpu"),
                           generator=lambda *keys: torch.Generator().manual_seed(hash(keys) % 2**31))


def test_topk_error_feedback_residual_is_what_was_not_sent():
    template = {"w": torch.zeros(4), "b": torch.zeros(2), "n": torch.zeros((), dtype=torch.long)}
    codec = Codec("topk", fraction=0.34, error_feedback=True)  # k = 3 of 6
    t = Transfers(_ctx(template), CompressionConfig(uplink=codec), list(template))
    assert t.keys == ["w", "b"] and t.up_bits == 32 * 3 + min(3 * 3, 6) and t.down_bits == 32 * 6
    server = {"w": torch.full((4,), 10.0), "b": torch.full((2,), 20.0), "n": torch.tensor(0)}
    start = {"w": torch.zeros(4), "b": torch.zeros(2), "n": torch.tensor(0)}
    deltas = [torch.tensor([5.0, -1.0, 0.5, 4.0, 0.25, -3.0]), torch.tensor([0.0, 2.0, 0.0, 0.0, 0.0, 0.0])]
    carried = torch.zeros(6)
    for r, delta in enumerate(deltas):
        trained = {"w": start["w"] + delta[:4], "b": start["b"] + delta[4:], "n": torch.tensor(r + 1)}
        (rebuilt,), (err,) = t.upload(r, [0], [start], [trained], server)
        sent = torch.cat([rebuilt["w"] - server["w"], rebuilt["b"] - server["b"]])
        want = delta + carried
        assert int((sent != 0).sum()) == 3  # k numbers went out ...
        assert torch.equal(t.residual[0], want - sent)  # ... the residual is exactly what did not
        assert torch.equal(sent + t.residual[0], want) and rebuilt["n"].item() == r + 1
        assert err == pytest.approx(float((want - sent).norm() / want.norm()))
        carried = t.residual[0]
    # round 0 sent 5, 4, -3 and kept [-1, 0.5, 0.25]; round 1 adds 2 to the -1: sends 1, 0.5, 0.25
    assert t.residual[0].tolist() == [0.0] * 6
    # the residual is device state: it survives a checkpoint
    t2 = Transfers(_ctx(template), CompressionConfig(uplink=codec), list(template))
    t.residual[3] = torch.arange(6.0)
    t2.load_state_dict(t.state_dict())
    assert set(t2.residual) == {0, 3} and torch.equal(t2.residual[3], torch.arange(6.0))


def test_without_error_feedback_nothing_is_carried_and_the_download_is_the_decoded_model():
    template = {"w": torch.zeros(8)}
    cfg = CompressionConfig(uplink=Codec("topk", fraction=0.25), downlink=Codec("fp16"))
    t = Transfers(_ctx(template), cfg, ["w"])
    state = {"w": torch.tensor([1 / 3] * 8)}
    got, err = t.download(0, state)
    assert torch.equal(got["w"], state["w"].half().float()) and 0 < err < 1e-3
    t.upload(0, [1], [got], [{"w": got["w"] + 1}], state)
    assert t.residual == {}


# --------------------------------------------------------------------------- the scenario keys


def test_parse_forms_and_per_algorithm_override():
    s = build_compression({"uplink": {"method": "qsgd", "bits": 4}},
                          {"fedavg": {"lr": 0.1, "compression": {"downlink": "bf16"}}, "fedprox": {}}, "x.toml")
    assert s[""] == CompressionConfig(uplink=Codec("qsgd", bits=4, bucket=512))
    assert compression_for(s, "fedavg") == CompressionConfig(Codec("qsgd", bits=4), Codec("bf16"))
    assert compression_for(s, "fedprox") == s[""] and compression_for({}, "x").is_none
    assert parse_compression({"uplink": "sign"}).uplink == SIGN


@pytest.mark.parametrize("table, message", [
    ('uplink = "zip"', "[compression] uplink.method = 'zip': expected one of 'none', 'fp16', 'bf16', 'qsgd', 'topk', 'sign'"),
    ('uplink = {method = "qsgd", bits = 17}', "[compression] uplink.bits = 17: expected an integer in 1..16"),
    ('uplink = {method = "qsgd", bits = 0}', "[compression] uplink.bits = 0: expected an integer in 1..16"),
    ('uplink = "qsgd"', "[compression] uplink.bits = None: expected an integer in 1..16 with method = \"qsgd\""),
    ('uplink = {method = "topk", fraction = 0}', "[compression] uplink.fraction = 0: expected a number in (0, 1]"),
    ('uplink = {method = "topk", fraction = 1.5}', "[compression] uplink.fraction = 1.5: expected a number in (0, 1]"),
    ('uplink = {method = "fp16", bits = 8}', "[compression] uplink.bits = 8: expected left out: only method = \"qsgd\""),
    ('uplink = {method = "fp16", error_feedback = true}', "[compression] uplink.error_feedback = True: expected false"),
    ('downlink = {method = "topk", fraction = 0.1, error_feedback = true}', "downlink.error_feedback = True: expected false"),
    ('uplink = {method = "topk", fraction = 0.1, memory = 1}', "[compression] uplink.memory = 1: expected one of the keys"),
    ('sideways = "fp16"', "[compression] sideways = 'fp16': expected one of the keys uplink, downlink"),
    ('uplink = 3', "[compression] uplink = 3: expected a method name"),
])
def test_bad_input_is_one_line_naming_key_value_and_expected(tiny_scenario, tmp_path, table, message):
    p = tmp_path / "bad.toml"
    p.write_text(tiny_scenario.read_text() + "\n[compression]\n" + table + "\n")
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert message in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith(str(p))
    result = CliRunner().invoke(app, ["run", str(p), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.incomplete").exists()  # before anything runs


def test_an_algorithm_that_cannot_take_it_is_refused_in_one_line(tiny_scenario):
    with pytest.raises(ConfigError) as e:
        load_scenario(tiny_scenario, ["run.algorithms=['fedavg', 'pfedme']", "compression.uplink=fp16"])
    assert "[compression] uplink = 'fp16': algorithm 'pfedme' cannot take it (" in str(e.value)
    assert "[algorithms.NAME.compression]" in str(e.value) and "\n" not in str(e.value)
    assert "(its bi-level personal models are not wired to the encoders; not implemented)" in str(e.value)
    # per algorithm it is fine, and local (which sends nothing) takes a run-wide table
    load_scenario(tiny_scenario, ["run.algorithms=['fedavg', 'pfedme', 'local']",
                                  "algorithms.fedavg.compression.uplink=fp16"])
    with pytest.raises(ConfigError, match=r"\[algorithms.pfedme.compression\] downlink = 'sign'"):
        load_scenario(tiny_scenario, ["run.algorithms=['pfedme']", "algorithms.pfedme.compression.downlink=sign"])


# --------------------------------------------------------------------------- runs

OUTPUTS = ("rounds.csv", "devices.csv", "events.csv", "summary.json", "config.toml")
TWO = ["budget.rounds=2", "run.algorithms=['fedavg', 'local']"]


def test_none_is_byte_identical_to_no_table(tiny_scenario, tmp_path):
    a = run_scenario(load_scenario(tiny_scenario, TWO), tmp_path / "a")
    b = run_scenario(load_scenario(tiny_scenario, [*TWO, "compression.uplink=none", "compression.downlink=none",
                                                   "algorithms.fedavg.compression.uplink=none"]), tmp_path / "b")
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert "compression" not in (a / "config.toml").read_text()


def test_compressed_run_charges_the_encoded_bits_and_stays_paired(tiny_scenario, tmp_path):
    import csv

    plain = run_scenario(load_scenario(tiny_scenario, TWO), tmp_path / "plain")
    over = [*TWO, "compression.uplink.method=qsgd", "compression.uplink.bits=4", "compression.downlink=fp16"]
    comp = run_scenario(load_scenario(tiny_scenario, over), tmp_path / "comp")
    rows = {p: [r for r in csv.DictReader(open(p / "rounds.csv")) if r["algorithm"] == "fedavg"]
            for p in (plain, comp)}
    sc = load_scenario(tiny_scenario, over)
    from edgesim.learning.models import build_model

    model = build_model("cnn", (1, 8, 8), 10, seed=0)
    sizes = [v.numel() for v in model.state_dict().values() if v.is_floating_point()]
    k = sc.learning["run"].clients_per_round
    for p, up, down in ((plain, 32 * sum(sizes), 32 * sum(sizes)),
                        (comp, encoded_bits(Codec("qsgd", bits=4), sizes), 16 * sum(sizes))):
        assert [float(r["bits_up"]) for r in rows[p]] == [k * up] * 2
        assert [float(r["bits_down"]) for r in rows[p]] == [k * down] * 2
    assert all(0 < float(r["compression_error"]) < 2 and float(r["downlink_compression_error"]) < 1e-3
               for r in rows[comp])
    assert "compression_error" not in rows[plain][0]
    # paired: the same devices, and round 0 trains from a model that differs only by the fp16 cast
    def devices(p):
        return [(r["round"], r["device"], r["channel_gain"], r["compute_s"]) for r in csv.DictReader(open(p / "devices.csv"))
                if r["algorithm"] == "fedavg" and float(r["bits_up"]) > 0]

    assert devices(plain) == devices(comp) and len(devices(plain)) == 2 * k
    assert float(rows[comp][0]["train_loss"]) == pytest.approx(float(rows[plain][0]["train_loss"]), rel=1e-3)
    # the recorded config.toml reproduces the run
    again = run_scenario(load_scenario(comp / "config.toml"), tmp_path / "again")
    for name in ("rounds.csv", "devices.csv", "events.csv"):
        assert (again / name).read_bytes() == (comp / name).read_bytes(), name


@pytest.mark.parametrize("uplink", ["qsgd8", "topk_ef"])
def test_sequential_and_vmap_executors_agree_with_compression(tiny_scenario, uplink):
    from edgesim.engine import Simulation
    from edgesim.learning.algorithms import REGISTRY
    from edgesim.learning.context import build_context

    codec = {"qsgd8": Codec("qsgd", bits=8), "topk_ef": Codec("topk", fraction=0.1, error_feedback=True)}[uplink]
    states = []
    for executor in ("sequential", "vmap"):
        sc = load_scenario(tiny_scenario, [f"train.executor={executor}"])
        ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                            sc.system.n_devices)
        ctx = dataclasses.replace(ctx, compression=CompressionConfig(uplink=codec))
        alg = REGISTRY["fedavg"].build(ctx, REGISTRY["fedavg"].config_cls())
        Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(3)
        states.append((alg.global_state, alg.transfers.residual))
    (a, ra), (b, rb) = states
    assert max(float((a[k].float() - b[k].float()).abs().max()) for k in a) < 1e-4
    assert set(ra) == set(rb) and all(float((ra[d] - rb[d]).abs().max()) < 1e-4 for d in ra)


def test_resume_with_error_feedback_state_is_byte_identical(tiny_scenario, tmp_path, monkeypatch):
    from edgesim.learning.algorithms import REGISTRY
    from tests.test_resume import _crashing

    over = ["run.checkpoint_every=1", "budget.rounds=4", "run.algorithms=['fedavg']",
            "compression.uplink.method=topk", "compression.uplink.fraction=0.05",
            "compression.uplink.error_feedback=true"]
    reference = run_scenario(load_scenario(tiny_scenario, over), tmp_path / "reference")
    with monkeypatch.context() as m:
        m.setitem(REGISTRY, "fedavg", _crashing("fedavg", 2))
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_scenario(load_scenario(tiny_scenario, over), tmp_path / "r")
    saved = torch.load(tmp_path / "r.incomplete" / "checkpoints" / "fedavg.pt", weights_only=False)
    residual = saved["backend"]["transfers"]["residual"]  # the error-feedback state is in the checkpoint
    assert len(residual) >= 3 and all(float(r.abs().sum()) > 0 for r in residual.values())
    out = run_scenario(load_scenario(tiny_scenario, over), tmp_path / "r", resume=True)
    for name in ("rounds.csv", "devices.csv", "events.csv", "summary.json"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


@pytest.mark.parametrize("name", ["fedper", "lg_fedavg", "fixavg"])
def test_the_family_compresses_what_it_sends(tiny_scenario, name):
    """FedPer and LG-FedAvg send their shared part only: the encoded bits are of those keys (LG-FedAvg's to every
    device); FixAvg's uploads are compressed like FedAvg's."""
    from edgesim.engine import Simulation
    from edgesim.learning.algorithms import REGISTRY
    from edgesim.learning.context import build_context

    sc = load_scenario(tiny_scenario, [f"run.algorithms=['{name}']", "data.labeled_fraction=0.5",
                                       "data.partition=iid"] if name == "fixavg" else [f"run.algorithms=['{name}']"])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    cfg = CompressionConfig(Codec("qsgd", bits=4, bucket=64), Codec("bf16"))
    alg = REGISTRY[name].build(dataclasses.replace(ctx, compression=cfg), REGISTRY[name].config_cls())
    sizes = [ctx.template_state[k].numel() for k in alg.global_state if ctx.template_state[k].is_floating_point()]
    assert sum(sizes) < sum(v.numel() for v in ctx.template_state.values()) or name == "fixavg"
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    plan = alg.plan_round(sim.system_view())
    up = [w.upload_bits for w in plan.work if w.upload_bits]
    down = [w.download_bits for w in plan.work]
    assert up == [encoded_bits(cfg.uplink, sizes)] * 3
    assert down == [16 * sum(sizes)] * (ctx.n_devices if name == "lg_fedavg" else 3)
    rec = Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(1)[0]
    assert 0 < rec.metrics["compression_error"] < 1 and rec.metrics["downlink_compression_error"] < 1e-2


def test_feddure_compresses_theta_and_resumes_with_its_residuals(tiny_scenario, tmp_path, monkeypatch):
    from edgesim.learning.algorithms import REGISTRY
    from tests.test_feddure import FEDDURE_TINY
    from tests.test_resume import _crashing

    over = [*FEDDURE_TINY, "run.checkpoint_every=1", "budget.rounds=3", "compression.uplink.method=topk",
            "compression.uplink.fraction=0.1", "compression.uplink.error_feedback=true", "compression.downlink=fp16"]
    reference = run_scenario(load_scenario(tiny_scenario, over), tmp_path / "reference")
    import csv

    rows = list(csv.DictReader(open(reference / "rounds.csv")))
    assert all(float(r["compression_error"]) > 0 for r in rows)
    with monkeypatch.context() as m:
        m.setitem(REGISTRY, "feddure", _crashing("feddure", 2))
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_scenario(load_scenario(tiny_scenario, over), tmp_path / "r")
    out = run_scenario(load_scenario(tiny_scenario, over), tmp_path / "r", resume=True)
    for name in ("rounds.csv", "devices.csv", "events.csv"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


def test_plan_shows_the_encoded_bits(tiny_scenario):
    import json

    from edgesim.learning.models import build_model

    sizes = [v.numel() for v in build_model("cnn", (1, 8, 8), 10, seed=0).state_dict().values() if v.is_floating_point()]
    args = ["plan", str(tiny_scenario), "--set", "compression.uplink.method=qsgd", "--set", "compression.uplink.bits=4"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    bits = encoded_bits(Codec("qsgd", bits=4), sizes)
    assert f"fedavg: uplink qsgd4 {bits} bits" in result.output and "local:" not in result.output.split("Compression")[1]
    table = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)["compression"]
    assert table["fedprox"]["uplink"] == {"method": "qsgd4", "bits": bits, "ratio": bits / (32 * sum(sizes))}
    assert "Compression" not in CliRunner().invoke(app, ["plan", str(tiny_scenario)]).output


# --------------------------------------------------------------------------- UM-pFSSL: per-device models


def test_a_model_sent_as_its_difference_from_the_servers_copy_carries_what_was_not_sent():
    """UM-pFSSL's upload (docs/model/compression.md): the server's new copy is its copy plus the decoded difference, and
    a device that keeps its model (error feedback) sends what was left out with its next upload — by hand."""
    template = {"w": torch.zeros(4), "b": torch.zeros(2), "n": torch.zeros((), dtype=torch.long)}
    codec = Codec("topk", fraction=0.34, error_feedback=True)  # k = 3 of 6
    t = Transfers(_ctx(template), CompressionConfig(uplink=codec), list(template))
    copy = {"w": torch.full((4,), 10.0), "b": torch.full((2,), 20.0), "n": torch.tensor(0)}
    model = dict(copy)
    for r, (delta, sent_want, left_want) in enumerate([
        ([5.0, -1.0, 0.5, 4.0, 0.25, -3.0], [5.0, 0, 0, 4.0, 0, -3.0], [0, -1.0, 0.5, 0, 0.25, 0]),
        ([0.0, 2.0, 0.0, 0.0, 0.0, 0.0], [0, 1.0, 0.5, 0, 0.25, 0], [0.0] * 6),  # the kept -1 + 2, 0.5, 0.25
    ]):
        d = torch.tensor(delta)
        model = {"w": model["w"] + d[:4], "b": model["b"] + d[4:], "n": torch.tensor(r + 1)}
        new, err = t.upload_difference(r, 7, model, copy)
        sent = torch.cat([new["w"] - copy["w"], new["b"] - copy["b"]])
        left = torch.cat([model["w"] - new["w"], model["b"] - new["b"]])
        assert sent.tolist() == sent_want and left.tolist() == left_want and new["n"].item() == r + 1
        want = torch.cat([model["w"] - copy["w"], model["b"] - copy["b"]])
        assert err == pytest.approx(float((want - sent).norm() / want.norm()))
        copy = new
    assert t.residual == {}  # the residual is the device's model − the server's copy, not Transfers' state
    # a unicast download: the decoded state, the error, and the same draws from the same stream
    q = Transfers(_ctx(template), CompressionConfig(downlink=Codec("qsgd", bits=2)), list(template))
    a, ea = q.received(copy, torch.Generator().manual_seed(3))
    b, eb = q.received(copy, torch.Generator().manual_seed(3))
    assert all(torch.equal(a[k], b[k]) for k in a) and ea == eb > 0 and a["n"] is copy["n"]
    for n in ("w", "b"):  # a bucket per tensor: every number decodes to ‖tensor‖·l/3, l in 0..3 (all positive here)
        assert all(round(float(x) * 3 / float(copy[n].norm()), 4) in (0, 1, 2, 3) for x in a[n])


UM_COMPRESSED = CompressionConfig(uplink=Codec("topk", fraction=0.1, error_feedback=True),
                                  downlink=Codec("qsgd", bits=8))
EXECUTORS = CompressionConfig(uplink=Codec("topk", fraction=0.1, error_feedback=True), downlink=Codec("fp16"))


def _um(tmp_path, overrides=(), compression=UM_COMPRESSED):
    from edgesim.learning.context import build_context
    from tests.test_um_pfssl import TINY_UM

    p = tmp_path / "um.toml"
    p.write_text(TINY_UM.format(rate=1e6, k=3))
    sc = load_scenario(p, list(overrides))
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    return p, sc, dataclasses.replace(ctx, compression=compression)


def test_um_pfssl_compresses_its_uploads_and_helper_downloads_and_executors_agree(tmp_path):
    from edgesim.engine import Simulation
    from edgesim.learning.algorithms import REGISTRY

    runs = {}
    for executor, compression, rounds in (("sequential", UM_COMPRESSED, 3), ("vmap", EXECUTORS, 1),
                                          ("sequential", EXECUTORS, 1)):
        _, sc, ctx = _um(tmp_path, [f"train.executor={executor}"], compression)
        alg = REGISTRY["um_pfssl"].build(ctx, sc.learning["algorithms"]["um_pfssl"])
        sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
        records = sim.run(rounds - 1)
        before = {k: alg.pool[(k, alg.latest[k])] for k in range(ctx.n_devices)}
        records += sim.run(1)
        runs[executor, rounds] = (alg, ctx, records, before)
    alg, ctx, records, before = runs["sequential", 3]
    t = alg.transfers
    sizes = [v.numel() for v in ctx.template_state.values() if v.is_floating_point()]
    assert t.up_bits == 32 * topk_count(0.1, sum(sizes)) + min(topk_count(0.1, sum(sizes)) * index_bits(sum(sizes)),
                                                               sum(sizes))
    assert t.down_bits == 32 * sum(-(-n // 512) for n in sizes) + 9 * sum(sizes)  # a norm a bucket, sign + 8 bits
    assert all(d.bits_up == t.up_bits and d.bits_down == t.down_bits for d in records[0].devices)  # w_0 broadcast
    for rec in records[1:]:
        downloads = rec.info["downloads_replace"] + rec.info["downloads_update"] + rec.info["downloads_fill"]
        assert sum(d.bits_down for d in rec.devices) == pytest.approx(downloads * t.down_bits)
        assert sorted(d.bits_up for d in rec.devices if d.bits_up) == [t.up_bits] * int(rec.info["K"])
        assert 0 < rec.metrics["compression_error"] < 1
        assert (0 < rec.metrics["downlink_compression_error"] < 0.05) == (downloads > 0)
    # the server's copy of a device that trained in round 2 moved by its k largest numbers; the device kept its model
    k_sent = topk_count(0.1, sum(sizes))
    for k in (k for k in range(ctx.n_devices) if alg.latest[k] == 2):
        new = alg.pool[(k, 2)]
        moved = sum(int((new[n] != before[k][n]).sum()) for n in t.keys)
        assert 0 < moved <= k_sent and alg.own[k] is not new
        assert sum(int((alg.own[k][n] != new[n]).sum()) for n in t.keys) >= sum(sizes) - k_sent
    # a helper as a device holds it: its own decoding of the pool's copy, from its own stream
    k, (j, v) = next((k, (j, v)) for k, lst in enumerate(alg.lists) for j, v in lst.items() if j != k)
    held = alg._model_on(k, j, v)
    want, _ = t.received(alg.pool[(j, v)], ctx.generator("compress", "downlink", "model", j, v + 1, k))
    assert all(torch.equal(held[n], want[n]) for n in held)
    assert any(not torch.equal(held[n], alg.pool[(j, v)][n]) for n in t.keys)
    # the vectorised executor trains the same models to float rounding (1e-7 here) and the server rebuilds the
    # same copies. (Over more rounds a rounding can tip a discrete choice — a top-k position at a near-tie, a
    # QSGD level, a ReLU at exactly 0 of a quantised model — and the runs then part by more than rounding.)
    (seq, *_), (vec, *_) = runs["sequential", 1], runs["vmap", 1]
    assert set(seq.pool) == set(vec.pool) and set(seq.own) == set(vec.own) == set(range(6))
    for a, b in [(seq.pool[key], vec.pool[key]) for key in seq.pool] + [(seq.own[d], vec.own[d]) for d in seq.own]:
        assert max(float((a[n].float() - b[n].float()).abs().max()) for n in t.keys) < 1e-6


def test_um_pfssl_resumes_byte_identical_with_its_kept_models_and_none_is_todays_run(tmp_path, monkeypatch):
    from edgesim.learning.algorithms import REGISTRY
    from tests.test_resume import _crashing

    over = ["run.checkpoint_every=1", "budget.rounds=3", "compression.uplink.method=topk",
            "compression.uplink.fraction=0.1", "compression.uplink.error_feedback=true",
            "compression.downlink.method=qsgd", "compression.downlink.bits=8"]
    p, _, _ = _um(tmp_path)
    reference = run_scenario(load_scenario(p, over), tmp_path / "reference")
    with monkeypatch.context() as m:
        m.setitem(REGISTRY, "um_pfssl", _crashing("um_pfssl", 2))
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_scenario(load_scenario(p, over), tmp_path / "r")
    saved = torch.load(tmp_path / "r.incomplete" / "checkpoints" / "um_pfssl.pt", weights_only=False)
    assert len(saved["backend"]["own"]) == 6  # every device kept its model in the warm-up
    out = run_scenario(load_scenario(p, over), tmp_path / "r", resume=True)
    for name in ("rounds.csv", "devices.csv", "events.csv", "summary.json"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    # compression = "none" is today's run, byte for byte
    plain = run_scenario(load_scenario(p, ["budget.rounds=2"]), tmp_path / "plain")
    none = run_scenario(load_scenario(p, ["budget.rounds=2", "compression.uplink=none",
                                          "algorithms.um_pfssl.compression.downlink=none"]), tmp_path / "none")
    for name in OUTPUTS:
        assert (plain / name).read_bytes() == (none / name).read_bytes(), name
