"""The peer benchmark's FedAvg workload run through edgesim (engine + FedAvg backend + executor).

The workload is the one of ``../shared/bench/peers/fl_workload.py`` (imported from there, not
copied): N=25 clients, K=10 per round, 1000 samples of 3x32x32 each, 1 epoch, batch 50,
SGD lr 0.01 momentum 0.9, the 466,122-parameter CNN (edgesim's ``PeerCNN`` = the peers'
``Net``), weighted averaging, no evaluation; round 0 is a warm-up, rounds 1..10 are timed.

What runs is edgesim's own code path, unchanged: a :class:`edgesim.engine.Simulation` (SimPy
clock, TDMA uplink, 25 devices) drives the registered ``fedavg`` backend
(:class:`edgesim.learning.algorithms.fedavg.FedAvg`), which trains the sampled clients with
``--executor sequential`` (:class:`edgesim.learning.executors.SequentialExecutor`) or ``vmap``
(:class:`edgesim.learning.executors.VmapExecutor`) and averages with
:func:`edgesim.learning.aggregation.weighted_average`. One timed round = ``Simulation.run_round()``
(plan, clock, local training, aggregation, evaluation hook, records).

Only the benchmark's inputs are tailored, through the :class:`edgesim.learning.context.Context` it builds:

- each client's data is ``fl_workload.make_partition(pid)`` (identical tensors), held as the
  client's supervised set; test, labelled-target and unlabelled sets are empty, so the
  evaluation hook of ``FedAvg.complete_round`` has nothing to evaluate (the peers evaluate
  nothing); ``--test-size N`` gives every client N test samples to time evaluation too;
- with ``--seeding peers`` (default) the context derives its random streams as the peers do:
  the round's clients are ``fl_workload.sampled_clients(round)``, a client's generator is seeded as
  ``fl_workload.client_perm(round, pid)`` seeds its permutation, and the initial model is
  ``fl_workload.initial_model()``. The executors draw the batch order from a sub-seed of that
  generator (docs/use/metrics.md, "Paired comparisons"), so the sample order, and with it the trained
  global models, differ from plain_loop.py's (``summarize.py`` still prints the difference from the
  saved ``*_round0.npz`` / ``*_final.npz``); ``--ab-clients`` and ``--ab-numerics`` compare one client
  on the same order;
  ``--seeding edgesim`` keeps edgesim's own derived seeds (same amount of work).

Output: the peers' format — a ``RESULT ...`` line, ``$PEER_RESULTS_DIR/edgesim_<executor>_t<threads><tag>.json``
with ``s_per_round``, ``startup_s`` (process start -> round 0 begins), ``warmup_round_s`` and
``memory`` (peak PSS of the process tree, sampled every 0.5 s), and the round-0/final models.

    .venv/bin/python benchmarks/peer_fedavg.py --executor sequential
    .venv/bin/python benchmarks/peer_fedavg.py --executor vmap
    .venv/bin/python benchmarks/peer_fedavg.py --executor vmap --device cuda   # on a GPU (also sequential)
    .venv/bin/python benchmarks/peer_fedavg.py --summarize runs/peer-bench   # table of an interleaved run
    .venv/bin/python benchmarks/peer_fedavg.py --ab-clients 40 --mallopt     # in-process A/B of one client
    .venv/bin/python benchmarks/peer_fedavg.py --ab-numerics 12 --threads 1  # bare loops and edgesim, 4 formats

``--ab-numerics`` times one client's local training in every memory format and precision
(NCHW/channels-last × float32/bfloat16), each by a bare PyTorch loop (the peers' ``train_client``
with the model and inputs in that format and, for bfloat16, ``torch.autocast`` around the forward
pass and the loss) and by edgesim's ``SequentialExecutor`` with the same
:class:`edgesim.learning.numerics.Numerics`: eight variants in rotating order, one interleaved set,
so the ratio edgesim ÷ best bare loop is measured on the same hardware at the same moment.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.config import DataConfig, RunConfig, TrainConfig
from edgesim.learning.context import ClientData, Context
from edgesim.learning.data.partitions import ClientSplit
from edgesim.learning.executors import SequentialExecutor, VmapExecutor
from edgesim.learning.models import PeerCNN, flops_per_sample, model_bits
from edgesim.learning.numerics import Numerics
from edgesim.learning.objectives import cross_entropy_loss
from edgesim.learning.optim import SGD
from edgesim.learning.tasks import LocalTask, Stream

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.environ.get("PEERS_DIR") or os.path.join(os.path.dirname(REPO), "shared", "bench", "peers")
sys.path.insert(0, PEERS)
try:
    import fl_workload as W  # the peers' module, found once PEERS is on sys.path
except ImportError as e:  # pragma: no cover - depends on the checkout
    raise SystemExit(f"peer_fedavg: cannot import fl_workload from {PEERS} ({e}); set PEERS_DIR") from None


class PeerSeededContext(Context):
    """A Context whose random streams are the peer workload's (benchmark input only).

    ``FedAvg`` asks ``rng("sample", round)`` for the round's clients,
    ``generator("train", round, device)`` for a client's streams (``train_devices``) and
    ``init_state()`` for the initial global model; these answer what
    fl_workload.py uses, so the same clients train on the same batches from the same init.
    """

    def rng(self, *keys) -> np.random.Generator:
        if len(keys) == 2 and keys[0] == "sample":
            # fl_workload.sampled_clients: default_rng([SEED, rnd]).choice(N, K, replace=False), sorted
            return np.random.default_rng([W.SEED, int(keys[1])])
        return super().rng(*keys)

    def generator(self, *keys) -> torch.Generator:
        if len(keys) == 3 and keys[0] == "train":
            _, rnd, pid = keys
            # fl_workload.client_perm: randperm(S) from this seed; client_schedule draws the same randperm
            return torch.Generator().manual_seed(W.SEED * 1_000_003 + int(rnd) * 1_000 + int(pid))
        return super().generator(*keys)

    def init_state(self, *keys):
        if not keys:
            return {k: v.detach().to(self.device).clone() for k, v in W.initial_model().state_dict().items()}
        return super().init_state(*keys)


def build_peer_context(executor: str, seeding: str, test_size: int, device: str = "cpu") -> Context:
    """25 clients holding fl_workload's data (and ``test_size`` test samples each), PeerCNN, SGD as the peers.

    ``device``: where data and model live ("cpu", or "cuda" to time the executors on a GPU;
    sample orders are still drawn on the CPU, as everywhere in edgesim).
    """
    dev = torch.device(device)
    empty_x = torch.empty((0, *W.IMG_SHAPE), dtype=torch.float32, device=dev)
    empty_y = torch.empty((0,), dtype=torch.long, device=dev)
    none = np.zeros(0, dtype=np.int64)
    clients = []
    for pid in range(W.NUM_CLIENTS):
        x, y = W.make_partition(pid)
        x, y = x.to(dev), y.to(dev)
        if test_size:
            g = torch.Generator().manual_seed(7_000_003 + pid)
            xt = torch.randn((test_size, *W.IMG_SHAPE), generator=g)
            yt = torch.randint(0, W.NUM_CLASSES, (test_size,), generator=g)
            xt, yt = xt.to(dev), yt.to(dev)
        else:
            xt, yt = empty_x, empty_y
        split = ClientSplit(train=none, labeled=np.arange(len(y)), unlabeled=none, test=np.arange(len(yt)),
                            train_classes=(), target_classes=tuple(range(W.NUM_CLASSES)))
        clients.append(ClientData(x_sup=x, y_sup=y, x_train=empty_x, y_train=empty_y, x_lab=x, y_lab=y,
                                  x_unl=empty_x, y_unl_hidden=empty_y, x_test=xt, y_test=yt, split=split))
    torch.manual_seed(W.SEED)
    template = PeerCNN(W.NUM_CLASSES)
    cycles = flops_per_sample(template, W.IMG_SHAPE) / 8.0
    template = template.to(dev)
    workload = WorkloadConfig(local_iterations=W.LOCAL_EPOCHS, cycles_per_sample=cycles,
                              samples_per_device=W.SAMPLES_PER_CLIENT, model_bits=model_bits(template))
    train_cfg = TrainConfig(model="peer_cnn", lr=W.LR, momentum=W.MOMENTUM, batch_size=W.BATCH_SIZE,
                            executor=executor, device=dev.type)
    cls = PeerSeededContext if seeding == "peers" else Context
    return cls(
        seed=W.SEED,
        data_cfg=DataConfig(dataset="synthetic", partition="iid"),
        train_cfg=train_cfg,
        run_cfg=RunConfig(algorithms=["fedavg"], clients_per_round=W.CLIENTS_PER_ROUND, rounds=W.TOTAL_ROUNDS),
        workload=workload,
        dataset_name="peer_synthetic",
        n_classes=W.NUM_CLASSES,
        input_shape=W.IMG_SHAPE,
        vocab_size=None,
        device=dev,
        clients=clients,
        model=template,
        model_bits=model_bits(template),
        cycles_per_sample=cycles,
        executor=SequentialExecutor() if executor == "sequential" else VmapExecutor(fallback="error"),
    )


def peer_task() -> LocalTask:
    """The peers' local training as a :class:`LocalTask`: cross-entropy, SGD(lr, momentum), batch 50, their epochs."""
    return LocalTask(loss=cross_entropy_loss(), optimizer=SGD(W.LR, W.MOMENTUM), epochs=W.LOCAL_EPOCHS,
                     streams=(Stream("main", W.BATCH_SIZE),))


