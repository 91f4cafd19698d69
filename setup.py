"""The one namespace: the repository's folders installed as ``edgesim`` and its subpackages.

``edgesim/`` is the simulator and the public face; ``learning/``, ``scenarios/`` and ``plots/``
install as ``edgesim.learning``, ``edgesim.scenarios`` and ``edgesim.plots`` (setuptools'
``package_dir`` mapping), so an install claims the top-level name ``edgesim`` only
(docs/extend/architecture.md). Everything else is in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

FLOORS = ("learning", "scenarios", "plots")

setup(
    package_dir={"edgesim": "edgesim", **{f"edgesim.{floor}": floor for floor in FLOORS}},
    packages=find_packages(include=["edgesim", "edgesim.*"])
    + [f"edgesim.{name}"
       for name in find_packages(include=[f"{floor}{tail}" for floor in FLOORS for tail in ("", ".*")])],
)
