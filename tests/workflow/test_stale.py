"""Changed settings whose jobs are killed: the next run rebuilds everything that depends on them, never
"Nothing to be done".

Snakemake removes a killed job's output; the figures and the ledger made from the old output are still there,
with unchanged params of their own. Each rule that reads results therefore carries the digest of what its
inputs were made from (workflow/provenance.py), so the rerun sees them out of date and pulls the missing
inputs back in. Both branches of the DAG at once (a simulation and the two trainings), with real kills
(SIGKILL of the job's process, as the OOM killer, scancel or a node failure would), on a copy of the
session's finished run (`finished_copy`, tests/conftest.py).

What it costs is kept small: a job is killed as soon as its process appears (from Snakemake's side a job
killed while it imports is a job killed), and the rebuild is of the smallest targets that read both
branches, the ledger and two figures; a dry run of all_figures then shows that the rest is still out of date.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from causalpos.catalogue import paths
from causalpos.catalogue import figures as figure_paths
from helpers import SNAKEMAKE, edit_config, job_rule, planned_jobs, processes_in, snakemake

pytestmark = pytest.mark.workflow


def job_processes(workdir: Path, rule: str) -> list[int]:
    """PIDs of the Snakemake job processes of this copy running a job of `rule`."""
    return [pid for pid, argv in processes_in(workdir).items() if job_rule(argv) == rule]


def run_and_kill(workdir: Path, counts: dict[str, int], timeout: float = 300) -> subprocess.CompletedProcess:
    """Start `snakemake all_figures`; SIGKILL each of the first counts[rule] jobs of each rule as soon as it appears
    (the default profile's keep-going starts the others meanwhile); wait for the end."""
    env = {**os.environ, "PYTHONPATH": str(workdir / "src")}
    proc = subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", "all_figures"],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    killed = {script: set() for script in counts}
    try:
        deadline = time.monotonic() + timeout
        while any(len(killed[script]) < count for script, count in counts.items()):
            assert proc.poll() is None, f"snakemake ended before the jobs could be killed:\n{proc.stdout.read()}"
            assert time.monotonic() < deadline, f"jobs killed: {killed}; the others never started"
            for script in counts:
                for pid in job_processes(workdir, script):
                    if pid not in killed[script]:
                        os.kill(pid, signal.SIGKILL)
                        killed[script].add(pid)
            time.sleep(0.02)
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:  # a failed assertion: stop snakemake and its jobs, leave nothing running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


# over 20 s (~35 s): a killed run and a rebuild of both branches (simulation, two trainings) on a copy
def test_killed_jobs_after_a_config_change_are_rebuilt_with_what_is_made_from_them(finished_copy):
    workdir, variant, alpha, lr, steps = finished_copy, "l2_alpha0.2", 0.35, 0.002, 30
    # every step logged: the row of the step at the end of the warmup logs lr itself (models.train.lr_at)
    table = workdir / paths.simulation_table(variant)
    models = workdir / "results" / "models"
    fig02 = [workdir / p for p in paths.figure_files("fig02_l2norm", ["pdf", "png"])]
    ledger = workdir / paths.summary_file("claims.parquet")
    nope_pages = workdir / figure_paths.all_layers_dir("nope")

    def change(config):
        config["simulation"]["variants"][variant].update(alpha=alpha)
        config["training"].update(lr=lr, steps=steps, log_every=1)

    edit_config(workdir, change)
    killed = run_and_kill(workdir, {"simulate": 1, "train": 2})
    assert killed.returncode != 0
    assert not table.exists()  # Snakemake removed the killed jobs' outputs
    assert not any((models / m / "model.safetensors").exists() for m in ("nope", "rope"))
    planned = {rule for rule, _ in planned_jobs(workdir, "all_figures")}
    assert {"simulate", "train", "extract", "model_figure", "claims", "figure"} <= planned

    # the ledger reads both branches; fig02 the simulation, nope's pages the trained model
    targets = [str(p.relative_to(workdir)) for p in (ledger, *fig02, nope_pages)]
    rerun = snakemake(workdir, *targets)
    assert "Nothing to be done" not in rerun.stdout + rerun.stderr
    assert pd.read_parquet(table)["alpha"].unique().tolist() == [alpha]
    made = table.stat().st_mtime
    for path in fig02 + [ledger]:
        assert path.stat().st_mtime >= made, f"{path.name} is older than the simulation it shows"
    for model in ("nope", "rope"):
        metrics = pd.read_parquet(models / model / "metrics.parquet")
        assert metrics["step"].max() == steps and metrics["lr"].max() == pytest.approx(lr, rel=1e-6)
        weights = (models / model / "model.safetensors").stat().st_mtime
        scores = workdir / paths.activation_table(model, "scores")
        assert scores.stat().st_mtime >= weights  # extracted from the new weights
        assert ledger.stat().st_mtime >= weights
    assert nope_pages.stat().st_mtime >= (models / "nope" / "model.safetensors").stat().st_mtime
    assert "Nothing to be done" in snakemake(workdir, "-n", *targets).stdout  # and now they are current
    # ...while what all_figures draws from the trained models, and was not rebuilt, is still out of date
    still = planned_jobs(workdir, "all_figures")
    assert {("model_figure", "rope"), ("emergence", "nope"), ("figure", "fig08_model_layers")} <= still
    assert not {job for job in still if job[0] in ("simulate", "train", "claims")}
    assert not {job for job in still if job[0] == "extract" and job[1] in ("nope", "rope")}
