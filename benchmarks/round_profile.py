"""Where a round's host time goes, per family: training, data and augmentation, evaluation, labelling accuracy,
aggregation, the algorithm's own steps, the engine and the rest — before (every round, every device evaluated)
and after (the evaluation a user at scale chooses), one torch thread.

Families (``--family``, any of):

- ``fedavg_moon``, ``fixavg_moon``: the moonshot (``scenarios/moonshot_fmnist_1000.toml``) cut to 100 devices, 10
  a round, with the same data per device (``train_pool_size = 6000``: 60 images a device, 20 test images each);
- ``fixavg_feddure``: FixAvg at FedDure's paper layout (``scenarios/feddure_fmnist_iid_iid.toml``: 100 devices, 5 a
  round, 600 images a device with 5 labels a class, B = 10, the whole 10,000-image test pool as every device's test
  set) with the ``cnn`` model in place of ResNet-9 (the layout's images and passes kept, each pass ~30x cheaper);
- ``dofed_subset``: DoFed-SPP on its SUBSET twin (``scenarios/arena_dofed_subset.toml``: 20 devices, 10 a round,
  size_scale 0.2);
- ``um_pfssl_490``: UM-pFSSL at 490 images a device (``scenarios/um_pfssl_fmnist_490.toml``: 20 devices, 5 a round).

Each family is timed by wrapping the functions that do it, in CPU seconds of the run's process
(``time.process_time``: a loaded machine's other jobs do not enter; no profiler overhead). A wrapped call's time
goes to its family less the wrapped calls inside it (exclusive time), so every CPU second is counted once:

- training: the executors' ``run`` (the local steps of the round's devices, their batches gathered);
- data and augmentation: the views' parameter draws (``_Plan.draw_views``, on the host's generators), their
  ``apply`` (batched, on the data's device) and the batch indices' move to the device (``_to_device_split``);
- evaluation: ``evaluate_shared``/``evaluate_personal`` (UM-pFSSL: its ``_metrics``);
- labelling accuracy: ``labeling_accuracy``, the one-rule pseudo-label diagnostic (``start_label_rates_of``) and
  the per-device accuracies on the unlabelled rows (``accuracy_per_device`` on ``y_unl_hidden``);
- aggregation: FedAvg's ``server_step``; DoFed-SPP's ``_publish`` (the BS's PCA downsizing of the uploads);
  UM-pFSSL's helper averages (``weighted_average``) and ``_upload``;
- the algorithm's own steps: DoFed-SPP's ``_similarity`` and ``_pseudo_labels``; UM-pFSSL's helper protocol
  (``_protocol``: its MC-dropout evaluations of helpers) and ``pseudo_labels``;
- the algorithm's other code: ``plan_round``/``complete_round`` less all of the above (selection, merging);
- engine: ``Simulation.run_round`` less the backend's calls;
- rest: the round's host CPU time (between two rounds' ends, the CSV rows included) less all of the above.

Variants (``--variant``, any of): ``default`` (every round and device evaluated, the labelling diagnostic on:
the default, "before"), ``eval10`` (``eval_every = 10``, ``label_quality = false``) and ``sample10``
(``eval_devices = 0.1``, ``label_quality = false``: every round evaluated on a fixed 10 % of the devices).
The first round (it loads the data and builds the model; DoFed-SPP's cold start) is left out (``--skip N``: the
first N); ``--rounds M`` rounds are timed after it, and the run is stopped there (the scenario's own last round,
always evaluated, is not in the window: ``eval10`` with M = 10 has exactly one evaluated round). ``--set KEY=VALUE``
adds to every run's scenario.

    python benchmarks/round_profile.py --family fedavg_moon fixavg_moon --rounds 10 --variant default eval10

Results: benchmarks/RESULTS.md, "Where a round's host time goes".
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MOON = ("moonshot_fmnist_1000.toml", ["system.n_devices=100", "run.clients_per_round=10", "data.train_pool_size=6000"])
FAMILY_RUNS = {  # scenario, its --set words
    "fedavg_moon": (MOON[0], [*MOON[1], 'run.algorithms=["fedavg"]']),
    "fixavg_moon": (MOON[0], [*MOON[1], 'run.algorithms=["fixavg"]']),
    "fixavg_feddure": ("feddure_fmnist_iid_iid.toml", ['run.algorithms=["fixavg"]', "train.model='cnn'",
                                                       "train.executor='sequential'", "train.device='cpu'"]),
    "dofed_subset": ("arena_dofed_subset.toml", ['run.algorithms=["dofed_spp"]', "run.max_time_s=1e9",
                                                 "budget.total_time_s=1e9"]),
    "um_pfssl_490": ("um_pfssl_fmnist_490.toml", ['run.algorithms=["um_pfssl"]']),
}
VARIANTS = {"default": [], "eval10": ["run.eval_every=10", "run.label_quality=false"],
            "sample10": ["run.eval_devices=0.1", "run.label_quality=false"]}
ROWS = ("training", "data and augmentation", "evaluation", "labelling accuracy", "aggregation",
        "algorithm's own steps", "algorithm's other code", "engine", "rest")


class Clock:
    """CPU seconds per family, exclusive: a wrapped call's time less the wrapped calls inside it."""

    def __init__(self) -> None:
        self.spent = collections.defaultdict(float)
        self.inner: list[float] = []  # per open call: the time of the wrapped calls inside it

    def timed(self, inner, family):
        """``inner`` timed into ``family`` (a name, or a function of the call's arguments: a name or ``None``,
        ``None`` leaving the call to its caller's family)."""
        clock = self

        def timed(*a, **k):
            fam = family(*a, **k) if callable(family) else family
            if fam is None:
                return inner(*a, **k)
            t = time.process_time()
            clock.inner.append(0.0)
            try:
                return inner(*a, **k)
            finally:
                took = time.process_time() - t
                clock.spent[fam] += took - clock.inner.pop()
                if clock.inner:
                    clock.inner[-1] += took

        return timed

    def wrap(self, owner, attr: str, family, detail: bool = False) -> None:
        """A method of a class (or a module's function where only that module calls it); ``detail``: its time in
        ``family`` also as ``"family: attr"`` (a line of its own under the table)."""
        timed = self.timed(getattr(owner, attr), family)
        if detail:
            clock, plain = self, timed

            def timed(*a, **k):
                before = clock.spent[family]
                try:
                    return plain(*a, **k)
                finally:
                    clock.spent[f"{family}: {attr}"] += clock.spent[family] - before

        setattr(owner, attr, timed)

    def wrap_everywhere(self, module, attr: str, family) -> None:
        """A module's function under every name edgesim's modules imported it by."""
        original = getattr(module, attr)
        wrapped = self.timed(original, family)
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("edgesim") and getattr(mod, attr, None) is original:
                setattr(mod, attr, wrapped)


