"""The worked example of docs/extend/writing_a_codec.md: a codec installed as a package (offline, into a ``--target``
folder on ``PYTHONPATH``), planned and run by name, its bits the ones the clock charges; the same module by
``[run] plugins``; a codec plugin that takes a built-in's name is refused in one line naming both."""

from __future__ import annotations

import csv
import importlib
import json
import sys
from pathlib import Path

import pytest
from cli_here import edgesim_here
from conftest import TINY_SCENARIO
from documented_plugin import edgesim, install, write_package

DOC = Path(__file__).resolve().parents[1] / "docs" / "extend" / "writing_a_codec.md"




@pytest.fixture
def example(tmp_path) -> Path:
    return write_package(DOC, tmp_path, {"edgesim_uniform.py", "pyproject.toml", "uniform.toml"})


def _sizes() -> list[int]:
    """The numbers of each float tensor of the example's model (digits, 8x8, 10 classes): what FedAvg sends."""
    from edgesim.learning.models import build_model

    model = build_model("cnn", (1, 8, 8), 10, seed=0)
    return [v.numel() for v in model.state_dict().values() if v.is_floating_point()]


def test_the_documented_codec_installs_plans_and_runs(example, tmp_path):
    target, work, scenario = install(example, tmp_path, "uniform.toml")
    sizes = _sizes()
    expected = 32 * len(sizes) + 4 * sum(sizes)  # 32·T + b·P, by hand
    plan = edgesim("plan", str(scenario), "--json", cwd=work, pythonpath=str(target))
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["compression"]["fedavg"]["uplink"] == {
        "method": "uniform4+ef", "bits": expected, "ratio": expected / (32 * sum(sizes))}
    done = edgesim("run", str(scenario), "--out", str(work / "run"), "-q", cwd=work, pythonpath=str(target))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((work / "run" / "rounds.csv").open()))
    assert [float(r["bits_up"]) for r in rows] == [3 * expected] * 2  # three devices a round, each its size_bits
    assert all(0 < float(r["compression_error"]) < 0.5 for r in rows)
    bad = edgesim("run", str(scenario), "--set", "compression.uplink.bits=40", "--out", str(work / "x"), "-q",
                  cwd=work, pythonpath=str(target))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert ("[compression] uplink.bits = 40: expected an integer in 2..16 (the uniform codec's bits per number)"
            in bad.stderr)
    unknown = edgesim_here("run", scenario, "--out", work / "y", "-q")  # not installed in this process
    assert unknown.returncode == 2 and "uplink.method = 'uniform': expected one of 'none'" in unknown.stderr


def test_run_plugins_imports_the_codec_and_its_parts_weigh_its_size(example, monkeypatch):
    scenario = example / "uniform.toml"
    scenario.write_text(scenario.read_text().replace("[run]\n", '[run]\nplugins = ["edgesim_uniform"]\n'))
    done = edgesim("run", str(scenario), "--out", str(example / "run"), "-q", cwd=example)
    assert done.returncode == 0, done.stderr
    assert 'method = "uniform"' in (example / "run" / "config.toml").read_text()
    # its parts, in this process: the module imported from the example's folder, its registrations taken back after
    import torch

    from edgesim.codecs import CODECS
    from edgesim.compression import Codec, encoded_bits
    from edgesim.learning.compression import ENCODINGS, decode, encode, payload_bits

    monkeypatch.syspath_prepend(str(example))
    try:
        importlib.import_module("edgesim_uniform")
        c = Codec("uniform", bits=3)
        e = encode(c, [torch.tensor([3.0, -4.0]), torch.zeros(0), torch.tensor([0.0, 1.0, -2.0])])
        # by hand: 32·T + b·P = 32·2 + 3·5 bits; L = 2^2 − 1 = 3, q = round(3·v/m) per tensor (m = 4, then 2: 1.5
        # rounds to even), decoded m·q/3
        assert encoded_bits(c, [2, 0, 3]) == payload_bits(e) == 79
        assert decode(e).tolist() == pytest.approx([8 / 3, -4.0, 0.0, 4 / 3, -2.0])
    finally:
        CODECS.pop("uniform", None)
        ENCODINGS.pop("uniform", None)
        sys.modules.pop("edgesim_uniform", None)


def test_a_codec_plugin_that_takes_a_builtin_name_is_refused_naming_both(tmp_path):
    (tmp_path / "my_qsgd.py").write_text(
        "from dataclasses import dataclass\nfrom typing import ClassVar\nfrom edgesim.codecs import register_codec\n\n"
        "@register_codec('qsgd')\n@dataclass(frozen=True)\nclass Mine:\n    lossy: ClassVar[bool] = True\n\n"
        "    def size_bits(self, sizes):\n        return sum(sizes)\n")
    (tmp_path / "s.toml").write_text(TINY_SCENARIO)
    done = edgesim("run", "s.toml", "--set", 'run.plugins=["my_qsgd"]', "--out", "r", "-q", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert ("codec 'qsgd' is registered twice: by edgesim.codecs.Qsgd and again by my_qsgd.Mine; expected a name "
            "not taken") in done.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "r.incomplete").exists()


def test_a_codec_without_its_encoding_is_refused_before_any_round(tmp_path):
    (tmp_path / "half_codec.py").write_text(
        "from dataclasses import dataclass\nfrom typing import ClassVar\nfrom edgesim.codecs import register_codec\n\n"
        "@register_codec('half_only')\n@dataclass(frozen=True)\nclass HalfOnly:\n    lossy: ClassVar[bool] = False\n\n"
        "    def size_bits(self, sizes):\n        return 8 * sum(sizes)\n")
    (tmp_path / "s.toml").write_text(TINY_SCENARIO)
    done = edgesim("run", "s.toml", "--set", 'run.plugins=["half_codec"]', "--set", "compression.uplink=half_only",
                   "--out", "r", "-q", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert ("[compression] uplink.method = 'half_only' (for 'fedavg'): the codec has no encoding on the learning "
            "side; expected its plugin to register one") in done.stderr
