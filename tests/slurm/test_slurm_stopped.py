"""After the SLURM tests: a stopped local cluster leaves nothing that makes a Slurm command, or the start of
Snakemake, wait for its controller.

The client tools (scontrol, sacct, squeue) stay installed. Snakemake's SLURM executor plugin runs
`scontrol show config` whenever Snakemake starts, and with a slurm.conf naming a stopped controller that
call waited 9 s (MessageTimeout - 1), in every `snakemake` of every later test on the machine. `stop`
takes the configuration out of /etc/slurm, so the call fails at once. Opt-in like tests/slurm/test_slurm.py;
tests/conftest.py runs this file after the others.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

pytestmark = pytest.mark.slurm

if os.environ.get("CAUSALPOS_SLURM") != "1":
    pytest.skip(
        "SLURM tests start a local SLURM cluster as root (scripts/local-slurm.sh); set CAUSALPOS_SLURM=1 to run them",
        allow_module_level=True,
    )

from helpers import SNAKEMAKE, local_slurm  # noqa: E402


@pytest.fixture
def stopped(cluster):
    """The session's cluster, stopped (and started again afterwards if it was running before the session)."""
    proc = local_slurm("stop")
    assert proc.returncode == 0, proc.stderr
    yield
    if cluster:
        assert local_slurm("start").returncode == 0


def seconds(command: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return time.perf_counter() - start, proc


def test_a_stopped_cluster_fails_at_once_and_snakemake_starts_without_waiting(stopped):
    assert shutil.which("scontrol") and shutil.which("sinfo")  # the tools are still there
    took, proc = seconds(["scontrol", "show", "config"])
    assert proc.returncode != 0 and took < 2, (took, proc.stderr)
    took = min(seconds([SNAKEMAKE, "--version"])[0] for _ in range(3))  # the fastest of three: a busy host
    assert took < 2, f"snakemake --version took {took:.1f} s with the local cluster stopped"
