"""Models: sizes, shapes, bits, FLOPs and MC-dropout (docs/studies/dofed_spp.md, docs/extend/executors.md)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from edgesim.learning.models import (
    MODEL_NAMES,
    DoFedCNN,
    PeerCNN,
    ResNet9,
    TextClassifier,
    build_model,
    flops_per_sample,
    model_bits,
)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny tensors: one intra-op thread avoids OpenMP spin-waits on a shared 2-core host."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------- sizes


def test_dofed_cnn_has_545098_parameters_on_cifar():
    assert n_params(DoFedCNN(3, 32, 10)) == 545_098
    # 545,098 float32 = 2.08 MiB, the paper's "≈2.1 MB"
    assert model_bits(DoFedCNN(3, 32, 10)) / 8 / 2**20 == pytest.approx(2.079, abs=1e-3)


def test_peer_cnn_is_the_benchmark_net():
    m = PeerCNN()
    assert n_params(m) == 466_122
    assert [n for n, _ in m.named_parameters()] == [
        "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
        "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
    ]
    assert m.fc1.in_features == 1600


@pytest.mark.parametrize(
    "name, shape, n_classes",
    [
        ("cnn", (3, 32, 32), 10),
        ("cnn", (1, 28, 28), 10),
        ("cnn", (1, 8, 8), 10),
        ("peer_cnn", (3, 32, 32), 10),
        ("resnet9", (1, 28, 28), 10),
        ("resnet9", (3, 32, 32), 100),
    ],
)
def test_image_models_output_shape(name, shape, n_classes):
    m = build_model(name, shape, n_classes, seed=0).eval()
    with torch.no_grad():
        out = m(torch.randn(2, *shape))
    assert out.shape == (2, n_classes)


def test_cnn_feature_map_sizes():
    assert DoFedCNN(1, 28, 10).fc1.in_features == 64 * 7 * 7
    assert DoFedCNN(1, 8, 10).fc1.in_features == 64 * 2 * 2


def test_text_model_shape_init_and_padding():
    m = build_model("text", (12,), 14, vocab_size=50, seed=0)
    assert isinstance(m, TextClassifier)
    tokens = torch.tensor([[5, 7, 9, 0, 0, 0], [3, 0, 0, 0, 0, 0]])
    out = m(tokens)
    assert out.shape == (2, 14)
    # padding (token 0) is not part of the mean
    assert torch.allclose(out[0], m(torch.tensor([[5, 7, 9]]))[0], atol=1e-6)
    assert torch.allclose(out[1], m(torch.tensor([[3]]))[0], atol=1e-6)
    # torchtext tutorial init: U(-0.5, 0.5), bias 0
    assert m.embedding.weight.abs().max() <= 0.5 and m.fc.weight.abs().max() <= 0.5
    assert torch.equal(m.fc.bias, torch.zeros(14))
    assert n_params(m) == 50 * 64 + 64 * 14 + 14


def test_resnet9_layout():
    m = ResNet9(3, 10)
    drops = [mod for mod in m.modules() if isinstance(mod, nn.Dropout)]
    assert len(drops) == 2 and all(d.p == 0.5 for d in drops)
    assert all(isinstance(mod, nn.Dropout) for mod in (m.res3.block[1], m.res3.block[3]))
    assert sum(isinstance(mod, nn.BatchNorm2d) for mod in m.modules()) == 8
    assert m.fc.in_features == 512


# --------------------------------------------------------------------------- build


def test_build_model_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError) as e:
        build_model("vgg", (3, 32, 32), 10)
    for name in MODEL_NAMES:
        assert repr(name) in str(e.value)


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("text", (10,), 14), {}),  # no vocab_size
        (("text", (1, 10), 14), {"vocab_size": 10}),
        (("cnn", (32, 32), 10), {}),
        (("cnn", (3, 32, 32), 1), {}),
        (("cnn", (3, 2, 2), 10), {}),
    ],
)
def test_build_model_bad_arguments(args, kwargs):
    with pytest.raises(ValueError):
        build_model(*args, **kwargs)


def test_build_model_seed_is_explicit_and_leaves_global_rng_alone():
    state = torch.get_rng_state()
    a = build_model("cnn", (1, 8, 8), 10, seed=3)
    b = build_model("cnn", (1, 8, 8), 10, seed=3)
    c = build_model("cnn", (1, 8, 8), 10, seed=4)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert not torch.equal(a.conv1.weight, c.conv1.weight)


# --------------------------------------------------------------------------- bits and flops


def test_model_bits_counts_params_times_32():
    m = DoFedCNN(1, 8, 10)
    assert model_bits(m) == n_params(m) * 32
    assert model_bits(m, bits_per_param=16) == n_params(m) * 16
    with pytest.raises(ValueError):
        model_bits(m, bits_per_param=0)


def test_model_bits_counts_batchnorm_statistics_but_not_the_step_counter():
    m = ResNet9(1, 10)
    bn_stats = sum(2 * mod.num_features for mod in m.modules() if isinstance(mod, nn.BatchNorm2d))
    assert model_bits(m) == (n_params(m) + bn_stats) * 32


@pytest.mark.parametrize("name, shape", [("peer_cnn", (3, 32, 32)), ("cnn", (1, 28, 28))])
def test_flops_per_sample_matches_torch_flop_counter(name, shape):
    m = build_model(name, shape, 10, seed=0)
    x, y = torch.randn(4, *shape), torch.randint(0, 10, (4,))
    counter = FlopCounterMode(display=False)
    with counter:
        F.cross_entropy(m(x), y).backward()
    assert flops_per_sample(m, shape) == pytest.approx(counter.get_total_flops() / 4, rel=0.01)


def test_flops_per_sample_hand_count_and_about_three_forwards():
    # Linear-only check: a 2-layer MLP, 8 -> 4 -> 3; MACs 32 and 12
    m = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 3))
    # the first layer reads the raw input (no input gradient): 4x MACs; the second 6x
    assert flops_per_sample(m, (8,)) == 4 * 32 + 6 * 12
    peer = PeerCNN()
    assert 40e6 < flops_per_sample(peer, (3, 32, 32)) < 41e6  # peer benchmark: 407.6 GFLOP / 10 000 samples
    text = TextClassifier(100, 64, 14)
    assert flops_per_sample(text, (20,)) == 2 * 20 * 64 + 6 * 64 * 14


# --------------------------------------------------------------------------- MC dropout


@pytest.fixture(scope="module")
def small_resnet():
    m = build_model("resnet9", (1, 8, 8), 10, seed=0)
    with torch.no_grad():  # non-trivial running statistics
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    return m


def _state(m):
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def test_mc_dropout_is_stochastic_but_reproducible(small_resnet):
    from edgesim.learning.inference import mc_dropout_proba

    x = torch.randn(4, 1, 8, 8)
    s = [_state(small_resnet)]
    a = mc_dropout_proba(small_resnet, s, x, 1, seed=0)
    b = mc_dropout_proba(small_resnet, s, x, 1, seed=1)
    assert not torch.allclose(a, b)
    assert torch.equal(a, mc_dropout_proba(small_resnet, s, x, 1, seed=0))
    probs = mc_dropout_proba(small_resnet, s, x, 5, seed=0)
    assert probs.shape == (1, 4, 10)
    assert torch.allclose(probs.sum(-1), torch.ones(1, 4), atol=1e-6)


def test_mc_dropout_does_not_depend_on_batching_or_vectorisation(small_resnet):
    """Masks come from (seed, model, pass, sample index): batches of 2 and a loop over models give the same means."""
    from edgesim.learning.inference import mc_dropout_proba

    x = torch.randn(5, 1, 8, 8)
    s = [_state(small_resnet), {k: (v * 1.1 if v.is_floating_point() else v) for k, v in _state(small_resnet).items()}]
    whole = mc_dropout_proba(small_resnet, s, x, 3, seed=7)
    assert torch.allclose(mc_dropout_proba(small_resnet, s, x, 3, seed=7, batch_size=2), whole, atol=1e-6)
    assert torch.allclose(mc_dropout_proba(small_resnet, s, x, 3, seed=7, vectorize=False), whole, atol=1e-6)
    assert torch.all(whole >= 0) and torch.all(whole <= 1)


def test_mc_dropout_keeps_batchnorm_in_eval_and_restores_modes(small_resnet):
    from edgesim.learning.inference import mc_dropout_proba

    m = small_resnet
    m.train()
    before = _state(m)
    x = torch.randn(4, 1, 8, 8) * 3 + 1
    rng = torch.get_rng_state()
    got = mc_dropout_proba(m, [before], x, 2, seed=0)
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())  # running stats untouched
    assert all(mod.training for mod in m.modules())  # modes restored
    assert torch.equal(torch.get_rng_state(), rng)  # global RNG untouched
    # with p -> 0 the MC mean equals the plain eval-mode prediction (BN from running stats)
    for mod in m.modules():
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
    try:
        m.eval()
        with torch.no_grad():
            ref = F.softmax(m(x), -1)
        assert torch.allclose(mc_dropout_proba(m, [before], x, 2, seed=0)[0], ref, atol=1e-6)
    finally:
        for mod in m.modules():
            if isinstance(mod, nn.Dropout):
                mod.p = 0.5
        m.train()
    assert got.shape == (1, 4, 10)
    with pytest.raises(ValueError):
        mc_dropout_proba(m, [before], x, 0, seed=0)


def test_entropy_hand_values():
    from edgesim.learning.inference import entropy

    assert float(entropy(torch.tensor([0.5, 0.5]))) == pytest.approx(math.log(2))
    assert float(entropy(torch.tensor([1.0, 0.0]))) == 0.0


def test_small_cnn_parameters_and_flops_by_hand():
    from edgesim.learning.models import flops_per_sample

    m = build_model("small_cnn", (1, 28, 28), 10)
    # conv1 8·25 + 8, conv2 16·200 + 16, fc1 256·64 + 64, fc2 64·10 + 10
    assert sum(p.numel() for p in m.parameters()) == 208 + 3216 + 16448 + 650
    # MACs: conv1 8·24·24·25 (reads the input: 4 FLOPs/MAC), conv2 16·8·8·200, fc1 64·256, fc2 10·64 (6 FLOPs/MAC)
    assert flops_per_sample(m, (1, 28, 28)) == 4 * 115_200 + 6 * (204_800 + 16_384 + 640)
    assert m(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    with pytest.raises(ValueError, match="image_size"):
        build_model("small_cnn", (1, 12, 12), 10)


# --------------------------------------------------------------------------- pool, then ReLU


def _relu_then_pool(model: DoFedCNN, x: torch.Tensor) -> torch.Tensor:
    """DoFedCNN's forward as it was written before (ReLU, then max-pool): the reference."""
    x = F.max_pool2d(F.relu(model.conv1(x)), 2)
    x = F.max_pool2d(F.relu(model.conv2(x)), 2)
    return model.fc2(F.relu(model.fc1(torch.flatten(x, 1))))


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
@pytest.mark.parametrize("bf16", [False, True])
def test_cnn_pools_before_relu_with_the_same_values_and_gradients(memory_format, bf16):
    """max_pool then ReLU = ReLU then max_pool, forward and backward, bit for bit — also where windows tie
    (the constant background of an image, whole windows <= 0, exact zeros)."""
    torch.manual_seed(0)
    model = DoFedCNN(1, 12, 10).to(memory_format=memory_format)
    x = torch.randn(6, 1, 12, 12)
    x[:3, :, :6] = -0.4  # constant background: equal conv outputs inside a window, positive and negative
    x[3] = 0.0  # every window ties; conv1's output is its bias
    x = x.to(memory_format=memory_format)
    y = torch.randint(0, 10, (6,))
    outs, grads = [], []
    for fn in (model.forward, lambda t: _relu_then_pool(model, t)):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = fn(x)
            loss = F.cross_entropy(out, y)
        loss.backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in model.parameters()])
    assert torch.equal(outs[0], outs[1])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_relu_and_max_pool_commute_exactly_on_ties():
    """Hand case: a window of four equal negative values, one of equal positives, one mixed; forward and gradient."""
    a = torch.tensor([[[[-1.0, -1.0, 2.0, 2.0], [-1.0, -1.0, 2.0, 2.0], [0.0, -3.0, 5.0, 1.0],
                        [-2.0, 0.0, 1.0, 5.0]]]], requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    pa = F.relu(F.max_pool2d(a, 2))
    pb = F.max_pool2d(F.relu(b), 2)
    assert torch.equal(pa, torch.tensor([[[[0.0, 2.0], [0.0, 5.0]]]])) and torch.equal(pa, pb)
    g = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    pa.backward(g)
    pb.backward(g)
    assert torch.equal(a.grad, b.grad)
    assert a.grad.sum() == 2.0 + 4.0  # the two windows whose maximum is <= 0 pass no gradient


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=64, max_size=64), st.booleans())
def test_relu_and_max_pool_commute_property(values, channels_last):
    """Property: on small integers (many ties, zeros, all-negative windows) both orders agree bit for bit, forward
    and backward, in either memory format."""
    x = torch.tensor(values, dtype=torch.float32).reshape(1, 4, 4, 4)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    a = x.clone().requires_grad_(True)
    b = x.clone().requires_grad_(True)
    pa = F.relu(F.max_pool2d(a, 2))
    pb = F.max_pool2d(F.relu(b), 2)
    g = torch.arange(1.0, 1.0 + pa.numel()).reshape(pa.shape)
    pa.backward(g)
    pb.backward(g)
    assert torch.equal(pa, pb) and torch.equal(a.grad, b.grad)


