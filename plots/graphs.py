"""Draw a run's per-round device graph (``graphs/<algorithm>/round_NNNN.json``, node-link JSON): who helps whom.

Nodes are devices, coloured by their dominant class when the graph carries
``dominant_class`` (UM-pFSSL's helper graph does); edges point from a device
to a model it uses, their width growing with the edge's ``weight`` (Corr, or
DoFed-SPP's similarity ratio). :func:`same_class_share` is the share of edges
joining two devices of the same dominant class — set against the share a
random choice of helpers would give, it says whether the helper communities
follow the Dirichlet split.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import networkx as nx

from edgesim.plots.save import save_figure
from edgesim.plots.style import figure_size, fs


def read_graph(path: Path) -> nx.DiGraph:
    """One round's graph from its node-link JSON file."""
    return nx.node_link_graph(json.loads(Path(path).read_text()), edges="links")


def same_class_share(g: nx.DiGraph) -> tuple[float, float]:
    """(share of edges between devices of the same dominant class, the share uniform random edges would have)."""
    cls = nx.get_node_attributes(g, "dominant_class")
    if not cls or g.number_of_edges() == 0:
        raise ValueError("the graph has no dominant_class attributes or no edges")
    same = sum(cls[u] == cls[v] for u, v in g.edges) / g.number_of_edges()
    n = g.number_of_nodes()
    by_class: dict[int, int] = {}
    for c in cls.values():
        by_class[c] = by_class.get(c, 0) + 1
    random = sum(m * (m - 1) for m in by_class.values()) / (n * (n - 1)) if n > 1 else float("nan")
    return same, random


def draw_graph(path: Path, out_png: Path, title: str = "") -> Path:
    """Draw one round's graph (spring layout, seeded) to ``out_png``."""
    g = read_graph(path)
    fig, ax = plt.subplots(figsize=figure_size(3.4, 3.2), dpi=200)
    pos = nx.spring_layout(g, seed=0, weight="weight")
    cls = nx.get_node_attributes(g, "dominant_class")
    colors = [plt.cm.tab10(cls[n] % 10) if n in cls else "0.6" for n in g.nodes]
    widths = [0.3 + 2.0 * float(w) if w is not None else 0.3 for *_, w in g.edges(data="weight")]
    nx.draw_networkx_edges(g, pos, ax=ax, width=widths, alpha=0.45, arrowsize=5, edge_color="0.3")
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=colors, node_size=70, linewidths=0.4, edgecolors="k")
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=4.5)
    if cls:
        for c in sorted(set(cls.values())):
            ax.scatter([], [], color=plt.cm.tab10(c % 10), s=12, label=f"class {c}")
        ax.legend(fontsize=fs(5), frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="dominant", title_fontsize=fs(5))
    ax.set_title(title or f"round {g.graph.get('round', '?')}", fontsize=fs(7))
    ax.axis("off")
    fig.tight_layout()
    out_png = Path(out_png)
    save_figure(fig, out_png)
    plt.close(fig)
    return out_png
