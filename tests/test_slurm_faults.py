"""Faults on a real SLURM cluster: a killed training job, a time limit, requests the cluster cannot satisfy.

Opt-in like tests/test_slurm.py (root, scripts/local-slurm.sh, the shared
`cluster` fixture of tests/conftest.py):

    CAUSALPOS_SLURM=1 pytest -m slurm tests/test_slurm_faults.py

- a `train` job cancelled with scancel once it has written a checkpoint is
  reported failed (Snakemake exits, no hang), leaves no model or metrics, and
  the next invocation resumes it from that checkpoint's step and completes;
- a job past its time limit (runtime: 1 minute) is reported failed (TIMEOUT)
  and leaves no output;
- an unknown partition and more memory than the node has fail at submission
  within seconds, with sbatch's own message in Snakemake's output.

About 4-5 minutes on a 2-core machine, most of it the killed and resumed
training (~2 min) and the time limit (SLURM kills the job ~75 s after start).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.slurm

if os.environ.get("CAUSALPOS_SLURM") != "1":
    pytest.skip("SLURM tests start a local SLURM cluster as root (scripts/local-slurm.sh); "
                "set CAUSALPOS_SLURM=1 to run them", allow_module_level=True)

from conftest import (JOB_ID, ROOT, SNAKEMAKE, copy_with_profiles, edit_config, job_env, run_with_profile,
                      wait_for_accounting)

TEST_PROFILE = ROOT / "profiles" / "slurm-test"
SUBMIT_LIMIT = 120  # seconds: a request SLURM refuses must fail this fast, not hang

# Long enough to be cancelled mid-way (~100 steps/s on one idle core), short
# enough to finish on the rerun; a checkpoint every 20 steps.
TRAIN_TARGET = "results/models/nope/model.safetensors"
KILL_TRAINING = {"steps": 2000, "checkpoint_every": 20, "eval_every": 500, "log_every": 100, "threads": 1}
TRAIN_OUTPUTS = ("model.safetensors", "config.json", "metrics.parquet")
RESUMED = re.compile(r"nope: resuming from (\S+) at step (\d+)")
STEP_LINE = re.compile(r"nope step (\d+)/(\d+)")


def start_with_profile(workdir: Path, profile: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    """snakemake under a profile in the background; its stdout and stderr go to a file."""
    out_path = workdir / f"snakemake-{time.time_ns()}.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen([SNAKEMAKE, "--profile", str(profile), *args], cwd=workdir, env=job_env(workdir),
                                stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, out_path


def interrupt(proc: subprocess.Popen) -> None:
    """SIGINT (which also cancels its SLURM jobs), SIGKILL if that does not end it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def running_jobs(workdir: Path) -> dict[str, str]:
    """SLURM job id -> the plugin's comment (rule_<rule>_wildcards_<values>) of this copy's running jobs."""
    proc = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k|%Z"], capture_output=True, text=True,
                          check=True)
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return {job: comment for job, comment, cwd in rows if Path(cwd) == workdir}


def test_profiles_take_job_status_from_squeue():
    """sacct says 'CANCELLED by <uid>' for a scancel'd job; plugin 2.8.0 waits forever on that state."""
    for profile in ("slurm", "slurm-test"):
        config = yaml.safe_load((ROOT / "profiles" / profile / "config.yaml").read_text())
        assert config["slurm-status-command"] == "squeue", profile


