"""Requests a SLURM cluster cannot satisfy, and the job status command of the profiles. (A failing job, a
time limit and a cancelled training job are in tests/test_slurm.py, beside the run they wait with.)

Opt-in like tests/test_slurm.py (root, scripts/local-slurm.sh, the shared
`cluster` fixture of tests/conftest.py):

    CAUSALPOS_SLURM=1 pytest -m slurm -n 0 tests/test_slurm_faults.py

An unknown partition and more memory than the node has fail at submission
within seconds, with sbatch's own message in Snakemake's output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slurm

if os.environ.get("CAUSALPOS_SLURM") != "1":
    pytest.skip("SLURM tests start a local SLURM cluster as root (scripts/local-slurm.sh); "
                "set CAUSALPOS_SLURM=1 to run them", allow_module_level=True)

from conftest import ROOT, SNAKEMAKE, copy_with_profiles, job_env

TEST_PROFILE = ROOT / "profiles" / "slurm-test"
SUBMIT_LIMIT = 120  # seconds: a request SLURM refuses must fail this fast, not hang


def test_profiles_take_job_status_from_squeue():
    """sacct says 'CANCELLED by <uid>' for a scancel'd job; plugin 2.8.0 waits forever on that state."""
    for profile in ("slurm", "slurm-test"):
        config = yaml.safe_load((ROOT / "profiles" / profile / "config.yaml").read_text())
        assert config["slurm-status-command"] == "squeue", profile


def node_memory_mb() -> int:
    """The largest RealMemory (MiB) of the cluster's nodes."""
    out = subprocess.run(["scontrol", "-o", "show", "node"], capture_output=True, text=True, check=True).stdout
    return max(int(m) for m in re.findall(r"RealMemory=(\d+)", out))


def nosuch_partition_profile(workdir: Path) -> list[str]:
    """A copy of the test profile whose default partition does not exist: a profile mistake."""
    profile = workdir / "profiles" / "slurm-nosuch"
    shutil.copytree(TEST_PROFILE, profile)
    config = yaml.safe_load((profile / "config.yaml").read_text())
    config["default-resources"]["slurm_partition"] = "nosuch"
    (profile / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return ["all_figures", "--profile", str(profile)]


def too_much_memory(workdir: Path) -> list[str]:
    """One simulation asking for ten times the node's memory (--set-resources on the command line)."""
    # the target first: --set-resources takes every word after it
    return ["results/simulation/l2_alpha0.0.parquet", "--profile", str(TEST_PROFILE),
            "--set-resources", f"simulate:mem_mb={10 * node_memory_mb()}"]


@pytest.mark.parametrize("request_args, slurm_messages", [
    (nosuch_partition_profile, ["sbatch: error: invalid partition specified: nosuch",
                                "Batch job submission failed: Invalid partition name specified"]),
    (too_much_memory, ["sbatch: error: Memory specification can not be satisfied",
                       "Batch job submission failed: Requested node configuration is not available"]),
], ids=["unknown-partition", "memory-beyond-any-node"])
def test_unsatisfiable_request_fails_at_submission_with_slurms_message(cluster, tmp_path, request_args,
                                                                        slurm_messages):
    workdir = copy_with_profiles(tmp_path)
    args = request_args(workdir)
    start = time.perf_counter()
    proc = subprocess.run([SNAKEMAKE, *args], cwd=workdir, env=job_env(workdir), capture_output=True, text=True,
                          timeout=SUBMIT_LIMIT)  # a hang fails here
    seconds = time.perf_counter() - start
    shown = proc.stdout + proc.stderr  # what the user sees
    assert proc.returncode != 0, shown[-5000:]
    assert seconds < SUBMIT_LIMIT
    for message in slurm_messages:
        assert message in shown, shown[-5000:]
    assert "SLURM sbatch failed" in shown
    assert "has been submitted with SLURM jobid" not in shown  # refused at submission: no job ever queued
    assert not (workdir / "results").exists() or not any((workdir / "results").rglob("*.parquet"))
    print(f"\n{args[0]} {' '.join(args[3:])}: refused in {seconds:.1f} s")
