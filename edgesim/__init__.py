"""edgesim's simulator: the wireless system model and the SimPy clock (never imports torch).

- formulas: :mod:`edgesim.units`, :mod:`edgesim.radio`, :mod:`edgesim.compute`, :mod:`edgesim.budget`
- channel: :mod:`edgesim.channel`; selection (Algorithm 1): :mod:`edgesim.selection`
- the engine: :mod:`edgesim.engine`, its protocol with a learning backend: :mod:`edgesim.backend`,
  a torch-free backend: :mod:`edgesim.curve`; ``edgesim plan``: :mod:`edgesim.plan`
"""
