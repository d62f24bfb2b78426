"""The workflow on a real SLURM cluster: `snakemake --profile profiles/slurm-test all_figures`, and the faults
that a cluster adds: a failing job, a job past its time limit, a training job cancelled mid-way, requests
the cluster cannot satisfy (an unknown partition, more memory than the node has: refused at submission,
within seconds, with sbatch's own message in Snakemake's output).

Needs root and a machine where scripts/local-slurm.sh can bring up a one-node
cluster (Debian 12 packages: munge, slurmctld, slurmd, slurm-client, slurmdbd,
mariadb-server; installed by the script when missing), so the module is skipped
unless CAUSALPOS_SLURM=1:

    CAUSALPOS_SLURM=1 pytest -m slurm -n 0 tests/test_slurm.py

About 6 minutes on a 2-core machine. What mostly waits on SLURM starts at once and runs beside the rest
(`background`): the tiny DAG as SLURM jobs (~5.5 min, eight at a time on the test node's two cores, each
job a Snakemake process of its own, twice), the failing job, the job past its time limit (SLURM stops it a
minute or more after it starts, and the plugin looks less and less often), the local run that the
SLURM run is compared with, and the inputs of a training that is meanwhile cancelled and resumed; the
refused requests come next, still beside the DAG; then the tests read what the background runs did.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.slurm

if os.environ.get("CAUSALPOS_SLURM") != "1":
    pytest.skip(
        "SLURM tests start a local SLURM cluster as root (scripts/local-slurm.sh); set CAUSALPOS_SLURM=1 to run them",
        allow_module_level=True,
    )

from causalpos.catalogue import paths  # noqa: E402
from helpers import (
    ROOT,
    JOB_ID,
    SNAKEMAKE,
    copy_with_profiles,
    edit_config,
    job_env,  # noqa: E402
    processes_in,
    wait_for_accounting,
)

TEST_PROFILE = ROOT / "profiles" / "slurm-test"
RUN_TIMEOUT = 900  # seconds for one all_figures run
SUBMIT_LIMIT = 120  # seconds: a request SLURM refuses must fail this fast, not hang
# the fixture `cluster` (tests/conftest.py) starts scripts/local-slurm.sh once per session

# What the SLURM run is compared with, made by the local run: the closed forms, every simulation, the
# trained models' curves and the scores of every model (with what they are made from).
TINY = yaml.safe_load((ROOT / ".test" / "config.yaml").read_text())
LOCAL_TARGETS = [
    paths.theory_table(),
    *(paths.simulation_table(v) for v in TINY["simulation"]["variants"]),
    *(paths.model_file(m, "metrics.parquet") for m in ("nope", "rope")),
    *(paths.activation_table(m, "scores") for m in ("nope", "rope", *TINY["extraction"]["pretrained"]["models"])),
]

# What the training that is cancelled reads, made locally first in its own copy.
TRAIN_INPUTS = [
    *(paths.tokens_file(name) for name in ("blocks.json", "train.npy", "heldout.npy")),
    f"{paths.tokenizer_dir()}/tokenizer.json",
]
# Long enough to be cancelled mid-way (~100 steps/s on one idle core), short enough to finish on the rerun;
# a checkpoint every 20 steps.
TRAIN_TARGET = paths.model_file("nope", "model.safetensors")
KILL_TRAINING = {"steps": 600, "checkpoint_every": 20, "eval_every": 300, "log_every": 50, "threads": 1}
TRAIN_OUTPUTS = ("model.safetensors", "config.json", "metrics.parquet")
RESUMED = re.compile(r"nope: resuming from (\S+) at step (\d+)")
STEP_LINE = re.compile(r"nope step (\d+)/(\d+)")


class Background:
    """`snakemake ARGS` started in `workdir` and left to run; `result()` waits for it: (exit status, output)."""

    def __init__(self, workdir: Path, *args: str, profile: Path | None = TEST_PROFILE, cores: int = 2):
        self.workdir, self.out = workdir, workdir / f"snakemake-{time.time_ns()}.out"
        command = [SNAKEMAKE, *(["--profile", str(profile)] if profile else ["--cores", str(cores)]), *args]
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen(
                command,
                cwd=workdir,
                env=job_env(workdir),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        self.started = time.time()

    def seconds(self) -> float:
        """How long it ran, to its last line of output (it may have ended long before a test asks)."""
        return self.out.stat().st_mtime - self.started

    def result(self, timeout: float = RUN_TIMEOUT) -> tuple[int, str]:
        try:
            self.proc.wait(timeout=max(1.0, timeout - (time.time() - self.started)))
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(
                f"{' '.join(self.proc.args)} still running after {timeout} s (a lost SLURM job?):\n"
                f"{self.out.read_text()[-5000:]}"
            )
        return self.proc.returncode, self.out.read_text()

    def stop(self) -> None:
        """SIGINT (which also cancels its SLURM jobs), SIGKILL if that does not end it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def background(cluster, tmp_path_factory):
    """Everything that mostly waits on SLURM, started together: the tiny DAG as SLURM jobs, a failing job, a
    job past its time limit, the local run the SLURM run is compared with, and (locally, on one core) the
    inputs of the training that one test cancels."""
    failing = tmp_path_factory.mktemp("failing")
    (failing / "Snakefile").write_text(
        "rule fail:\n"
        '    output: "never.txt"\n'
        '    log: "logs/fail.log"\n'
        '    shell: "echo SLURM job id $SLURM_JOB_ID on $SLURMD_NODENAME > {log}; exit 3"\n'
    )
    slow = tmp_path_factory.mktemp("slow")
    (slow / "Snakefile").write_text(
        "rule slow:\n"
        '    output: "slow.txt"\n'
        '    log: "logs/slow.log"\n'
        "    resources: runtime=1\n"  # minutes: sbatch -t 1
        '    shell: "echo SLURM job id $SLURM_JOB_ID on $SLURMD_NODENAME > {log}; echo partial > {output}; sleep 600"\n'
    )
    killed = copy_with_profiles(tmp_path_factory.mktemp("killed_training"))
    edit_config(killed, lambda config: config["training"].update(KILL_TRAINING))
    runs = {
        "slow": Background(slow, "slow.txt"),
        "failing": Background(failing, "never.txt"),
        "train_inputs": Background(killed, *TRAIN_INPUTS, profile=None, cores=1),
        "dag": Background(copy_with_profiles(tmp_path_factory.mktemp("slurm_run")), "all_figures"),
        # snakemake --cores 2 (and the copy's default profile)
        "local": Background(copy_with_profiles(tmp_path_factory.mktemp("local_run")), *LOCAL_TARGETS, profile=None),
    }
    yield runs
    for run in runs.values():
        run.stop()


