"""Several runs sharing one GPU: runs per hour of ``edgesim sweep`` with 1, 2 and 4 runs at a time.

A sweep of ``--runs`` seeds of the bundled scenario with ResNet-9 on the GPU (small models on 8×8 digits:
one run leaves the GPU mostly idle, which is when sharing pays), through the local process-pool
executor (``edgesim.scenarios.sweep.run_sweep``); each job count gets a fresh sweep folder.

    python3 benchmarks/gpu_sweep.py --out /tmp/gpu --runs 4 --rounds 10
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgesim.scenarios.sweep import make_spec, run_sweep


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--jobs", default="1,2,4")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp())
    spec = make_spec(None, [], a.runs, [f"train.device='{a.device}'", "train.model='resnet9'", f"run.rounds={a.rounds}"])
    res = {"runs": a.runs, "rounds": a.rounds, "rows": []}
    for jobs in [int(j) for j in a.jobs.split(",")]:
        t0 = time.perf_counter()
        out = run_sweep(spec, tmp / f"jobs{jobs}", jobs=jobs, threads=1, progress=False, plots=False)
        dt = time.perf_counter() - t0
        ok = sum(1 for s in out.status.values() if s == "ok")
        res["rows"].append({"jobs": jobs, "seconds": dt, "ok": ok, "runs_per_hour": ok / dt * 3600})
        print(res["rows"][-1], flush=True)
    (a.out / "gpu_sweep.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