# --------------------------------------------------------------------------- max_pool2d without a gradient


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(2, 6), st.integers(2, 9), st.sampled_from([torch.float32, torch.bfloat16]),
       st.integers(0, 2**31 - 1))
def test_max_pool2d_without_gradient_equals_torchs(n, c, hw, dtype, seed):
    """Property: the channels-last detour gives F.max_pool2d's values bit for bit (also with ties: small
    integers) and hands back an NCHW-contiguous map."""
    from edgesim.learning.layers import max_pool2d

    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, (n, c, hw, hw), generator=g).to(dtype)
    with torch.no_grad():
        out = max_pool2d(x, 2)
    assert torch.equal(out, F.max_pool2d(x, 2)) and out.is_contiguous()


def test_max_pool2d_with_a_gradient_or_under_vmap_is_torchs_own():
    """Training (a gradient) and vmap take F.max_pool2d itself; an eval-mode CNN gives the same logits with and
    without a gradient."""
    from torch.func import vmap

    from edgesim.learning.layers import max_pool2d
    from edgesim.learning.models import DoFedCNN

    torch.manual_seed(0)
    x = torch.randn(3, 4, 6, 6, requires_grad=True)
    out = max_pool2d(x, 2)
    out.sum().backward()
    assert torch.equal(x.grad, torch.autograd.grad(F.max_pool2d(x, 2).sum(), x)[0])
    assert torch.equal(vmap(lambda t: max_pool2d(t, 2))(x.detach()), F.max_pool2d(x.detach(), 2))
    model = DoFedCNN(1, 12, 10).eval()
    images = torch.randn(7, 1, 12, 12)
    with torch.no_grad():
        fast = model(images)
    assert torch.equal(fast, model(images).detach())


