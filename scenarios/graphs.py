"""Who helps whom: an algorithm's per-round graph written to the run folder as node-link JSON (networkx).

A backend that relates devices (UM-pFSSL's helper lists, DoFed-SPP's chosen
uploads and downloaded models) has a ``graph()`` method returning plain data
after each round::

    {"graph": {...attributes}, "nodes": {device: {...attributes}}, "edges": [(u, v, {...attributes})]}

The run folder gets ``graphs/<algorithm>/round_NNNN.json``, each the
``networkx.node_link_data`` of a directed graph (read one back with
``networkx.node_link_graph(json.load(f), edges="links")``), stamped with the
round and the simulated time at which it ended.
"""

from __future__ import annotations

from typing import Mapping

import networkx as nx

from edgesim.results.files import GRAPH_DIR


def to_networkx(graph: Mapping) -> nx.DiGraph:
    """The directed graph of a backend's ``graph()`` value."""
    g = nx.DiGraph(**dict(graph.get("graph", {})))
    for node, attrs in graph["nodes"].items():
        g.add_node(int(node), **dict(attrs))
    for u, v, attrs in graph["edges"]:
        if int(u) not in g or int(v) not in g:
            raise ValueError(f"edge ({u}, {v}) names a device that is not a node")
        g.add_edge(int(u), int(v), **dict(attrs))
    return g


def node_link(graph: Mapping, round_index: int, time_s: float) -> dict:
    """Node-link JSON data of one round's graph, with ``round`` and ``time_s`` among the graph attributes."""
    g = to_networkx(graph)
    g.graph.update(round=int(round_index), time_s=float(time_s))
    return nx.node_link_data(g, edges="links")


def graph_path(algorithm: str, round_index: int) -> str:
    return f"{GRAPH_DIR}/{algorithm}/round_{round_index:04d}.json"
