"""A local Ray cluster for the tests that join one by address (`edgesim sweep` and `edgesim run --executor ray`):
`ray start --head --block` on a free loopback port, waited for, and stopped with the processes it started."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def ray_head(num_cpus: int = 2) -> Iterator[str]:
    """``127.0.0.1:PORT`` of a running head node; on leaving, the node is stopped (killed after 60 s), its folder
    removed and ``RAY_AUTH_MODE`` as it was (joining by address may set it)."""
    port = free_port()
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    script = Path(sys.executable).with_name("ray")  # the venv's, else Ray's own module (a venv that shares Ray's)
    command = [str(script)] if script.exists() else [sys.executable, "-m", "ray.scripts.scripts"]
    head = subprocess.Popen(
        [*command, "start", "--head", "--block", f"--port={port}", f"--num-cpus={num_cpus}",
         "--include-dashboard=false", f"--temp-dir={ray_dir}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
    )
    auth = os.environ.get("RAY_AUTH_MODE")
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert head.poll() is None, "ray start --head exited"
            assert time.monotonic() < deadline, "ray start --head did not listen within 120 s"
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(ray_dir, ignore_errors=True)
        if auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = auth
