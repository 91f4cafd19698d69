"""Ray for the application: its import (one line naming the extra when it is missing) and how a cluster is
joined by address. Used by the sweep's Ray executor (:mod:`edgesim.scenarios.sweep`) and by a run's clients on
Ray actors (:func:`edgesim.scenarios.algorithm_run.make_backends`, :mod:`edgesim.learning.client_workers`)."""

import os
from pathlib import Path

from edgesim.config import ConfigError


def ray_auth_env() -> None:
    """Joining a cluster by address: use the local auth token if there is one (Ray only does so for ``auto``)."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "⟨executor=⟩ray needs Ray: pip install -c constraints.txt -e '.[ray]' (or: pip install ray)"
        ) from None
    return ray