def _unlabelled_parts(ctx, states, parts, *a, **k):
    """``accuracy_per_device``'s family: labelling accuracy when it scores rows against their hidden labels."""
    hidden = {id(c.y_unl_hidden) for c in ctx.clients}
    return "labelling accuracy" if any(id(y) in hidden for _, y in parts) else None


def instrument(clock: Clock) -> None:
    from edgesim.engine import Simulation
    from edgesim.learning import augment, executors
    from edgesim.learning.algorithms import common
    from edgesim.learning.algorithms.dofed_spp.algorithm import DofedSpp
    from edgesim.learning.algorithms.fedavg.algorithm import FedAvg
    from edgesim.learning.algorithms.um_pfssl import algorithm as um
    from edgesim.learning.executors import SequentialExecutor, VmapExecutor, _Plan

    for cls in (SequentialExecutor, VmapExecutor):
        clock.wrap(cls, "run", "training")
    clock.wrap(_Plan, "draw_views", "data and augmentation")
    clock.wrap_everywhere(executors, "_to_device_split", "data and augmentation")
    for name in dir(augment):  # every augmentation's apply
        cls = getattr(augment, name)
        if isinstance(cls, type) and "apply" in vars(cls):
            clock.wrap(cls, "apply", "data and augmentation")
    for name in ("evaluate_shared", "evaluate_personal"):
        clock.wrap_everywhere(common, name, "evaluation")
    clock.wrap(um.UMPFSSL, "_metrics", "evaluation")
    for name in ("labeling_accuracy", "start_label_rates_of"):
        clock.wrap_everywhere(common, name, "labelling accuracy")
    clock.wrap_everywhere(common, "accuracy_per_device", _unlabelled_parts)
    clock.wrap(FedAvg, "server_step", "aggregation")
    clock.wrap(DofedSpp, "_publish", "aggregation")
    clock.wrap(um, "weighted_average", "aggregation")
    clock.wrap(um.UMPFSSL, "_upload", "aggregation")
    for attr in ("_similarity", "_pseudo_labels"):
        clock.wrap(DofedSpp, attr, "algorithm's own steps", detail=True)
    clock.wrap(um.UMPFSSL, "_protocol", "algorithm's own steps", detail=True)
    clock.wrap(um, "pseudo_labels", "algorithm's own steps", detail=True)
    for cls in (FedAvg, DofedSpp, um.UMPFSSL):
        for attr in ("plan_round", "complete_round"):
            clock.wrap(cls, attr, "algorithm's other code")
    clock.wrap(Simulation, "run_round", "engine")


