"""Fixtures shared by test modules.

`cluster`: the one-node SLURM cluster of scripts/local-slurm.sh, shared by the
SLURM test modules (tests/test_slurm.py, tests/test_slurm_faults.py), which
are skipped unless CAUSALPOS_SLURM=1. Session-scoped so that `pytest -m slurm`
starts it once; stopped at the end if the tests started it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

LOCAL_SLURM = Path(__file__).resolve().parents[1] / "scripts" / "local-slurm.sh"


def local_slurm(command: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(LOCAL_SLURM), command], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def cluster():
    """A running one-node cluster (partition debug, with accounting); stopped afterwards if this started it."""
    was_running = local_slurm("status").returncode == 0
    start = time.perf_counter()
    proc = local_slurm("start")
    if proc.returncode != 0:
        pytest.fail(f"scripts/local-slurm.sh start failed:\n{proc.stdout}\n{proc.stderr}")
    print(f"\nlocal SLURM cluster up in {time.perf_counter() - start:.1f} s")
    yield
    if not was_running:
        proc = local_slurm("stop")
        assert proc.returncode == 0, proc.stderr
