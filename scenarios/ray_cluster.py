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


def join_cluster(ray, address: str) -> None:
    """Join the Ray cluster at ``address`` (``ray start --head`` prints it), with the local auth token
    (:func:`ray_auth_env`). A head that cannot be reached is one line naming the address: Ray raises a
    ``ConnectionError``, an ``OSError``, which the run's and the sweep's disk-full handling would otherwise word
    as a file they cannot write."""
    import logging

    ray_auth_env()
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except ConnectionError as e:
        why = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise ConfigError(f"⟨ray-address=⟩{address}: cannot reach a Ray cluster there ({why}); expected the address "
                          f"of a running Ray head (the one `ray start` printed) that this machine can reach") from None


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "⟨executor=⟩ray needs Ray: pip install -c constraints.txt -e '.[ray]' (or: pip install ray)"
        ) from None
    return ray
