"""The workflow on a real SLURM cluster: `snakemake --profile profiles/slurm-test all_figures`.

Needs root and a machine where scripts/local-slurm.sh can bring up a one-node
cluster (Debian 12 packages: munge, slurmctld, slurmd, slurm-client, slurmdbd,
mariadb-server; installed by the script when missing), so the module is skipped
unless CAUSALPOS_SLURM=1:

    CAUSALPOS_SLURM=1 pytest -m slurm tests/test_slurm.py

About 5 minutes on a 2-core machine: the tiny DAG as 37 SLURM jobs (~4 min,
two at a time, each job a Snakemake process of its own), compared with the
session's finished local run (tests/conftest.py), and a failing job (~20 s).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.slurm

if os.environ.get("CAUSALPOS_SLURM") != "1":
    pytest.skip("SLURM tests start a local SLURM cluster as root (scripts/local-slurm.sh); "
                "set CAUSALPOS_SLURM=1 to run them", allow_module_level=True)

from conftest import ROOT, JOB_ID, copy_with_profiles, run_with_profile, wait_for_accounting

RUN_TIMEOUT = 900  # seconds for one all_figures run
# the fixture `cluster` (tests/conftest.py) starts scripts/local-slurm.sh once per session


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory) -> Path:
    """The tiny all_figures DAG, every job a SLURM job."""
    workdir = copy_with_profiles(tmp_path_factory.mktemp("slurm_run"))
    rc, out, seconds = run_with_profile(workdir, workdir / "profiles" / "slurm-test", "all_figures",
                                        timeout=RUN_TIMEOUT)
    assert rc == 0, f"snakemake --profile profiles/slurm-test all_figures failed:\n{out[-8000:]}"
    print(f"\nall_figures on SLURM: {seconds:.0f} s")
    (workdir / "snakemake.out").write_text(out)
    return workdir


def test_test_profile_is_the_slurm_profile_with_small_jobs():
    """profiles/slurm-test duplicates profiles/slurm (profiles cannot inherit) but for partition, sizes, waits."""
    real = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    test = yaml.safe_load((ROOT / "profiles" / "slurm-test" / "config.yaml").read_text())
    differs = {"jobs", "default-resources", "set-resources", "set-threads", "slurm-init-seconds-before-status-checks"}
    assert set(real) == set(test)
    assert {k: v for k, v in real.items() if k not in differs} == {k: v for k, v in test.items() if k not in differs}
    assert real["executor"] == "slurm"
    assert real["slurm-keep-successful-logs"] is True
    assert set(real["set-resources"]) == set(test["set-resources"]) >= {"simulate", "train", "extract", "pretrained"}
    for rule in ("train", "extract"):
        assert real["set-resources"][rule]["gpu"] == 1 and real["set-resources"][rule]["cpus_per_gpu"] >= 1
    assert not any("gpu" in key or key == "slurm_partition"
                   for resources in test["set-resources"].values() for key in resources)
    assert test["default-resources"]["slurm_partition"] == "debug"
    assert set(test["set-threads"].values()) == {1}


def test_failing_job_is_reported_failed_and_does_not_hang(cluster, tmp_path):
    (tmp_path / "Snakefile").write_text(
        'rule fail:\n'
        '    output: "never.txt"\n'
        '    log: "logs/fail.log"\n'
        '    shell: "echo SLURM job id $SLURM_JOB_ID on $SLURMD_NODENAME > {log}; exit 3"\n'
    )
    rc, out, seconds = run_with_profile(tmp_path, ROOT / "profiles" / "slurm-test", "never.txt", timeout=180)
    assert rc != 0, out
    assert not (tmp_path / "never.txt").exists()
    job = JOB_ID.search((tmp_path / "logs" / "fail.log").read_text()).group(1)
    assert f"SLURM-job '{job}' failed" in out, out[-5000:]
    assert wait_for_accounting([job])[job] == "FAILED"
    # the SLURM log of a failed job is kept, and names the failing command
    slurm_logs = list((tmp_path / ".snakemake" / "slurm_logs").rglob(f"{job}.log"))
    assert len(slurm_logs) == 1 and "exit 3" in slurm_logs[0].read_text()
    print(f"\nfailing job reported after {seconds:.0f} s")


def test_every_job_ran_as_a_slurm_job_and_completed(slurm_run):
    logs = sorted((slurm_run / "logs").rglob("*.log"))
    out = (slurm_run / "snakemake.out").read_text()
    assert len(logs) == out.count("Finished jobid") - 1 > 30  # every job but the local target all_figures
    job_ids = {}
    for log in logs:
        match = JOB_ID.search(log.read_text())
        assert match, f"{log} has no 'SLURM job id': the job did not run under SLURM"
        job_ids[log.relative_to(slurm_run)] = match.group(1)
    assert len(set(job_ids.values())) == len(job_ids)  # one SLURM job per Snakemake job
    states = wait_for_accounting(job_ids.values())
    assert {log: states.get(job) for log, job in job_ids.items()} == {log: "COMPLETED" for log in job_ids}
    # the plugin kept every SLURM log (slurm-keep-successful-logs), one per job, named by the job id
    slurm_logs = {p.stem for p in (slurm_run / ".snakemake" / "slurm_logs").rglob("*.log")}
    assert slurm_logs == set(job_ids.values())
    for rule in ("simulate", "train", "extract", "pretrained"):
        assert any(log.parts[1] == rule for log in job_ids), rule


def test_slurm_outputs_equal_local_outputs(slurm_run, finished_run):
    """The SLURM run computes what the local run computes (the session's finished run, tests/conftest.py: the
    same tiny config and default profile, `snakemake --cores 2 all`, of which all_figures is a part).

    Training, extraction and the closed forms match bit for bit (CPU, same
    thread count, same seeds), and so do the model weights behind them. The
    Monte Carlo tables match to float32 rounding only: the numba kernel is
    compiled with fast-math reassociation and cached per copy of the workflow,
    and which compiled specialisation a job runs depends on which job compiled
    the kernel first (a fresh compile and a cache hit differ by ~4e-9 on
    rope_nomask_alpha0.0 even outside SLURM, with the same thread count; 3.2e-8 on a score of 0.0043 once,
    from summands of size ~1). So the tolerance is float32 rounding at the scores' scale: a few ulps of 1.0.
    """
    results = Path("results")
    float32_ulp_at_one = float(np.finfo(np.float32).eps)
    pd.testing.assert_frame_equal(pd.read_parquet(slurm_run / results / "simulation"),
                                  pd.read_parquet(finished_run / results / "simulation"),
                                  check_exact=False, rtol=1e-6, atol=4 * float32_ulp_at_one, obj="results/simulation")
    tables = [results / "theory" / "layer2_scores.parquet"]
    tables += sorted(p.relative_to(finished_run) for p in (finished_run / results / "activations").glob("*/scores.parquet"))
    assert len(tables) == 1 + 3  # nope, rope, smollm2_135m
    for table in tables:
        pd.testing.assert_frame_equal(pd.read_parquet(slurm_run / table), pd.read_parquet(finished_run / table),
                                      check_exact=True, obj=str(table))
    for model in ("nope", "rope"):  # the training curves too, but for the measured speed
        metrics = [pd.read_parquet(run / results / "models" / model / "metrics.parquet").drop(columns="tokens_per_s")
                   for run in (slurm_run, finished_run)]
        pd.testing.assert_frame_equal(*metrics, check_exact=True, obj=f"{model} metrics")
