"""Fixtures and helpers shared by test modules (imported as `from conftest import ...`).

Workflow copies: `copy_workflow`, `snakemake`, `edit_config` (tests/test_workflow.py and the SLURM
tests); SLURM: `job_env`, `run_with_profile`, `wait_for_accounting`, `copy_with_profiles`, `JOB_ID`.

`cluster`: the one-node SLURM cluster of scripts/local-slurm.sh, shared by the
SLURM test modules (tests/test_slurm.py, tests/test_slurm_faults.py), which
are skipped unless CAUSALPOS_SLURM=1. Session-scoped so that `pytest -m slurm`
starts it once; stopped at the end if the tests started it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
LOCAL_SLURM = ROOT / "scripts" / "local-slurm.sh"
JOB_ID = re.compile(r"SLURM job id (\d+) on (\S+)")


def copy_workflow(dest: Path) -> Path:
    for name in ("Snakefile", "rules", "workflow_scripts", "envs", "report"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / name)
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(ROOT / ".test" / "config.yaml", dest / "config.yaml")
    return dest


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run snakemake in the copy; past `timeout` its whole process group (its jobs too) is stopped, not left."""
    env = {**os.environ, "PYTHONPATH": str(workdir / "src")}
    popen = subprocess.Popen([SNAKEMAKE, "--cores", "2", *args], cwd=workdir, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.communicate()
        raise AssertionError(f"snakemake {' '.join(args)} still running after {timeout} s; stopped") from None
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, out, err)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def edit_config(workdir: Path, change) -> None:
    path = workdir / "config.yaml"
    config = yaml.safe_load(path.read_text())
    change(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def job_env(workdir: Path) -> dict:
    """What the submitting process hands to its SLURM jobs (sbatch --export=ALL): the venv first on PATH."""
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
            "PYTHONPATH": str(workdir / "src")}


def run_with_profile(workdir: Path, profile: Path, *targets: str, timeout: int) -> tuple[int, str, float]:
    """Run snakemake under a profile; on timeout interrupt it (SIGINT, which also cancels its SLURM jobs) and fail."""
    start = time.perf_counter()
    proc = subprocess.Popen([SNAKEMAKE, "--profile", str(profile), *targets], cwd=workdir, env=job_env(workdir),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"snakemake --profile {profile.name} {' '.join(targets)} still running after {timeout} s "
                    f"(a lost SLURM job?):\n{out[-5000:]}")
    return proc.returncode, out, time.perf_counter() - start


def sacct_states(job_ids) -> dict[str, str]:
    """SLURM job id -> state of the job allocation (-X), from accounting."""
    proc = subprocess.run(["sacct", "-j", ",".join(map(str, job_ids)), "--format=JobID,State,ExitCode",
                           "--noheader", "-X", "-P"], capture_output=True, text=True, check=True)
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return {job: state.split()[0] for job, state, _ in rows}


def wait_for_accounting(job_ids, timeout: float = 30) -> dict[str, str]:
    """sacct's states once every job has a final one (slurmctld sends the end record to slurmdbd asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        states = sacct_states(job_ids)
        final = all(states.get(str(job), "PENDING") not in ("PENDING", "RUNNING", "COMPLETING") for job in job_ids)
        if final or time.monotonic() > deadline:
            return states
        time.sleep(1)


def copy_with_profiles(dest: Path) -> Path:
    workdir = copy_workflow(dest)  # Snakefile, rules, scripts, src and .test/config.yaml as config.yaml
    shutil.copytree(ROOT / "profiles", workdir / "profiles")  # profiles/default is the workflow profile there too
    return workdir


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