def test_killed_training_job_fails_cleanly_and_the_rerun_resumes_from_its_checkpoint(cluster, tmp_path):
    workdir = copy_with_profiles(tmp_path)
    edit_config(workdir, lambda config: config["training"].update(KILL_TRAINING))
    log = workdir / "logs" / "train" / "nope.log"

    # 1. sample, tokenizer and train as SLURM jobs; cancel train once it has written a checkpoint
    started = time.perf_counter()
    proc, out_path = start_with_profile(workdir, TEST_PROFILE, TRAIN_TARGET)
    job, deadline = None, time.monotonic() + 600
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"snakemake ended (rc {proc.returncode}) before train was cancelled:\n"
                            f"{out_path.read_text()[-5000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no running train job with a checkpoint after 600 s:\n{out_path.read_text()[-5000:]}")
            train = [j for j, comment in running_jobs(workdir).items() if comment == "rule_train_wildcards_nope"]
            if train and list(workdir.glob("results/checkpoints/nope/*/last.ckpt")):
                job = train[0]
                break
            time.sleep(0.2)
        subprocess.run(["scancel", job], check=True)
        cancelled = time.perf_counter()
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail(f"snakemake still running 300 s after scancel {job}:\n{out_path.read_text()[-5000:]}")
    finally:
        interrupt(proc)
    out = out_path.read_text()
    print(f"\ntrain job {job} cancelled {cancelled - started:.0f} s after the start; "
          f"snakemake exited {time.perf_counter() - cancelled:.0f} s later")

    assert proc.returncode != 0, out[-5000:]
    assert f"SLURM-job '{job}' failed, SLURM status is: 'CANCELLED'" in out, out[-5000:]
    assert f"SLURM job id {job} " in log.read_text()  # the job we cancelled is the train job of this run
    assert wait_for_accounting([job])[job] == "CANCELLED"
    # nothing that looks like a trained model
    assert not [name for name in TRAIN_OUTPUTS if (workdir / "results" / "models" / "nope" / name).exists()]
    last_logged = max(int(m.group(1)) for m in STEP_LINE.finditer(log.read_text()))
    assert last_logged < KILL_TRAINING["steps"], "training finished before it was cancelled: raise steps"
    # the checkpoint is no output of the rule: Snakemake leaves it where the training wrote it
    from causalpos.models.train import load_checkpoint

    (checkpoint,) = workdir.glob("results/checkpoints/nope/*/last.ckpt")
    step = load_checkpoint(checkpoint)["step"]
    # scancel sends SIGTERM first: the training writes a checkpoint at the step it reached and says so; if the
    # SIGKILL that follows came first, the last periodic checkpoint stands
    stopped = re.search(r"stopped by SIGTERM at step (\d+)", log.read_text())
    assert 0 < step < KILL_TRAINING["steps"]
    assert step == int(stopped.group(1)) if stopped else step % KILL_TRAINING["checkpoint_every"] == 0

    # 2. the same command again: train resumes from that step, on a new SLURM job, and completes
    rc, out, seconds = run_with_profile(workdir, TEST_PROFILE, TRAIN_TARGET, timeout=900)
    assert rc == 0, out[-8000:]
    print(f"rerun: {seconds:.0f} s, resumed at step {step} of {KILL_TRAINING['steps']}")
    text = log.read_text()
    second = JOB_ID.search(text).group(1)
    assert second != job
    resumed = RESUMED.search(text)
    assert resumed, f"train did not resume:\n{text[:3000]}"
    assert Path(resumed.group(1)) == checkpoint.relative_to(workdir) and int(resumed.group(2)) == step
    assert "training from scratch" not in text
    assert "rule sample:" not in out and "rule tokenizer:" not in out  # only train was rerun
    assert wait_for_accounting([second])[second] == "COMPLETED"
    metrics = pd.read_parquet(workdir / "results" / "models" / "nope" / "metrics.parquet")
    # the rows written before the kill come from the checkpoint, none twice, up to the last step
    assert metrics["step"].iloc[0] == 0 and metrics["step"].iloc[-1] == KILL_TRAINING["steps"]
    assert metrics["step"].is_monotonic_increasing and metrics["step"].is_unique
    assert (metrics["step"] < step).any()


def test_job_past_its_time_limit_is_reported_and_leaves_no_output(cluster, tmp_path):
    (tmp_path / "Snakefile").write_text(
        'rule slow:\n'
        '    output: "slow.txt"\n'
        '    log: "logs/slow.log"\n'
        '    resources: runtime=1\n'  # minutes: sbatch -t 1
        '    shell: "echo SLURM job id $SLURM_JOB_ID on $SLURMD_NODENAME > {log}; echo partial > {output}; sleep 600"\n'
    )
    rc, out, seconds = run_with_profile(tmp_path, TEST_PROFILE, "slow.txt", timeout=400)
    assert rc != 0, out
    job = JOB_ID.search((tmp_path / "logs" / "slow.log").read_text()).group(1)
    assert f"SLURM-job '{job}' failed, SLURM status is: 'TIMEOUT'" in out, out[-5000:]
    assert wait_for_accounting([job])[job] == "TIMEOUT"
    assert not (tmp_path / "slow.txt").exists()  # the half-written output is removed
    print(f"\ntime limit reported after {seconds:.0f} s")


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
