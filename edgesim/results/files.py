"""The names of the files in a run folder and a sweep folder: the one place that spells them.

A run folder (``edgesim run --out``, docs/use/run_folders.md) holds :data:`CONFIG`
(the resolved scenario), :data:`ROUNDS` (one row per algorithm and round),
:data:`DEVICES` (one row per algorithm, round and device), :data:`EVENTS`
(the engine's event log, when recorded), :data:`CELLS` (several cells: the base
stations, their bands, devices and mean SINR, and each device's cell and position;
drawn as :data:`CELLS_FIGURE`), :data:`SUMMARY` (per algorithm the
final accuracy, times to accuracy, totals), :data:`PROVENANCE` (command, host,
versions), :data:`MANIFEST` (what edgesim wrote there), the folders
:data:`CHECKPOINT_DIR` and :data:`GRAPH_DIR`, and while it runs the marker
:data:`MARKER`. A sweep folder holds :data:`SWEEP_SPEC` and :data:`SWEEP_TABLE`
beside its runs; a report folder :data:`LEADERBOARD` and :data:`PAIRED`.

Every other module names these files through this one (a test reads the
source of every module for the literals).
"""

from __future__ import annotations

CONFIG = "config.toml"
ROUNDS = "rounds.csv"
DEVICES = "devices.csv"
EVENTS = "events.csv"
SUMMARY = "summary.json"
PROVENANCE = "run.json"
MANIFEST = "manifest.json"
MARKER = "INCOMPLETE"
CHECKPOINT_DIR = "checkpoints"
GRAPH_DIR = "graphs"  # per-round node-link graphs (edgesim.scenarios.graphs)
CELLS = "cells.csv"  # several cells: the base stations and the devices at placement (the data of cells.png)
CELLS_FIGURE = "cells"  # its figure's stem: cells.png (and the other formats asked)

SWEEP_SPEC = "sweep.json"
SWEEP_TABLE = "sweep.csv"
TABLES = {"rounds": ROUNDS, "devices": DEVICES, "events": EVENTS}  # load_runs(table=...) → file
