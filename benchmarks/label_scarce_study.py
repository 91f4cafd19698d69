"""Tables of the label-scarce studies (issue 35; docs/studies/ssl_limit.md), from the runs of label_scarce_study.sh.

    python benchmarks/label_scarce_study.py choose TUNE_SWEEP... [--column val_accuracy]  # --set lines: best rates
    python benchmarks/label_scarce_study.py final RUN_OR_SWEEP... [--baseline fedavg_labeled] [--last 3]

``choose``: every run of the tuning sweeps (made with ``--set data.validation_size=N``: the accuracy column is
the validation split's, never the test set; ``--column val_accuracy`` for runs with ``data.server_validation``)
scored by its mean accuracy over the last 5 rounds, averaged over
the tuning seeds; per algorithm, the learning rate with the highest score (the rate each run's ``config.toml`` says
the algorithm trained with: ``rate_used``), printed as ``--set
algorithms.NAME.lr=VALUE`` (one a line) and, to stderr, the whole grid.

``final``: per data layout (``data.partition``) and algorithm, the final test accuracy (mean of the last
``--last`` rounds) over the seeds, with a 95 % Student-t interval, and each algorithm's paired difference from
``--baseline`` over the seeds both ran (``edgesim.results.stats``), and, in the last round, the pseudo-label
figures by one rule for every method — the model the devices start the round from, on all their unlabelled rows:
the share it labels right (``start_label_accuracy``), the share right among the rows at or above confidence 0.95
(``start_label_accuracy_confident``) and that share of rows (``start_label_confident_share``) — then the method's
own rule, the pseudo-labels it used that were right (``pseudo_label_accuracy``: different rows per method), means
over the seeds ("—" for a method that reports none), as a Markdown table. A single seed prints the
value and no interval.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import warnings

import numpy as np

from edgesim.results.reading import DivergedWarning, load_runs


@functools.lru_cache(maxsize=None)
def _config(run: str) -> dict:
    """A run's ``config.toml``, read once (the layout and every algorithm's rate come from it)."""
    import tomllib

    with open(os.path.join(run, "config.toml"), "rb") as f:
        return tomllib.load(f)


def _layout(run: str) -> str:
    return _config(run)["data"].get("partition", "?")


def rate_used(config: dict, algorithm: str) -> float:
    """The learning rate ``algorithm`` trained with in a run of ``config`` (its ``config.toml``): the method's own
    ``[algorithms.NAME] lr`` where the scenario sets one, else ``[train] lr`` (``Context.optimizer``'s rule). Read
    from the run, not the sweep's grid: a grid over ``train.lr`` does not move a method that has its own rate."""
    own = config.get("algorithms", {}).get(algorithm, {})
    return float(own["lr"] if "lr" in own else config["train"]["lr"])


def _runs(paths):
    """The runs' round records (``load_runs``), each row with its run's layout (``data.partition``)."""
    with warnings.catch_warnings():  # the diverged runs are reported by the tables themselves
        warnings.simplefilter("ignore", DivergedWarning)
        df = load_runs(paths)
    df["layout"] = df["run"].map({r: _layout(r) for r in df["run"].unique()})
    if "diverged_round" not in df:
        df["diverged_round"] = np.nan
    return df


def _scores(df, last: int, column: str = "accuracy"):
    """One row per run × algorithm of ``_runs``' records: layout, seed, the mean of ``column`` over its last
    ``last`` rounds (``score``; NaN where the run does not record it) and whether it diverged (``diverged``: a run
    that diverged has no final accuracy, its score is NaN; ``load_runs`` has already left out its rows from the
    divergence on)."""
    if column not in df:
        df = df.assign(**{column: np.nan})
    groups = df.sort_values("round").groupby(["run", "layout", "seed", "algorithm"])
    out = groups[column].apply(lambda s: float(np.mean(s.to_numpy()[-last:]))).reset_index(name="score")
    out["diverged"] = groups["diverged_round"].apply(lambda s: bool(s.notna().any())).to_numpy()
    out.loc[out["diverged"], "score"] = np.nan
    return out


def choose(paths, column: str = "accuracy") -> None:
    scores = _scores(_runs(paths), 5, column)
    scores["lr"] = [rate_used(_config(r.run), r.algorithm) for r in scores.itertuples()]
    # a rate that diverged in any tuning seed scores nothing: its mean is NaN, never the best
    table = (scores.groupby(["algorithm", "lr"])["score"]
             .agg(mean=lambda x: x.mean(skipna=False), count="size").reset_index())
    for alg, rows in table.groupby("algorithm"):
        grid_line = ", ".join(f"{r.lr:g}: " + ("diverged" if np.isnan(r['mean']) else f"{100 * r['mean']:.1f}")
                              + f" ({r['count']} seeds)" for _, r in rows.iterrows())
        print(f"{alg}: {grid_line}", file=sys.stderr)
        if rows["mean"].isna().all():
            raise SystemExit(f"label_scarce_study.py choose: every rate of {alg} diverged in a tuning seed; "
                             "no rate to choose")
        best = rows.loc[rows["mean"].idxmax()]
        print(f"--set algorithms.{alg}.lr={best.lr:g}")


def _interval(x: np.ndarray) -> str:
    from scipy import stats

    if len(x) < 2:
        return f"{100 * x.mean():.1f}"
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return f"{100 * x.mean():.1f} ± {100 * half:.1f}"


def _mean_text(x) -> str:
    x = x.dropna()
    return f"{100 * x.mean():.0f}" if len(x) else "—"


def final(paths, baseline: str, last: int) -> None:
    runs = _runs(paths)  # read once, scored three ways
    scores = _scores(runs, last)
    # the last round's pseudo-label figures: three by one rule (the start model, all rows; issue 54.1), then the
    # method's own "used, right", which compares different rows across methods
    label_columns = ("start_label_accuracy", "start_label_accuracy_confident", "start_label_confident_share",
                     "pseudo_label_accuracy")
    labels = [_scores(runs, 1, c) for c in label_columns]
    print(f"| layout | algorithm | seeds | final accuracy (%), last {last} rounds | paired difference from "
          f"{baseline} (points) | start model labels right, all rows (%) | right, rows ≥ 0.95 (%) | "
          f"rows ≥ 0.95 (%) | own rule: used, right (%) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layout, rows in scores.groupby("layout"):
        base = rows[rows.algorithm == baseline].set_index("seed")["score"].dropna()
        for alg, r in rows.groupby("algorithm"):
            acc = r.set_index("seed")["score"].dropna()  # a diverged seed has no final accuracy
            both = acc.index.intersection(base.index)
            diff = "—" if alg == baseline or not len(both) else _interval((acc[both] - base[both]).to_numpy())
            seeds = f"{len(acc)}" + (f" (+{int(r['diverged'].sum())} diverged)" if r["diverged"].any() else "")
            last_round = [_mean_text(t[(t.layout == layout) & (t.algorithm == alg)]["score"]) for t in labels]
            print(f"| {layout} | {alg} | {seeds} | {_interval(acc.to_numpy())} | {diff} | {' | '.join(last_round)} |")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("choose")
    c.add_argument("paths", nargs="+")
    c.add_argument("--column", default="accuracy")
    f = sub.add_parser("final")
    f.add_argument("paths", nargs="+")
    f.add_argument("--baseline", default="fedavg_labeled")
    f.add_argument("--last", type=int, default=3)
    a = p.parse_args(argv)
    if a.cmd == "choose":
        choose(a.paths, a.column)
    else:
        final(a.paths, a.baseline, a.last)


if __name__ == "__main__":
    main()
