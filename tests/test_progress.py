"""The live progress line under ``[run] eval_every`` > 1: a round that is not evaluated shows the last evaluated
accuracy marked with its round (``acc -`` before the first), never ``nan`` (docs/use/metrics.md)."""

from __future__ import annotations

import io
import math
import types

from edgesim.scenarios.progress import NotebookProgress, RunProgress


def _rounds(accuracies):
    """Round records as the progress reads them: round i ends at 10·(i + 1) s; an unevaluated round has NaN (or no)
    accuracy."""
    return [types.SimpleNamespace(round_index=i, end_time_s=10.0 * (i + 1),
                                  metrics={} if a is None else {"accuracy": a}) for i, a in enumerate(accuracies)]


ACCURACIES = [math.nan, 0.5, None, math.nan, 0.625]  # eval_every = 2 (rounds 2 and 4) and the last, round 5


def test_a_run_s_plain_lines_show_the_last_evaluated_accuracy_with_its_round():
    log = io.StringIO()
    with RunProgress(["fedavg"], len(ACCURACIES), stream=log) as p:
        for rec in _rounds(ACCURACIES):
            p.update("fedavg", rec)
    cells = [line.split("  ")[3] for line in log.getvalue().splitlines()]
    assert cells == ["acc -", "acc 0.500", "acc 0.500 (round 2)", "acc 0.500 (round 2)", "acc 0.625"]
    assert "nan" not in log.getvalue()


def test_the_notebook_bar_does_the_same_per_algorithm():
    out = io.StringIO()
    bar = NotebookProgress(["a", "b"], 2, stream=out)
    for name, accs in (("a", [0.25, math.nan]), ("b", [math.nan, 0.75])):
        for rec in _rounds(accs):
            bar.update(name, rec)
    bar.close()
    lines = [part.rstrip() for part in out.getvalue().replace("\n", "\r").split("\r") if part.strip()]
    shown = [line.rsplit("  ", 1)[0].split("  ")[-1] for line in lines]  # the cell before the host time
    assert shown == ["acc 0.250", "acc 0.250 (round 1)", "acc -", "acc 0.750"], shown
    assert "nan" not in out.getvalue()
