"""What does the BS's PCA downsizing cost in accuracy? Reciprocal models before and after, per rank.

Builds a DoFed-SPP scenario's devices (default: Fashion-MNIST SUBSET, seed 0),
trains every reciprocal model through the Phase-0 warm-up (L·I epochs on its
train set), downsizes them with :func:`edgesim.learning.algorithms.dofed_spp.pca.downsize` at each rank
fraction and measures each model's accuracy on the test images of *its own
train classes* (what it was trained to recognise) — before and after. Prints
the mean ± std over devices and the downlink bits per model.

    OMP_NUM_THREADS=1 python benchmarks/dofed_pca.py --fractions 1.0 0.5 0.25 0.1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.dofed_spp.pca import compressed_bits, downsize
from edgesim.learning.context import build_context
from edgesim.learning.data.datasets import load_dataset
from edgesim.learning.inference import evaluate
from edgesim.scenarios.schema import load_scenario

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default=str(REPO / "scenarios" / "dofed_fmnist_subset.toml"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fractions", type=float, nargs="+", default=[1.0, 0.5, 0.25, 0.1])
    args = parser.parse_args(argv)
    sc = load_scenario(args.scenario, [f"seed={args.seed}"])
    data = sc.learning["data"]
    ds = load_dataset(data.dataset, data.data_dir)
    ctx = build_context(sc.seed, data, sc.learning["train"], sc.learning["run"], sc.workload, sc.system.n_devices,
                        dataset=ds)
    alg = REGISTRY["dofed_spp"].build(ctx, sc.learning["algorithms"]["dofed_spp"])
    warm = alg._train("warmup", 0, alg.rec, [(c.x_train, c.y_train) for c in ctx.clients], alg.warmup_cfg).params
    x_test = torch.as_tensor(ds.x_test, device=ctx.device)
    y_test = torch.as_tensor(ds.y_test, device=ctx.device)
    sets = []
    for c in ctx.clients:
        keep = torch.isin(y_test, torch.as_tensor(c.split.train_classes, device=ctx.device))
        sets.append((x_test[keep], y_test[keep]))
    template = ctx.model.state_dict()
    full_bits = compressed_bits(template, 1.0)
    print(f"{Path(args.scenario).name}, seed {args.seed}: {ctx.n_devices} reciprocal models after the warm-up "
          f"({sc.learning['algorithms']['dofed_spp'].warmup_rounds} rounds); accuracy on the test images of each "
          f"model's own train classes")
    print("| rank fraction | downlink bits per model | share of m | accuracy (mean ± std over devices) | change |")
    print("|---|---|---|---|---|")
    base = None
    for f in args.fractions:
        models = warm if f >= 1.0 else downsize(warm, f)
        accs = np.array([evaluate(ctx.model, [m], x, y)[0] for m, (x, y) in zip(models, sets)])
        base = accs if base is None else base
        bits = compressed_bits(template, f)
        print(f"| {f:g} | {bits:,} | {bits / full_bits:.2f} | {accs.mean():.3f} ± {accs.std():.3f} | "
              f"{(accs - base).mean():+.3f} |")


if __name__ == "__main__":
    main()
