"""The one-device anchor: semi-supervised learning with all the data on one device, no federation.

One device holds a whole training split: ``--labels`` of its images labelled (balanced, ``labels / 10`` per
class, drawn with the seed), every other training image unlabelled. Three methods train the same model
from the same initialisation through the project's own trainer (``edgesim.learning.executors``, one
``run`` call of one client, so momentum and the schedule span the whole run):

* ``labelled``: cross-entropy on the weak view of the labelled images only (FixMatch's supervised term);
* ``fixmatch``: FixMatch (Sohn et al., NeurIPS 2020, Eq. 2-4), τ = 0.95, λ_u = 1, μ = 7;
* ``uda``: UDA (Xie et al., NeurIPS 2020) as the FedAvg family configures it (docs/model/fedavg_family.md).

Views are the data set's (``DatasetSpec.hflip_preserves_labels``: no flip on MNIST, flip on Fashion-MNIST;
``--hflip on`` forces the flip, to measure what it costs). Optimiser: SGD, lr 0.03, momentum 0.9, Nesterov,
weight decay 5e-4 and FixMatch's cosine decay ``cos(7πk/16K)`` over the K steps (FixMatch §4, Table 6).
Steps: the labelled-only run takes as many steps as FixMatch's (its labelled stream cycles); a step of
FixMatch/UDA trains B + 2μB rows, of labelled-only B. The unlabelled stream leads: K = epochs · ⌈n_u / μB⌉.

    .venv/bin/python benchmarks/ssl_limit.py --dataset mnist --labels 100 --epochs 3 --methods fixmatch
    .venv/bin/python benchmarks/ssl_limit.py --dataset fashion_mnist --labels 250 --json out.json
    .venv/bin/python benchmarks/ssl_limit.py --table out.json   # the docs' Markdown table of those records

``--ema-decay d`` also keeps FixMatch's evaluation model, an exponential moving average of the weights updated
after every step (``LocalTask.ema_decay``; FixMatch uses 0.999), and reports its test accuracy beside the raw
weights' (``ema_accuracy``). ``--precision bfloat16`` trains under bfloat16 autocast (edgesim.learning.numerics);
channels-last is the executors' default memory format. Host wall-clock and process CPU time are printed per run
(one torch thread by default). Results: docs/studies/ssl_limit.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np
import torch

from edgesim.learning.augment import make_augmentation
from edgesim.learning.data.datasets import DATASETS, load_dataset
from edgesim.learning.executors import SequentialExecutor
from edgesim.learning.inference import evaluate
from edgesim.learning.label_quality import TRUTH
from edgesim.learning.models import build_model
from edgesim.learning.numerics import Numerics
from edgesim.learning.objectives import cross_entropy_loss, fixmatch_loss, uda_loss
from edgesim.learning.optim import SGD, Cosine
from edgesim.learning.tasks import LocalTask, Stream, View

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = ("labelled", "fixmatch", "uda")


def balanced_labels(y: np.ndarray, n_labels: int, n_classes: int, seed: int) -> np.ndarray:
    """``n_labels / n_classes`` indices of each class, drawn without replacement; sorted."""
    if n_labels % n_classes:
        raise SystemExit(f"--labels(={n_labels}) must be a multiple of the {n_classes} classes")
    rng = np.random.default_rng([seed, 0x55])
    per = n_labels // n_classes
    return np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), per, replace=False) for c in range(n_classes)]))


def make_task(method: str, shape, mean, std, hflip: bool, batch: int, mu: int, epochs: int,
              ema_decay: float | None = None) -> LocalTask:
    weak = make_augmentation("weak", shape, mean, std, hflip)
    opt = SGD(0.03, 0.9, 5e-4, True)
    if method == "labelled":
        return LocalTask(loss=cross_entropy_loss("x_aug"), optimizer=opt, epochs=epochs, schedule=Cosine(),
                         streams=(Stream("unl", mu * batch), Stream("lab", batch)),
                         views=(View("x_aug", "x", weak),), passes={"unl": 0.0, "lab": 1.0}, report_stream="lab",
                         ema_decay=ema_decay)
    strong = make_augmentation("strong", shape, mean, std, hflip)
    loss = fixmatch_loss(0.95, 1.0) if method == "fixmatch" else uda_loss(0.6, 1.0, 8.0, 20)
    return LocalTask(loss=loss, optimizer=opt, epochs=epochs, schedule=Cosine(),
                     streams=(Stream("lab", batch), Stream("unl", mu * batch)),
                     views=(View("x_aug", "x", weak), View("u_weak", "u", weak), View("u_strong", "u", strong)),
                     passes={"lab": 1.0, "unl": 2.0}, ema_decay=ema_decay)


def run_one(ds, method: str, labels: int, epochs: int, seed: int, hflip: bool, batch: int, mu: int,
            pool: int | None = None, ema_decay: float | None = None, precision: str = "float32") -> dict:
    lab = balanced_labels(ds.y_train, labels, ds.n_classes, seed)
    unl = np.setdiff1d(np.arange(len(ds.y_train)), lab)
    if pool is not None:  # the device holds ``pool`` training images: the labelled ones and pool − labels others
        unl = np.sort(np.random.default_rng([seed, 0x56]).choice(unl, pool - labels, replace=False))
    x, y = torch.as_tensor(ds.x_train), torch.as_tensor(ds.y_train)
    data = {"lab": {"x": x[lab], "y": y[lab]}, "unl": {"u": x[unl], TRUTH: y[unl]}}
    model = build_model("cnn", ds.input_shape, ds.n_classes, seed=seed)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    task = make_task(method, ds.input_shape, ds.mean, ds.std, hflip, batch, mu, epochs, ema_decay)
    executor = SequentialExecutor(Numerics(precision=precision))
    t0, c0 = time.perf_counter(), time.process_time()
    res = executor.run(model, task, [start], [data], [torch.Generator().manual_seed(seed)])
    host_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    evaluated = [res.params[0]] + ([res.ema[0]] if res.ema is not None else [])
    accs = evaluate(model, evaluated, torch.as_tensor(ds.x_test), torch.as_tensor(ds.y_test))
    acc, ema_acc = accs[0], (accs[1] if len(accs) > 1 else None)
    aux = {k: v[0] for k, v in res.aux.items()}
    return {"dataset": ds.name, "labels": labels, "method": method, "seed": seed, "hflip": hflip,
            "steps": res.n_steps[0], "epochs_unlabelled": epochs, "test_accuracy": acc, "ema_decay": ema_decay,
            "ema_accuracy": ema_acc, "precision": precision, "memory_format": executor.numerics.memory_format,
            "host_s": round(host_s, 1),
            "cpu_s": round(cpu_s, 1), "images": len(lab) + len(unl), "batch": batch, "mu": mu,
            "mask_rate": aux.get("mask_rate"), "pseudo_label_accuracy": aux.get("pseudo_label_accuracy"),
            "threads": torch.get_num_threads()}


NAMES = {"labelled": "labelled-only", "fixmatch": "FixMatch", "uda": "UDA", "mnist": "MNIST",
         "fashion_mnist": "Fashion-MNIST"}


def table(path: str) -> str:
    """The Markdown table of a ``--json`` file: one row per data set, labels, method and seed (last record wins)."""
    recs = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            recs[(("mnist", "fashion_mnist").index(r["dataset"]), r["labels"], METHODS.index(r["method"]),
                  r["seed"])] = r
    rows = ["| data set, labels | method | seed | steps | test accuracy | EMA accuracy | mask rate | CPU s | host s |",
            "|---|---|---|---|---|---|---|---|---|"]
    for (_, labels, _, seed), r in sorted(recs.items()):
        ds = r["dataset"]
        def num(v, fmt):
            return "—" if v is None else format(v, fmt)
        rows.append(f"| {NAMES[ds]}, {labels} | {NAMES[r['method']]} | {seed} | {r['steps']:,} | "
                    f"{r['test_accuracy']:.3f} | {num(r.get('ema_accuracy'), '.3f')} | {num(r['mask_rate'], '.2f')} | "
                    f"{r['cpu_s']:.1f} | {r['host_s']:.1f} |")
    return "\n".join(rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="mnist", choices=("mnist", "fashion_mnist"))
    p.add_argument("--labels", type=int, nargs="+", default=[100])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--epochs", type=int, default=3, help="passes over the unlabelled images (K = epochs·⌈n_u/μB⌉)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--pool", type=int, help="training images on the device (default: the whole split)")
    p.add_argument("--mu", type=int, default=7)
    p.add_argument("--hflip", choices=("dataset", "on", "off"), default="dataset")
    p.add_argument("--ema-decay", type=float, help="also evaluate an EMA of the weights (FixMatch: 0.999)")
    p.add_argument("--precision", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data-dir", default=os.environ.get("EDGESIM_DATA", os.path.join(REPO, "..", "shared", "data")))
    p.add_argument("--json", help="append each run's record as a JSON line here")
    p.add_argument("--table", metavar="JSON", help="print the Markdown table of a --json file and stop")
    a = p.parse_args(argv)
    if a.table:
        print(table(a.table))
        return
    torch.set_num_threads(a.threads)
    ds = load_dataset(a.dataset, a.data_dir)
    hflip = {"dataset": DATASETS.lookup(a.dataset).hflip_preserves_labels, "on": True, "off": False}[a.hflip]
    n_u = (a.pool or len(ds.y_train)) - min(a.labels)
    print(f"{a.dataset}: {a.pool or len(ds.y_train)} train images, steps ≈ {a.epochs}·⌈{n_u}/{a.mu * a.batch}⌉ = "
          f"{a.epochs * math.ceil(n_u / (a.mu * a.batch))}, flip {'on' if hflip else 'off'}", flush=True)
    for labels in a.labels:
        for seed in a.seeds:
            for method in a.methods:
                rec = run_one(ds, method, labels, a.epochs, seed, hflip, a.batch, a.mu, a.pool, a.ema_decay,
                              a.precision)
                print(json.dumps(rec), flush=True)
                if a.json:
                    with open(a.json, "a") as f:
                        f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