def _load_runs(res: str) -> list[dict]:
    import glob
    import json
    import re

    runs = []
    for path in sorted(glob.glob(os.path.join(res, "*.json"))):
        base = os.path.basename(path)[:-5]
        m = re.match(r"(.*?)((?:_malloc)?_r\d+)$", base)
        if not m:
            continue
        d = json.load(open(path))
        if "s_per_round" not in d:
            continue
        d["_base"], d["_variant"], d["_set"] = base, m.group(1), m.group(2)
        runs.append(d)
    return runs


def _load_log(res: str) -> dict[str, dict[str, list[float]]]:
    """run base name -> {"start": [1, 5, 15 min load], "end": [...]} from run_peers.sh's load.log."""
    out: dict[str, dict[str, list[float]]] = {}
    path = os.path.join(res, "load.log")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) >= 6 and parts[1] in ("start", "end"):
                out.setdefault(parts[2], {})[parts[1]] = [float(v) for v in parts[3:6]]
    return out


def _reference(variant: str) -> str:
    """The bare-loop run a variant is compared with: same torch threads (Flower, vmap loop: 2 cores)."""
    import re

    if variant.startswith(("flower", "vmap_loop")):
        return "plain_loop_t2"
    m = re.search(r"_t(\d+)(?:_|$)", variant)
    return f"plain_loop_t{m.group(1) if m else 2}"