@pytest.fixture(scope="module")
def slurm_run(background) -> Path:
    """The tiny all_figures DAG, every job a SLURM job."""
    run = background["dag"]
    rc, out = run.result()
    assert rc == 0, f"snakemake --profile profiles/slurm-test all_figures failed:\n{out[-8000:]}"
    print(f"\nall_figures on SLURM: {run.seconds():.0f} s")
    (run.workdir / "snakemake.out").write_text(out)
    return run.workdir


@pytest.fixture(scope="module")
def local_run(background) -> Path:
    rc, out = background["local"].result()
    assert rc == 0, f"the local run failed:\n{out[-8000:]}"
    print(f"\nthe local run: {background['local'].seconds():.0f} s")
    return background["local"].workdir


def test_test_profile_is_the_slurm_profile_with_small_jobs():
    """profiles/slurm-test duplicates profiles/slurm (profiles cannot inherit) but for partition, sizes, waits."""
    real = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    test = yaml.safe_load((ROOT / "profiles" / "slurm-test" / "config.yaml").read_text())
    differs = {"jobs", "default-resources", "set-resources", "set-threads", "slurm-init-seconds-before-status-checks"}
    assert set(real) == set(test)
    assert {k: v for k, v in real.items() if k not in differs} == {k: v for k, v in test.items() if k not in differs}
    assert real["executor"] == "slurm"
    assert real["slurm-keep-successful-logs"] is True
    assert (
        set(real["set-resources"])
        == set(test["set-resources"])
        >= {"simulate", "train", "extract_trained", "extract_pretrained", "pretrained"}
    )
    for rule in ("train", "extract_trained", "extract_pretrained"):
        assert real["set-resources"][rule]["gpu"] == 1 and real["set-resources"][rule]["cpus_per_gpu"] >= 1
    assert not any(
        "gpu" in key or key == "slurm_partition" for resources in test["set-resources"].values() for key in resources
    )
    assert test["default-resources"]["slurm_partition"] == "debug"
    assert set(test["set-threads"].values()) == {1}


def test_profiles_take_job_status_from_squeue():
    """sacct says 'CANCELLED by <uid>' for a scancel'd job; plugin 2.8.0 waits forever on that state."""
    for profile in ("slurm", "slurm-test"):
        config = yaml.safe_load((ROOT / "profiles" / profile / "config.yaml").read_text())
        assert config["slurm-status-command"] == "squeue", profile


