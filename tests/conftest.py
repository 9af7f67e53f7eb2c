import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture()
def torchrun():
    """``torchrun(*args, cwd=None)`` runs ``python -m torch.distributed.run --standalone --nproc_per_node=2 *args`` in
    an environment without a launcher's variables (one thread per process), and fails the test with the tail of its
    output unless it exits 0."""

    def run(*args, cwd=None) -> subprocess.CompletedProcess:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(key, None)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *map(str, args)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=cwd)
        assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc

    return run