def summarize_results(res: str) -> str:
    """Markdown: per interleaved set, each variant's s/round and its ratio to the bare loop of that set."""
    import statistics as st

    runs = _load_runs(res)
    load = _load_log(res)
    ref_name = "plain_loop_t2"
    by_set: dict[str, dict[str, dict]] = {}
    for d in runs:
        by_set.setdefault(d["_set"], {})[d["_variant"]] = d
    variants = sorted({d["_variant"] for d in runs},
                      key=lambda v: (_reference(v) != ref_name, not v.startswith("plain"), not v.startswith("edgesim"), v))
    lines = ["| set | variant | s/round median (min-max of the timed rounds) | ratio to bare loop (same set, same threads) | start-up s "
             "| peak PSS tree MB | load avg 1 min at start / end |", "|---|---|---|---|---|---|---|"]
    ratios: dict[str, list[float]] = {}
    for key in sorted(by_set, key=lambda k: (k.startswith("_malloc"), int(k.rsplit("_r", 1)[1]))):
        group = by_set[key]
        for v in variants:
            d = group.get(v)
            if d is None:
                continue
            ref = group.get(_reference(v))
            s = d["s_per_round"]
            ratio = s["median"] / ref["s_per_round"]["median"] if ref else float("nan")
            if ref:
                ratios.setdefault(v + key.rsplit("_r", 1)[0], []).append(ratio)
            ld = load.get(d["_base"], {})
            la = " / ".join(f"{ld[k][0]:.2f}" for k in ("start", "end") if k in ld) or "-"
            lines.append(f"| {key.lstrip('_')} | {v} | {s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f}) | "
                         f"{ratio:.3f} | {d['startup_s']:.2f} | {d['memory']['tree_peak_pss_mb']:.0f} | {la} |")
    agg = ["", "| variant | sets | ratio to bare loop: median (min-max over sets) | s/round median of run medians "
           "| start-up s median (min-max) | peak PSS tree MB max |", "|---|---|---|---|---|---|"]
    for v in variants:
        for suf in sorted({d["_set"].rsplit("_r", 1)[0] for d in runs if d["_variant"] == v}):
            mine = [d for d in runs if d["_variant"] == v and d["_set"].rsplit("_r", 1)[0] == suf]
            rr = ratios.get(v + suf, [])
            su = [d["startup_s"] for d in mine]
            agg.append(
                f"| {v}{suf} | {len(mine)} | "
                + (f"**{st.median(rr):.3f}** ({min(rr):.3f}-{max(rr):.3f})" if rr else "-")
                + f" | {st.median(d['s_per_round']['median'] for d in mine):.3f} | {st.median(su):.2f} "
                f"({min(su):.2f}-{max(su):.2f}) | {max(d['memory']['tree_peak_pss_mb'] for d in mine):.0f} |"
            )
    eq = ["", "| edgesim run | max abs diff vs the bare loop of the same set and threads: round-0 global | final global |", "|---|---|---|"]
    for d in runs:
        if not d["_variant"].startswith("edgesim") or d.get("seeding") != "peers":
            continue
        ref_base = _reference(d["_variant"]) + d["_set"]
        got = {}
        for when in ("round0", "final"):
            a, b = os.path.join(res, f"{d['_base']}_{when}.npz"), os.path.join(res, f"{ref_base}_{when}.npz")
            if os.path.exists(a) and os.path.exists(b):
                za, zb = np.load(a), np.load(b)
                got[when] = max(float(np.abs(za[k].astype(np.float64) - zb[k].astype(np.float64)).max()) for k in za.files)
        if got:
            eq.append(f"| {d['_base']} | {got.get('round0', float('nan')):.2e} | {got.get('final', float('nan')):.2e} |")
    return "\n".join(lines + agg + eq) + "\n"


