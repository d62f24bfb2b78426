"""A changed setting whose job is killed: the next run rebuilds everything that depends on it, never "Nothing to be done".

Snakemake removes a killed job's output; the figures and the ledger made from the old output are still there,
with unchanged params of their own. Each rule that reads results therefore carries the digest of what its
inputs were made from (workflow/provenance.py), so the rerun sees them out of date and pulls the missing
inputs back in. Both branches of the DAG, with real kills (SIGKILL of the job's process, as the OOM killer,
scancel or a node failure would).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import SNAKEMAKE, copy_workflow, edit_config, snakemake

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("stale"))
    snakemake(workdir, "all_figures")
    return workdir


def job_processes(workdir: Path, script: str) -> list[int]:
    """PIDs of the Snakemake job processes of this copy running workflow_scripts/<script> (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except (OSError, ValueError):
            continue
        if cwd == str(workdir) and any(a.endswith(f".{script}".encode()) and b"/.snakemake/scripts/" in a
                                       for a in argv):
            pids.append(int(entry.name))
    return pids


def run_and_kill(workdir: Path, script: str, started, count: int, timeout: float = 300) -> subprocess.CompletedProcess:
    """Start `snakemake all_figures`, SIGKILL the `count` jobs running `script` once `started()` holds, wait."""
    env = {**os.environ, "PYTHONPATH": str(workdir / "src")}
    proc = subprocess.Popen([SNAKEMAKE, "--cores", "2", "all_figures"], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        killed = set()
        while len(killed) < count:
            assert proc.poll() is None, f"snakemake ended before the jobs could be killed:\n{proc.stdout.read()}"
            assert time.monotonic() < deadline, "the jobs never started"
            if started():
                for pid in job_processes(workdir, script):
                    if pid not in killed:
                        os.kill(pid, signal.SIGKILL)
                        killed.add(pid)
            time.sleep(0.2)
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:  # a failed assertion: stop snakemake and its jobs, leave nothing running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def log_has(path: Path, text: str) -> bool:
    return path.is_file() and text in path.read_text()


def test_killed_simulation_after_a_config_change_is_rebuilt_with_its_figures(finished):
    variant, alpha = "l2_alpha0.2", 0.35
    table = finished / "results" / "simulation" / f"{variant}.parquet"
    figures = sorted((finished / "results" / "figures").glob("fig02_l2norm.*"))
    ledger = finished / "results" / "summary" / "claims.parquet"
    # enough samples that the job is still running when it is killed
    edit_config(finished, lambda c: c["simulation"]["variants"][variant].update(alpha=alpha, n_samples=400_000))
    log = finished / "logs" / "simulate" / f"{variant}.log"
    killed = run_and_kill(finished, "simulate.py", lambda: log_has(log, f"simulate {variant}:"), count=1)
    assert killed.returncode != 0
    assert not table.exists()  # Snakemake removed the killed job's output

    rerun = snakemake(finished, "all_figures")
    assert "Nothing to be done" not in rerun.stdout + rerun.stderr
    assert pd.read_parquet(table)["alpha"].unique().tolist() == [alpha]
    made = table.stat().st_mtime
    for path in figures + [ledger]:
        assert path.stat().st_mtime >= made, f"{path.name} is older than the simulation it shows"
    assert "Nothing to be done" in snakemake(finished, "-n", "all_figures").stdout  # and now it is current


def test_killed_trainings_after_a_config_change_are_rebuilt_with_their_analysis(finished):
    lr = 0.002
    models = finished / "results" / "models"
    # long enough to be killed mid-way (a tiny model: ~100 steps/s on an idle core)
    edit_config(finished, lambda c: c["training"].update(lr=lr, steps=1000, checkpoint_every=20, log_every=20))
    logs = [finished / "logs" / "train" / f"{m}.log" for m in ("nope", "rope")]
    killed = run_and_kill(finished, "train.py", lambda: all(log_has(p, " step 20/") for p in logs), count=2)
    assert killed.returncode != 0
    assert not any((models / m / "model.safetensors").exists() for m in ("nope", "rope"))

    planned = snakemake(finished, "-n", "all_figures").stdout
    for rule in ("train", "extract", "model_figure", "claims"):
        assert f"rule {rule}:" in planned, rule
    snakemake(finished, "all_figures")
    for model in ("nope", "rope"):
        metrics = pd.read_parquet(models / model / "metrics.parquet")
        assert metrics["step"].max() == 1000 and metrics["lr"].max() == pytest.approx(lr, rel=1e-3)  # logged steps miss the exact peak
        weights = (models / model / "model.safetensors").stat().st_mtime
        scores = finished / "results" / "activations" / model / "scores.parquet"
        assert scores.stat().st_mtime >= weights  # extracted from the new weights
    assert "Nothing to be done" in snakemake(finished, "-n", "all_figures").stdout
