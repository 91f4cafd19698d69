"""Tables of the label-scarce studies (issue 35; docs/studies/ssl_limit.md), from the runs of label_scarce_study.sh.

    python benchmarks/label_scarce_study.py choose TUNE_SWEEP... [--column val_accuracy]  # --set lines: best rates
    python benchmarks/label_scarce_study.py final RUN_OR_SWEEP... [--baseline fedavg_labeled] [--last 3]
    python benchmarks/label_scarce_study.py rounds RUN_OR_SWEEP... [--algorithm feddure] [--columns a,b,...]

``choose``: every run of the tuning sweeps (made with ``--set data.validation_size=N``: the accuracy column is
the validation split's, never the test set; ``--column val_accuracy`` for runs with ``data.server_validation``)
scored by its mean accuracy over the last 5 rounds, averaged over
the tuning seeds; per algorithm, the learning rate with the highest score (the rate each run's ``config.toml`` says
the algorithm trained with: ``rate_used``), printed as ``--set
algorithms.NAME.lr=VALUE`` (one a line) and, to stderr, the whole grid. Where the tuning runs also vary other
options of the method (``tuned_options``: FedDure's ``creg_lr`` and ``freg_lr``, η_s and η_w), a grid point is the
rate with those values, and the best point's values follow as more ``--set`` lines.

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


def tuned_options(configs: list[dict], algorithm: str) -> list[str]:
    """The options of ``[algorithms.NAME]`` other than ``lr`` whose values differ between the runs of
    ``configs`` (their ``config.toml``): the rest of a method's tuning grid (FedDure's η_s and η_w, ``creg_lr``
    and ``freg_lr``, beside its ``lr``), sorted; an option a run leaves unset counts as its own value."""
    own = [c.get("algorithms", {}).get(algorithm, {}) for c in configs]
    keys = sorted({k for o in own for k in o if k != "lr"})
    return [k for k in keys if len({repr(o.get(k)) for o in own}) > 1]


def _point_text(lr: float, extra: tuple) -> str:
    return f"{lr:g}" + "".join(f", {k} {v:g}" if isinstance(v, float) else f", {k} {v}" for k, v in extra)


def choose(paths, column: str = "accuracy") -> None:
    scores = _scores(_runs(paths), 5, column)
    scores["lr"] = [rate_used(_config(r.run), r.algorithm) for r in scores.itertuples()]
    # a grid point is the rate and every other option of the method that the tuning runs vary (tuned_options)
    varied = {a: tuned_options([_config(r) for r in rows.run.unique()], a) for a, rows in scores.groupby("algorithm")}
    scores["extra"] = [tuple((k, _config(r.run)["algorithms"][r.algorithm].get(k)) for k in varied[r.algorithm])
                       for r in scores.itertuples()]
    # a point that diverged in any tuning seed scores nothing: its mean is NaN, never the best
    table = (scores.groupby(["algorithm", "lr", "extra"])["score"]
             .agg(mean=lambda x: x.mean(skipna=False), count="size").reset_index())
    for alg, rows in table.groupby("algorithm"):
        grid_line = ", ".join(_point_text(r.lr, r.extra) + ": "
                              + ("diverged" if np.isnan(r['mean']) else f"{100 * r['mean']:.1f}")
                              + f" ({r['count']} seeds)" for _, r in rows.iterrows())
        print(f"{alg}: {grid_line}", file=sys.stderr)
        if rows["mean"].isna().all():
            raise SystemExit(f"label_scarce_study.py choose: every rate of {alg} diverged in a tuning seed; "
                             "no rate to choose")
        best = rows.loc[rows["mean"].idxmax()]
        print(f"--set algorithms.{alg}.lr={best.lr:g}")
        for k, v in best.extra:  # an option the chosen point left unset stays unset (its default)
            if v is not None:
                print(f"--set algorithms.{alg}.{k}=" + (f"{v:g}" if isinstance(v, float) else f"{v}"))


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


CUT_AUC = "cut95_auc"


def cut_auc(accuracy, share, accuracy_confident):
    """The AUC against correctness of one confidence cut at 0.95 of the start model's labels (a weight of 1 above
    the cut, 0 below), from the one-rule columns: with A = ``accuracy`` (share right, all rows), s = ``share``
    (share at or above 0.95) and a = ``accuracy_confident``, ``AUC = ½ + ½(TPR − FPR)``, ``TPR = s·a/A`` (share
    of the right labels above the cut), ``FPR = s·(1 − a)/(1 − A)`` (of the wrong ones). What the confidence
    F-reg sees already separates, cut once; a ranking by the confidence itself separates at least as well.
    0.5 where no row reaches the cut."""
    a = accuracy_confident.fillna(0.0)
    tpr = share * a / accuracy
    fpr = share * (1.0 - a) / (1.0 - accuracy)
    return 0.5 + 0.5 * (tpr - fpr)


def by_round(paths, algorithm: str, columns: list[str]) -> None:
    """Per layout and round, the mean over the seeds of each of ``columns`` for ``algorithm`` (FedDure's
    regulators: ``freg_auc``, the AUC of F-reg's weight m against pseudo-label correctness; ``feedback_abs``, the
    mean |d| of C-reg's feedback; ``weight_mean``, the mean m; ``cut95_auc``, :func:`cut_auc` of the start
    model's one-rule columns), as a Markdown table; "—" where a run records none."""
    runs = _runs(paths)
    rows = runs[runs.algorithm == algorithm].copy()
    if CUT_AUC in columns:
        for c in ("start_label_accuracy", "start_label_confident_share", "start_label_accuracy_confident"):
            if c not in rows:  # empty in every round (no row reached 0.95)
                rows[c] = np.nan
        rows[CUT_AUC] = cut_auc(rows["start_label_accuracy"], rows["start_label_confident_share"],
                                rows["start_label_accuracy_confident"])
    print("| layout | round | seeds | " + " | ".join(columns) + " |")
    print("|---|---|---|" + "---|" * len(columns))
    for (layout, rnd), r in rows.groupby(["layout", "round"]):
        cells = []
        for c in columns:
            x = r[c].dropna() if c in r else r["round"].iloc[:0]
            cells.append(f"{x.mean():.3f}" if len(x) else "—")
        print(f"| {layout} | {rnd} | {r['seed'].nunique()} | " + " | ".join(cells) + " |")


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
    r = sub.add_parser("rounds")
    r.add_argument("paths", nargs="+")
    r.add_argument("--algorithm", default="feddure")
    r.add_argument("--columns", default="accuracy,freg_auc,feedback_abs,feedback,weight_mean,start_label_accuracy")
    a = p.parse_args(argv)
    if a.cmd == "choose":
        choose(a.paths, a.column)
    elif a.cmd == "rounds":
        by_round(a.paths, a.algorithm, a.columns.split(","))
    else:
        final(a.paths, a.baseline, a.last)


if __name__ == "__main__":
    main()