def keep_freed_memory() -> bool:
    """The edgesim entry point's glibc setting (``edgesim.learning.malloc``), forced on for the ``--mallopt`` variant."""
    from edgesim.learning.malloc import keep_freed_memory as keep

    return keep({})


def ab_clients(pairs: int) -> str:
    """In one process, alternate one client's local training by the peers' loop and by edgesim's executor.

    The peers' ``fl_workload.train_client`` on their ``Net`` (``load_state_dict`` first, as
    plain_loop.py) and ``SequentialExecutor.run`` of :func:`peer_task` on ``PeerCNN``, same client,
    start and sample order (the peers' loop visits edgesim's order, :func:`edgesim_order`), ``pairs`` times each in alternating order. A busy host slows single
    runs by 10x; over many short (~0.5 s) alternations, the low quantiles of each side's times
    are where both ran undisturbed, so their ratio isolates the executor's own overhead.
    """
    import statistics

    x, y = W.make_partition(0)
    net = W.initial_model()
    start = {k: v.detach().clone() for k, v in net.state_dict().items()}
    template = PeerCNN(W.NUM_CLASSES)
    task = peer_task()
    ex = SequentialExecutor()
    perm = edgesim_order()

    def peer():
        net.load_state_dict(start)
        W.train_client(net, x, y, perm)
        return {k: v.detach().clone() for k, v in net.state_dict().items()}

    def edge():
        g = torch.Generator().manual_seed(W.SEED * 1_000_003 + 0)  # = fl_workload.client_perm(0, 0)'s seed
        return ex.run(template, task, [start], [(x, y)], [g]).params[0]

    diff = W.max_abs_diff(peer(), edge())
    tp, te = [], []
    for i in range(pairs):
        for f, t in ((peer, tp), (edge, te)) if i % 2 == 0 else ((edge, te), (peer, tp)):
            t0 = W.now()
            f()
            t.append(W.now() - t0)
    def q(v, p):
        return float(np.quantile(v, p))

    return (f"{pairs} alternations, {torch.get_num_threads()} threads, one client (20 steps): "
            f"bare loop min {min(tp):.3f} s q10 {q(tp, .1):.3f} median {statistics.median(tp):.3f}; "
            f"edgesim min {min(te):.3f} s q10 {q(te, .1):.3f} median {statistics.median(te):.3f}; "
            f"ratio edgesim/bare: min {min(te) / min(tp):.3f}, q10 {q(te, .1) / q(tp, .1):.3f}, "
            f"q25 {q(te, .25) / q(tp, .25):.3f}, median of pairs {statistics.median(b / a for a, b in zip(tp, te)):.3f}; "
            f"max |diff| of the trained models {diff:.1e}")