class _Enough(Exception):
    """Raised by the round hook once the timed rounds are in: the run stops there."""


def profile(family: str, variant: str, rounds: int, out: Path, skip: int = 1, extra: tuple = ()) -> dict:
    """Per timed round, CPU seconds per row: rounds ``skip`` to ``skip + rounds - 1`` (from 0) of the family's run
    in this variant, with the ``extra`` ``--set`` words."""
    from edgesim.learning.algorithms import REGISTRY  # noqa: F401 - every algorithm's module loaded, then wrapped
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    clock = Clock()
    instrument(clock)
    scenario, sets = FAMILY_RUNS[family]
    sc = load_scenario(REPO / "scenarios" / scenario, [*sets, *VARIANTS[variant], *extra])
    stamps, snaps = [], []

    def on_round(name, rec):
        stamps.append(time.process_time())
        snaps.append(dict(clock.spent))
        if len(stamps) >= skip + rounds:
            raise _Enough

    try:
        run_scenario(sc, out, on_round=on_round)
    except _Enough:
        pass
    first, last = snaps[skip - 1], snaps[-1]
    n = len(stamps) - skip
    fam = {k: (last.get(k, 0.0) - first.get(k, 0.0)) / n for k in ROWS if k != "rest"}
    host = (stamps[-1] - stamps[skip - 1]) / n
    fam["rest"] = host - sum(fam.values())
    details = {k: (last.get(k, 0.0) - first.get(k, 0.0)) / n for k in last if ": " in k}
    return {"host": host, "rounds": n, **fam, "details": details}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", nargs="+", default=["fedavg_moon"], choices=sorted(FAMILY_RUNS))
    ap.add_argument("--rounds", type=int, default=10, help="rounds timed after the first (after --skip)")
    ap.add_argument("--skip", type=int, default=1, help="rounds left out before the timed ones (default 1)")
    ap.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                    help="more --set words for every run (after the family's and the variant's)")
    ap.add_argument("--variant", nargs="+", default=["default", "eval10"], choices=sorted(VARIANTS))
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # in a child: one family and variant, JSON out
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit(f"error: --rounds {args.rounds}: expected at least 1 (rounds timed after the first)")
    if args.skip < 1:
        sys.exit(f"error: --skip {args.skip}: expected at least 1 (the first round loads the data)")
    tmp = Path(tempfile.mkdtemp(prefix="round_profile_"))
    if args.one:
        import torch

        torch.set_num_threads(1)
        print(json.dumps(profile(*args.one, args.rounds, tmp / "_".join(args.one), args.skip, tuple(args.sets))))
        return
    for fam in args.family:
        results = {}
        for v in args.variant:  # each in a process of its own (the wraps are on classes and modules)
            t = time.process_time(), time.monotonic()
            done = subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds), "--skip", str(args.skip),
                                   *[w for x in args.sets for w in ("--set", x)], "--one", fam, v],
                                  capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"error: {fam} {v}: exit {done.returncode}\n{done.stderr[-3000:]}")
            results[v] = json.loads(done.stdout.strip().splitlines()[-1])
            cpu = os.times()
            print(f"{fam} {v}: {results[v]} (wall {time.monotonic() - t[1]:.0f} s, children's CPU so far "
                  f"{cpu.children_user + cpu.children_system:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"\n{fam}, {args.rounds} rounds timed after the first {args.skip}"
              + (f", with {' '.join(args.sets)}" if args.sets else "") + ":")
        print("| family | " + " | ".join(f"{v} (ms CPU/round)" for v in results) + " |")
        print("| --- | " + " | ".join("---:" for _ in results) + " |")
        for f in ROWS:
            print(f"| {f} | " + " | ".join(f"{1e3 * r[f]:.0f}" for r in results.values()) + " |")
        print("| **round (host CPU)** | " + " | ".join(f"**{1e3 * r['host']:.0f}**" for r in results.values()) + " |")
        print("| host / training | " + " | ".join(f"{r['host'] / r['training']:.2f}×" for r in results.values()) + " |")
        print("| host / (training + its data and augmentation) | " + " | ".join(
            f"{r['host'] / (r['training'] + r['data and augmentation']):.2f}×" for r in results.values()) + " |")
        print("| host / (training + the algorithm's own steps) | " + " | ".join(
            f"{r['host'] / (r['training'] + r[ROWS[5]]):.2f}×" for r in results.values()) + " |\n")
        for v, r in results.items():
            for k, x in sorted(r["details"].items()):
                print(f"{v}: {k}: {1e3 * x:.0f} ms CPU/round")
        print(flush=True)


if __name__ == "__main__":
    main()