# --------------------------------------------------------------------------- dropout's hash, mixed in place


def _signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def test_in_place_mix64_hand_value():
    """SplitMix64's first output from seed 0 is mix(0 + 0x9E3779B97F4A7C15) = 0xE220A8397B1DCDAF (Steele et al.)."""
    from edgesim.learning.layers import _mix64_, mix64

    z = torch.tensor([_signed(0x9E3779B97F4A7C15)], dtype=torch.int64)
    assert int(mix64(z)) == _signed(0xE220A8397B1DCDAF)
    assert int(_mix64_(z.clone())) == _signed(0xE220A8397B1DCDAF)


@settings(max_examples=30, deadline=None)
@given(st.integers(-2**63, 2**63 - 1), st.integers(0, 5), st.integers(0, 40), st.integers(0, 50))
def test_hash_uniform_equals_the_out_of_place_hash(key, call, n_rows, row_numel):
    """Property: dropout's uniforms (mixed in place) equal the formula's out-of-place evaluation bit for bit,
    also under vmap over keys."""
    from torch.func import vmap

    from edgesim.learning.layers import _GOLDEN, _MIX2, _shr, hash_uniform, mix64

    def reference(k, rows):
        j = torch.arange(row_numel, dtype=torch.int64)
        z = mix64(k * _GOLDEN + (call + 1))
        z = mix64(z + rows.unsqueeze(1) * _MIX2 + j.unsqueeze(0) * _GOLDEN)
        return _shr(z, 40).to(torch.float32) * (1.0 / (1 << 24))

    rows = torch.arange(3, 3 + n_rows, dtype=torch.int64)
    k = torch.tensor(key, dtype=torch.int64)
    assert torch.equal(hash_uniform(k, call, rows, row_numel), reference(k, rows))
    keys = torch.stack([k, k + 1])
    assert torch.equal(vmap(lambda kk: hash_uniform(kk, call, rows, row_numel))(keys),
                       torch.stack([reference(k, rows), reference(k + 1, rows)]))
