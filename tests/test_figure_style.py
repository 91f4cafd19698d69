"""Paper-ready figures (plots/style.py, plots/figure_data.py): TrueType fonts in PDF, SVG text as text, a
colour-blind-safe palette with a line style and marker per algorithm stable across a study, titles that do not
overlap, --style/--width, and every figure's data as a CSV beside it."""

from __future__ import annotations

import csv
import itertools
import re
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pytest
from test_figures import figures, make_sweep  # noqa: F401 - fixtures and hand-made sweeps
from test_plots import fake_run

from edgesim.config import ConfigError
from edgesim.plots.curves import algorithm_colors, draw_accuracy, plot_runs
from edgesim.plots.style import OKABE_ITO, algorithm_styles, figure_size, figure_style, fs, use_style
from edgesim.plots.sweep import Sweep, plot_final_accuracy_heatmap


def pdf_fonts(data: bytes) -> set[str]:
    """The /Subtype of every font dictionary of a PDF (what `pdffonts` lists in its "type" column)."""
    return set(re.findall(rb"/Type\s*/Font\s*/Subtype\s*/(\w+)", data)) | set(
        re.findall(rb"/Subtype\s*/(\w+)\s*/Type\s*/Font", data))


def test_an_edgesim_pdf_embeds_truetype_fonts_and_no_type3_and_svg_keeps_text(tmp_path):
    run = fake_run(tmp_path / "run", 1.0, 0)
    written = plot_runs([run], tmp_path / "figs", title="seed 0", formats=("pdf", "svg"))
    pdf = next(p for p in written if p.name == "accuracy_vs_time.pdf").read_bytes()
    fonts = pdf_fonts(pdf)
    assert fonts and b"Type3" not in fonts and b"/Type3" not in pdf, fonts
    assert fonts <= {b"TrueType", b"Type0", b"CIDFontType2"}, fonts
    svg = (tmp_path / "figs" / "accuracy_vs_time.svg").read_text()
    assert "<text" in svg and "Simulated time (s)" in svg  # text as text, searchable and editable


def test_each_figures_data_is_written_beside_it_as_csv_in_the_axes_units(tmp_path):
    run = fake_run(tmp_path / "run", 2.0, 0)
    plot_runs([run], tmp_path / "figs")
    with open(tmp_path / "figs" / "accuracy_vs_time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    fedavg = [r for r in rows if r["series"] == "FedAvg"]
    rounds = list(csv.DictReader(open(run / "rounds.csv", newline="")))
    expected = [(float(r["time_s"]), 100 * float(r["accuracy"])) for r in rounds if r["algorithm"] == "fedavg"]
    got = [(float(r["x"]), float(r["y"])) for r in fedavg]
    np.testing.assert_allclose(got, expected)
    assert {r["x_label"] for r in fedavg} == {"Simulated time (s)"} and {r["y_label"] for r in fedavg} == {"Test accuracy (%)"}


def test_the_heat_maps_data_is_one_cell_per_row(tmp_path, figures):
    sweep = Sweep(make_sweep(tmp_path))
    plot_final_accuracy_heatmap(sweep, tmp_path / "h.png")
    rows = list(csv.DictReader(open(tmp_path / "h.csv", newline="")))
    cells = [r for r in rows if r["series"] == "cell" and r["panel"] == "FedAvg"]
    image = figures[0].axes[0].images[0].get_array()
    assert len(cells) == image.size == 4
    assert float(cells[0]["value"]) == pytest.approx(float(image[0, 0]))


def test_palette_line_style_and_marker_differ_per_algorithm_and_ignore_the_order_given():
    algs = [f"alg{i:02d}" for i in range(40)]
    styles = algorithm_styles(algs)
    triples = {(s["color"], s["linestyle"], s["marker"]) for s in styles.values()}
    assert len(triples) == 40  # distinct without colour too: (line style, marker) pairs for 20
    assert len({(s["linestyle"], s["marker"]) for s in styles.values()}) == 20
    assert algorithm_styles(reversed(algs)) == styles
    assert set(algorithm_colors(["fedavg", "fedprox"]).values()) <= set(OKABE_ITO)
    assert algorithm_styles(["fedprox", "fedavg"])["fedavg"]["color"] == OKABE_ITO[0]  # the papers' order first


def test_an_algorithm_keeps_its_study_style_in_a_figure_that_shows_it_alone():
    study = algorithm_colors(["fedavg", "fedprox", "local"])
    fig, ax = plt.subplots()
    draw_accuracy(ax, {"fedprox": [(np.arange(1.0, 6.0), np.linspace(0.1, 0.5, 5))]}, study)
    line = ax.get_lines()[0]
    expected = algorithm_styles(study)["fedprox"]
    assert (line.get_color(), line.get_linestyle(), line.get_marker()) == (expected["color"], "--", expected["marker"])
    plt.close(fig)


def test_long_heat_map_titles_wrap_instead_of_overlapping(tmp_path, figures):
    sweep = Sweep(make_sweep(tmp_path))
    sweep.names.update({a: f"{a.upper()}+FedFreq with consistency regularisation" for a in sweep.algorithms})
    plot_final_accuracy_heatmap(sweep, tmp_path / "h.png")
    fig = figures[0]
    fig.canvas.draw()
    boxes = [ax.title.get_window_extent() for ax in fig.axes if ax.get_title()]
    assert len(boxes) == len(sweep.algorithms)
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)


def test_styles_scale_the_size_and_fonts_and_a_bad_style_or_width_is_one_line():
    assert figure_size(3.4, 2.5) == (3.4, 2.5) and fs(8) == 8
    with use_style("slides"):
        assert figure_size(3.4, 2.5) == pytest.approx((5.5, 2.5 * 5.5 / 3.4)) and fs(8) == pytest.approx(14.4)
    with use_style("paper", 7.0):
        assert figure_size(3.4, 2.5)[0] == pytest.approx(7.0) and fs(8) == 8
    assert figure_size(3.4, 2.5) == (3.4, 2.5)  # nothing leaks out of the block
    # below the command line the option is marked (⟨style=⟩), each front end words it (tests/test_error_words.py)
    with pytest.raises(ConfigError, match=r"^⟨style=⟩'poster': expected one of paper, slides$"):
        figure_style("poster")
    with pytest.raises(ConfigError, match=r"^⟨width=⟩0.2: expected a figure width in inches between 1 and 20"):
        figure_style("paper", 0.2)


def test_the_plot_command_draws_slides_at_the_width_asked(tmp_path):
    run = fake_run(tmp_path / "run", 1.0, 0)
    cli = [sys.executable, "-m", "edgesim.scenarios.cli", "plot", str(run), "--out", str(tmp_path / "f")]
    done = subprocess.run([*cli, "--style", "slides", "--width", "5", "--format", "pdf"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    media = re.search(rb"/MediaBox\s*\[\s*0\s+0\s+([\d.]+)\s+([\d.]+)", (tmp_path / "f" / "accuracy_vs_time.pdf").read_bytes())
    assert float(media.group(1)) == pytest.approx(5 * 72)
    assert (tmp_path / "f" / "accuracy_vs_time.csv").is_file()
    bad = subprocess.run([*cli, "--style", "poster"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == ["error: --style 'poster': expected one of paper, slides"]