def edgesim_order() -> torch.Tensor:
    """The sample order edgesim's executor draws from the generator of :func:`edgesim_client` (its batch stream's
    sub-seed, ``edgesim.learning.executors`` "Common random numbers"), so both sides train on the same batches."""
    from edgesim.learning.executors import BATCHES, derive_seed
    from edgesim.learning.models import draw_seed

    seed = draw_seed(torch.Generator().manual_seed(W.SEED * 1_000_003 + 0))
    return torch.randperm(W.SAMPLES_PER_CLIENT, generator=torch.Generator().manual_seed(derive_seed(seed, BATCHES, 0)))


NUMERICS = [Numerics("float32", "contiguous"), Numerics("float32", "channels_last"),
            Numerics("bfloat16", "contiguous"), Numerics("bfloat16", "channels_last")]


def bare_client(numerics: Numerics, start: dict):
    """The peers' ``train_client`` in ``numerics`` from ``start``: model and inputs in its memory format, bfloat16
    autocast around the forward pass and the loss; returns the trained state (contiguous, float32)."""
    x, y = W.make_partition(0)
    net = W.initial_model()
    fmt = torch.channels_last if numerics.channels_last else torch.contiguous_format
    xf = x.to(memory_format=fmt)
    perm = edgesim_order()

    def run():
        net.load_state_dict(start)
        net.to(memory_format=fmt)
        opt = torch.optim.SGD(net.parameters(), lr=W.LR, momentum=W.MOMENTUM)
        net.train()
        for _ in range(W.LOCAL_EPOCHS):
            for i in range(0, W.SAMPLES_PER_CLIENT, W.BATCH_SIZE):
                idx = perm[i: i + W.BATCH_SIZE]
                opt.zero_grad(set_to_none=True)
                with numerics.autocast("cpu"):
                    loss = F.cross_entropy(net(xf[idx]), y[idx])
                loss.backward()
                opt.step()
        return {k: v.detach().contiguous().clone() for k, v in net.state_dict().items()}

    return run


