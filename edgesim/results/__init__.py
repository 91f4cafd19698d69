"""The run folder's one owner: writing, reading, fingerprints, frames, metrics and statistics.

- :mod:`~edgesim.results.files`: the names of a run folder's files (the only module that spells them);
- :mod:`~edgesim.results.writing`: the folder, its lock and manifest, atomic writes;
- :mod:`~edgesim.results.reading`: one :class:`~edgesim.results.reading.Run`, one folder expander,
  one ``rounds.csv`` reader, the tidy frames;
- :mod:`~edgesim.results.fingerprint`: one flatten of a resolved scenario, the fingerprint that groups seeds;
- :mod:`~edgesim.results.metrics`: time to accuracy, the final-accuracy rule, per-run metrics;
- :mod:`~edgesim.results.stats`: scenario groups, intervals over seeds, paired differences.

Torch-free and matplotlib-free: the figures (``edgesim.plots``), the report, tracking and the Python API
read run folders through it.
"""