def running_jobs(workdir: Path) -> dict[str, str]:
    """SLURM job id -> the plugin's comment (rule_<rule>_wildcards_<values>) of this copy's running jobs."""
    proc = subprocess.run(
        ["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k|%Z"], capture_output=True, text=True, check=True
    )
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return {job: comment for job, comment, cwd in rows if Path(cwd) == workdir}


def test_killed_training_job_fails_cleanly_and_the_rerun_resumes_from_its_checkpoint(background):
    """In a copy with a longer training to do and its inputs made: the train job is cancelled (scancel) once
    it has written a checkpoint; Snakemake reports it failed, no model is left, and the next invocation
    resumes from that checkpoint's step, on a new SLURM job, and completes."""
    rc, out = background["train_inputs"].result()
    assert rc == 0, f"making the training's inputs failed:\n{out[-8000:]}"
    workdir = background["train_inputs"].workdir
    log = workdir / "logs" / "train" / "nope.log"

    # 1. train as a SLURM job; cancel it once it has written a checkpoint
    run = Background(workdir, TRAIN_TARGET)
    job, deadline = None, time.monotonic() + 600
    try:
        while True:
            if run.proc.poll() is not None:
                pytest.fail(
                    f"snakemake ended (rc {run.proc.returncode}) before train was cancelled:\n"
                    f"{run.out.read_text()[-5000:]}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"no running train job with a checkpoint after 600 s:\n{run.out.read_text()[-5000:]}")
            train = [j for j, comment in running_jobs(workdir).items() if comment == "rule_train_wildcards_nope"]
            if train and list(workdir.glob(f"{paths.checkpoints_dir()}/nope/*/last.ckpt")):
                job = train[0]
                break
            time.sleep(0.2)
        subprocess.run(["scancel", job], check=True)
        cancelled = time.time()
        rc, out = run.result(timeout=300 + cancelled - run.started)
    finally:
        run.stop()
    print(
        f"\ntrain job {job} cancelled {cancelled - run.started:.0f} s after the start; "
        f"snakemake exited {time.time() - cancelled:.0f} s later"
    )

    assert rc != 0, out[-5000:]
    assert f"SLURM-job '{job}' failed, SLURM status is: 'CANCELLED'" in out, out[-5000:]
    # nothing of the job outlives it (SIGKILL KillWait = 30 s after the SIGTERM, to its process group)
    deadline = time.monotonic() + 45
    while (left := processes_in(workdir)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not left, f"processes of the cancelled job {job} outlived it: {list(left.values())}"
    assert f"SLURM job id {job} " in log.read_text()  # the job we cancelled is the train job of this run
    assert wait_for_accounting([job])[job] == "CANCELLED"
    # nothing that looks like a trained model
    assert not [name for name in TRAIN_OUTPUTS if (workdir / paths.model_file("nope", name)).exists()]
    last_logged = max(int(m.group(1)) for m in STEP_LINE.finditer(log.read_text()))
    assert last_logged < KILL_TRAINING["steps"], "training finished before it was cancelled: raise steps"
    # the checkpoint is no output of the rule: Snakemake leaves it where the training wrote it
    from causalpos.models.train import load_checkpoint

    (checkpoint,) = workdir.glob(f"{paths.checkpoints_dir()}/nope/*/last.ckpt")
    step = load_checkpoint(checkpoint)["step"]
    # scancel sends SIGTERM first: the training writes a checkpoint at the step it reached and says so; if the
    # SIGKILL that follows came first, the last periodic checkpoint stands
    stopped = re.search(r"stopped by SIGTERM at step (\d+)", log.read_text())
    assert 0 < step < KILL_TRAINING["steps"]
    assert step == int(stopped.group(1)) if stopped else step % KILL_TRAINING["checkpoint_every"] == 0

    # 2. the same command again: train resumes from that step, on a new SLURM job, and completes
    rerun = Background(workdir, TRAIN_TARGET)
    rc, out = rerun.result(timeout=900)
    assert rc == 0, out[-8000:]
    print(f"rerun: {rerun.seconds():.0f} s, resumed at step {step} of {KILL_TRAINING['steps']}")
    text = log.read_text()
    second = JOB_ID.search(text).group(1)
    assert second != job
    resumed = RESUMED.search(text)
    assert resumed, f"train did not resume:\n{text[:3000]}"
    assert Path(resumed.group(1)) == checkpoint.relative_to(workdir) and int(resumed.group(2)) == step
    assert "training from scratch" not in text
    assert "rule sample:" not in out and "rule tokenizer:" not in out  # only train was rerun
    assert wait_for_accounting([second])[second] == "COMPLETED"
    metrics = pd.read_parquet(workdir / paths.model_file("nope", "metrics.parquet"))
    # the rows written before the kill come from the checkpoint, none twice, up to the last step
    assert metrics["step"].iloc[0] == 0 and metrics["step"].iloc[-1] == KILL_TRAINING["steps"]
    assert metrics["step"].is_monotonic_increasing and metrics["step"].is_unique
    assert (metrics["step"] < step).any()


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
    return [
        "results/simulation/l2_alpha0.0.parquet",
        "--profile",
        str(TEST_PROFILE),
        "--set-resources",
        f"simulate:mem_mb={10 * node_memory_mb()}",
    ]


@pytest.mark.parametrize(
    "request_args, slurm_messages",
    [
        (
            nosuch_partition_profile,
            [
                "sbatch: error: invalid partition specified: nosuch",
                "Batch job submission failed: Invalid partition name specified",
            ],
        ),
        (
            too_much_memory,
            [
                "sbatch: error: Memory specification can not be satisfied",
                "Batch job submission failed: Requested node configuration is not available",
            ],
        ),
    ],
    ids=["unknown-partition", "memory-beyond-any-node"],
)
def test_unsatisfiable_request_fails_at_submission_with_slurms_message(cluster, tmp_path, request_args, slurm_messages):
    workdir = copy_with_profiles(tmp_path)
    args = request_args(workdir)
    start = time.perf_counter()
    proc = subprocess.run(
        [SNAKEMAKE, *args], cwd=workdir, env=job_env(workdir), capture_output=True, text=True, timeout=SUBMIT_LIMIT
    )  # a hang fails here
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


def test_slurm_outputs_equal_local_outputs(slurm_run, local_run):
    """The SLURM run computes what the local run (`snakemake --cores 2`, same config and default profile)
    computes.

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
    pd.testing.assert_frame_equal(
        pd.read_parquet(slurm_run / results / "simulation"),
        pd.read_parquet(local_run / results / "simulation"),
        check_exact=False,
        rtol=1e-6,
        atol=4 * float32_ulp_at_one,
        obj="results/simulation",
    )
    tables = [results / "theory" / "layer2_scores.parquet"]
    tables += sorted(p.relative_to(local_run) for p in (local_run / results / "activations").glob("*/scores.parquet"))
    assert len(tables) == 1 + 3  # nope, rope, smollm2_135m
    for table in tables:
        pd.testing.assert_frame_equal(
            pd.read_parquet(slurm_run / table), pd.read_parquet(local_run / table), check_exact=True, obj=str(table)
        )
    for model in ("nope", "rope"):  # the training curves too, but for the measured speed
        metrics = [
            pd.read_parquet(run / results / "models" / model / "metrics.parquet").drop(columns="tokens_per_s")
            for run in (slurm_run, local_run)
        ]
        pd.testing.assert_frame_equal(*metrics, check_exact=True, obj=f"{model} metrics")


def test_failing_job_is_reported_failed_and_does_not_hang(background):
    run = background["failing"]
    rc, out = run.result(timeout=300)
    assert rc != 0, out
    assert not (run.workdir / "never.txt").exists()
    job = JOB_ID.search((run.workdir / "logs" / "fail.log").read_text()).group(1)
    assert f"SLURM-job '{job}' failed" in out, out[-5000:]
    assert wait_for_accounting([job])[job] == "FAILED"
    # the SLURM log of a failed job is kept, and names the failing command
    slurm_logs = list((run.workdir / ".snakemake" / "slurm_logs").rglob(f"{job}.log"))
    assert len(slurm_logs) == 1 and "exit 3" in slurm_logs[0].read_text()
    print(f"\nfailing job reported {run.seconds():.0f} s after the start")


def test_job_past_its_time_limit_is_reported_and_leaves_no_output(background):
    run = background["slow"]
    rc, out = run.result(timeout=400)
    assert rc != 0, out
    job = JOB_ID.search((run.workdir / "logs" / "slow.log").read_text()).group(1)
    assert f"SLURM-job '{job}' failed, SLURM status is: 'TIMEOUT'" in out, out[-5000:]
    assert wait_for_accounting([job])[job] == "TIMEOUT"
    assert not (run.workdir / "slow.txt").exists()  # the half-written output is removed
    print(f"\ntime limit reported {run.seconds():.0f} s after the start")
