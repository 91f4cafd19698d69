"""float32 against bfloat16, paired by seed: final accuracy and time to accuracy, with t-intervals.

Reads run folders named ``NAME_sSEED_PRECISION`` (``PRECISION`` float32 or bfloat16) under a folder,
as ``benchmarks/numerics_accuracy.sh`` makes them, pairs the two precisions of each scenario, seed and
algorithm, and prints a Markdown table: the mean of each, the mean paired difference bfloat16 − float32
with its 95 % t-interval (n − 1 degrees of freedom), and whether the interval resolves a difference
(excludes 0). Time to accuracy is the simulated seconds to the highest threshold that every run of the
pair group reached (``summary.json``'s ``time_to_accuracy_s``); the clock charges the same FLOPs in
both precisions, so it differs only by how many rounds the model needs.

    .venv/bin/python benchmarks/numerics_accuracy.py /tmp/runs
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from pathlib import Path

from scipy import stats


def _interval(d: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95 % t-interval of ``d`` (half-width NaN for a single pair)."""
    m = statistics.fmean(d)
    if len(d) < 2:
        return m, float("nan")
    return m, stats.t.ppf(0.975, len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))


def main(root: str) -> str:
    runs: dict = {}
    for folder in sorted(Path(root).iterdir()):
        m = re.fullmatch(r"(.+)_s(\d+)_(float32|bfloat16)", folder.name)
        if not m or not (folder / "summary.json").is_file():
            continue
        summary = json.loads((folder / "summary.json").read_text())
        for alg, s in summary["algorithms"].items():
            runs.setdefault((m.group(1), alg), {}).setdefault(int(m.group(2)), {})[m.group(3)] = s
    lines = ["| scenario | algorithm | pairs | final accuracy float32 | bfloat16 | bf16 − f32 (95 % t-interval) "
             "| threshold | time to it float32 s | bfloat16 s | bf16 − f32 s (95 % t-interval) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (name, alg), by_seed in sorted(runs.items()):
        pairs = [v for _, v in sorted(by_seed.items()) if len(v) == 2]
        if not pairs:
            continue
        f = [p["float32"]["final_accuracy"] for p in pairs]
        b = [p["bfloat16"]["final_accuracy"] for p in pairs]
        dm, dh = _interval([y - x for x, y in zip(f, b)])
        common = set.intersection(*({k for k, v in p[q]["time_to_accuracy_s"].items() if v is not None}
                                    for p in pairs for q in ("float32", "bfloat16")))
        tta = ""
        if common:
            thr = max(common, key=float)
            tf = [p["float32"]["time_to_accuracy_s"][thr] for p in pairs]
            tb = [p["bfloat16"]["time_to_accuracy_s"][thr] for p in pairs]
            tm, th = _interval([y - x for x, y in zip(tf, tb)])
            tta = (f"{thr} | {statistics.fmean(tf):.1f} | {statistics.fmean(tb):.1f} | "
                   f"{tm:+.1f} (±{th:.1f}){' **resolved**' if abs(tm) > th else ''}")
        else:
            tta = "- | - | - | -"
        lines.append(f"| {name} | {alg} | {len(pairs)} | {statistics.fmean(f):.4f} | {statistics.fmean(b):.4f} | "
                     f"{dm:+.4f} (±{dh:.4f}){' **resolved**' if abs(dm) > dh else ''} | {tta} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else "runs/numerics"))