def edgesim_client(numerics: Numerics, start: dict):
    """``SequentialExecutor(numerics)`` on the same client, start and sample order as :func:`bare_client`."""
    x, y = W.make_partition(0)
    template = PeerCNN(W.NUM_CLASSES)
    task = peer_task()
    ex = SequentialExecutor(numerics)

    def run():
        g = torch.Generator().manual_seed(W.SEED * 1_000_003 + 0)  # = fl_workload.client_perm(0, 0)'s seed
        return ex.run(template, task, [start], [(x, y)], [g]).params[0]

    return run


def ab_numerics(rounds: int) -> str:
    """Markdown: one client's training by the bare loop and by edgesim in each of :data:`NUMERICS`, ``rounds``
    rotations of all eight (the order shifts by one each rotation); medians and q25, edgesim ÷ the bare loop of the
    same numerics, and ÷ the best bare loop; max |diff| of each pair's trained models."""
    import statistics

    variants = []
    start = {k: v.detach().clone() for k, v in W.initial_model().state_dict().items()}
    for n in NUMERICS:
        name = f"{'NCHW' if not n.channels_last else 'channels-last'}, {n.precision}"
        variants += [("bare", name, n, bare_client(n, start)), ("edgesim", name, n, edgesim_client(n, start))]
    out = {v[:2]: v[3]() for v in variants}  # warm-up, and the models compared
    times: dict = {v[:2]: [] for v in variants}
    for r in range(rounds):
        for j in range(len(variants)):
            kind, name, _, f = variants[(j + r) % len(variants)]
            t0 = W.now()
            f()
            times[(kind, name)].append(W.now() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    q25 = {k: float(np.quantile(v, 0.25)) for k, v in times.items()}
    best = min((k for k in med if k[0] == "bare"), key=lambda k: med[k])
    steps = -(-W.SAMPLES_PER_CLIENT // W.BATCH_SIZE) * W.LOCAL_EPOCHS
    flops = flops_per_sample(PeerCNN(W.NUM_CLASSES), W.IMG_SHAPE) * W.SAMPLES_PER_CLIENT * W.LOCAL_EPOCHS
    lines = [f"{rounds} rotations of 8 variants, {torch.get_num_threads()} thread(s), one client ({steps} steps of "
             f"{W.BATCH_SIZE}, {flops / 1e9:.2f} GFLOP), {W.env_info().get('cpu', '')}; best bare loop: {best[1]}",
             "", "| layout, precision | bare loop s (median, q25) | edgesim s (median, q25) | GFLOP/s edgesim "
             r"| edgesim ÷ bare, same (median, q25) | edgesim ÷ best bare (median) | max \|diff\| of the models |",
             "|---|---|---|---|---|---|---|"]
    for n in NUMERICS:
        name = f"{'NCHW' if not n.channels_last else 'channels-last'}, {n.precision}"
        b, e = ("bare", name), ("edgesim", name)
        diff = W.max_abs_diff(out[b], out[e])
        lines.append(f"| {name} | {med[b]:.3f}, {q25[b]:.3f} | {med[e]:.3f}, {q25[e]:.3f} | {flops / med[e] / 1e9:.1f} "
                     f"| {med[e] / med[b]:.3f}, {q25[e] / q25[b]:.3f} | {med[e] / med[best]:.3f} | {diff:.1e} |")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] == "--summarize":
        print(summarize_results(sys.argv[2] if len(sys.argv) > 2 else W.RESULTS_DIR), end="")
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--summarize", metavar="DIR", help="print the interleaved-set summary of DIR's results and exit")
    ap.add_argument("--executor", choices=("sequential", "vmap"), default="sequential")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2 = all cores)")
    ap.add_argument("--seeding", choices=("peers", "edgesim"), default="peers",
                    help="peers: fl_workload's clients, sample orders and init (comparable models); "
                         "edgesim: edgesim's own derived seeds")
    ap.add_argument("--test-size", type=int, default=0,
                    help="test samples per client (default 0: no evaluation, as the peers)")
    ap.add_argument("--timed-rounds", type=int, default=W.TIMED_ROUNDS,
                    help=f"timed rounds after the warm-up round (default {W.TIMED_ROUNDS}, as the peers)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where data and model live (cuda: the GPU comparison of the executors; name gets _cuda)")
    ap.add_argument("--mallopt", action="store_true",
                    help="keep freed memory in the process (glibc mallopt, see keep_freed_memory); name gets _mallopt")
    ap.add_argument("--ab-clients", type=int, metavar="PAIRS", default=0,
                    help="instead of the run: alternate one client's training by the bare loop and by "
                         "SequentialExecutor PAIRS times in this process and print the time ratios")
    ap.add_argument("--ab-numerics", type=int, metavar="ROUNDS", default=0,
                    help="instead of the run: one client by the bare loop and by edgesim in NCHW/channels-last x "
                         "float32/bfloat16, ROUNDS rotations of the eight, and print the table")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    mallopt = keep_freed_memory() if args.mallopt else False
    total_rounds = W.WARMUP_ROUNDS + args.timed_rounds

    torch.set_num_threads(args.threads)
    if args.ab_clients:
        print(ab_clients(args.ab_clients) + f"; mallopt {mallopt}")
        return
    if args.ab_numerics:
        print(ab_numerics(args.ab_numerics))
        return
    mem = W.MemSampler().start()

    # start-up: data of all clients, model, context, backend, engine (as plain_loop.py: data + model)
    ctx = build_peer_context(args.executor, args.seeding, args.test_size, args.device)
    cuda = ctx.device.type == "cuda"
    n_dev = W.NUM_CLIENTS
    system = SystemConfig(n_devices=n_dev, access="tdma", cpu_freq_hz=1e9)
    budget = BudgetConfig(total_time_s=1e9, rounds=total_rounds)
    backend = REGISTRY["fedavg"].build(ctx, REGISTRY["fedavg"].config_cls())
    sim = Simulation(system, budget, backend, seed=W.SEED, record_events=False)
    startup = W.process_age_s()

    name = (f"edgesim_{args.executor}_t{args.threads}{'_cuda' if cuda else ''}"
            f"{'_mallopt' if args.mallopt else ''}{args.tag}")
    times: list[float] = []
    warm = None
    sim_s = []
    for rnd in range(total_rounds):
        t0 = W.now()
        rec = sim.run_round()
        if cuda:
            torch.cuda.synchronize()
        dt = W.now() - t0
        selected = sorted(d.device for d in rec.devices)
        if args.seeding == "peers" and selected != W.sampled_clients(rnd):
            raise SystemExit(f"round {rnd}: edgesim sampled {selected}, the peers {W.sampled_clients(rnd)}")
        sim_s.append(rec.duration_s)
        if rnd == 0:
            W.save_state(f"{name}_round0.npz", backend.global_state)
        if rnd < W.WARMUP_ROUNDS:
            warm = dt
        else:
            times.append(dt)
        print(f"round {rnd}: {dt:.3f} s clients={selected} simulated {rec.duration_s:.2f} s "
              f"train_loss {rec.metrics.get('train_loss', float('nan')):.4f}", flush=True)

    memres = mem.stop()
    s = W.summarize(times)
    W.save_state(f"{name}_final.npz", backend.global_state)
    payload = {
        "variant": name,
        "executor": args.executor,
        "threads": args.threads,
        "seeding": args.seeding,
        "test_size": args.test_size,
        "mallopt": mallopt,
        "device": str(ctx.device),
        "cuda_max_memory_allocated_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
        "s_per_round": s,
        "startup_s": startup,
        "warmup_round_s": warm,
        "simulated_s_per_round": sim_s,
        "engine_events": sim.event_count,
        "memory": memres,
        "env": {**W.env_info(), "glibc_tunables": os.environ.get("GLIBC_TUNABLES", "")},
        "num_params": W.num_params(ctx.model),
    }
    print(W.write_json(f"{name}.json", payload))
    print(W.fmt_line(name, s, startup, memres))


if __name__ == "__main__":
    main()
