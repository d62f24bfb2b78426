"""The workflow on a real SLURM cluster: `snakemake --profile profiles/slurm-test all_figures`, what each job
asks SLURM for (rules/resources.yaml: CPUs, memory, time limit, a GPU on the partition with GPUs), and the
faults that a cluster adds: a failing job, a job past its time limit, a training job cancelled mid-way,
requests the cluster cannot satisfy (an unknown partition, more memory than the node has: refused at
submission, within seconds, with sbatch's own message in Snakemake's output).

Needs root and a machine where scripts/local-slurm.sh can bring up a one-node
cluster (Debian 12 packages: munge, slurmctld, slurmd, slurm-client, slurmdbd,
mariadb-server; installed by the script when missing), so the module is skipped
unless CAUSALPOS_SLURM=1:

    CAUSALPOS_SLURM=1 pytest -m slurm -n 0 tests/slurm/test_slurm.py

About 6 minutes on a 2-core machine. What mostly waits on SLURM starts at once and runs beside the rest
(`background`): the tiny DAG as SLURM jobs (~5.5 min, eight at a time on the test node's two cores, each
job a Snakemake process of its own, twice), an extraction and the closed forms (a GPU job and a CPU job),
the failing job, the job past its time limit (SLURM stops it a minute or more after it starts, and the
plugin looks less and less often), the local run that the SLURM run is compared with, and the inputs of a
training that is meanwhile cancelled and resumed; the refused requests come next, still beside the DAG;
then the tests read what the background runs did, from the jobs' logs and from SLURM's accounting.

The test node's GPUs are a generic resource with no GPU behind them (scripts/local-slurm.sh): SLURM
allocates them as it would real ones, and a job given one finds no CUDA device and runs on the CPU
(`device: auto`), which is what the comparison with the local run needs.
"""

from __future__ import annotations

import logging
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

from helpers import (  # noqa: E402
    JOB_ID,
    ROOT,
    SNAKEMAKE,
    copy_with_profiles,
    edit_config,
    job_env,
    processes_in,
    wait_for_accounting,
)
from snakemake_executor_plugin_slurm.partitions import get_best_partition, read_partition_file  # noqa: E402

from causalpos.catalogue import paths  # noqa: E402
from causalpos.workflow.config import validate_config  # noqa: E402

PROFILE = ROOT / "profiles" / "slurm"
TEST_PROFILE = ROOT / "profiles" / "slurm-test"
# the only keys in which the test profile may differ from profiles/slurm: what the tiny test cluster needs (its
# partitions are another file under the same key)
TEST_CLUSTER_KEYS = {"jobs", "slurm-init-seconds-before-status-checks"}
RESOURCES = yaml.safe_load((ROOT / "rules" / "resources.yaml").read_text())
# Every wait below bounds a hang, not a speed: CI's machine ran this tier about 3x slower than ours (its DAG was at
# 51% after 900 s, where ours takes 463 s in all), so each is sized for that machine.
PATIENCE = 3
RUN_TIMEOUT = 900 * PATIENCE  # seconds for one all_figures run
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

# A job of a rule that takes a GPU under the tiny config (extract reads `extraction.device: auto`; its inputs, the
# tiny training, are CPU jobs there: training.device is cpu) and one of a CPU rule.
GPU_JOB = ("extract", paths.activation_table("nope", "scores"), paths.log_file("extract/nope.log"))
CPU_JOB = ("theory", paths.theory_table(), paths.log_file("theory.log"))

# What the training that is cancelled reads, made locally first in its own copy.
TRAIN_INPUTS = [
    *(paths.tokens_file(name) for name in ("blocks.json", "train.npy", "heldout.npy")),
    f"{paths.tokenizer_dir()}/tokenizer.json",
]
# Long enough to be cancelled mid-way (~100 steps/s on one idle core), short enough to finish on the rerun;
# a checkpoint every 20 steps.
TRAIN_TARGET = paths.model_file("nope", "model.safetensors")
TRAIN_LOG = paths.log_file("train/nope.log")
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
                f"{' '.join(self.proc.args)} still running after {timeout} s (a lost SLURM job?; this machine: "
                f"{os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable, load {os.getloadavg()}):\n"
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
    """Everything that mostly waits on SLURM, started together: the tiny DAG as SLURM jobs, a GPU job and a CPU
    job, a failing job, a job past its time limit, the local run the SLURM run is compared with, and (locally,
    on one core) the inputs of the training that one test cancels."""
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
        "gpu": Background(copy_with_profiles(tmp_path_factory.mktemp("gpu_job")), GPU_JOB[1], CPU_JOB[1]),
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


def profile(folder: Path) -> dict:
    return yaml.safe_load((folder / "config.yaml").read_text())


def partitions(folder: Path) -> dict:
    """The profile's partition file as the SLURM plugin reads it: name -> limits."""
    return {p.name: p.limits for p in read_partition_file(folder / profile(folder)["slurm-partition-config"])}


def requested(rule: str, config: dict) -> dict:
    """What rules/resources.yaml gives a job of `rule` in the default run's folder under `config` (the rules read it
    through settings.job_request), and the partition of profiles/slurm-test/partitions.yaml it must land on."""
    from causalpos.workflow.settings import job_request

    wanted = job_request(RESOURCES, config, rule)
    gpus = wanted.pop("gpu")
    return {**wanted, "gpus": gpus, "partition": "gpu" if gpus else "cpu"}


def minutes(limit: str) -> float:
    """sacct's Timelimit ([D-]HH:MM:SS) in minutes."""
    days, _, clock = limit.rpartition("-")
    hours, mins, secs = (int(part) for part in clock.split(":"))
    return (int(days or 0) * 24 + hours) * 60 + mins + secs / 60


def test_test_profile_is_the_slurm_profile_for_the_test_cluster():
    """profiles/slurm-test repeats profiles/slurm (profiles cannot inherit) but for what the test cluster needs:
    its partitions, the job limit, the first status check. What a job asks for is in neither: no per-rule
    threads or resources, no sizes, no partition named for every job (it would override the partition file);
    rules/resources.yaml gives them, for SLURM as for a local run."""
    real, test = profile(PROFILE), profile(TEST_PROFILE)
    assert set(real) == set(test)
    assert {k: v for k, v in real.items() if k not in TEST_CLUSTER_KEYS} == {
        k: v for k, v in test.items() if k not in TEST_CLUSTER_KEYS
    }
    assert real["executor"] == "slurm"
    assert real["slurm-keep-successful-logs"] is True
    for config in (real, test):
        assert not {"set-threads", "set-resources", "resources", "max-threads"} & set(config)
        assert set(config.get("default-resources") or {}) <= {"slurm_account"}  # the account only, if any
    # each profile's own partition file: a GPU job can go to a partition with GPUs, a CPU job to one without
    for folder in (PROFILE, TEST_PROFILE):
        limits = partitions(folder)
        assert any(lim.max_gpu >= 1 for lim in limits.values()), folder
        assert any(lim.max_gpu == 0 for lim in limits.values()), folder


def cluster_partition_gpus() -> dict[str, int]:
    """Partition name -> its GPUs, from `scontrol show partition` (TRES gres/gpu)."""
    out = subprocess.run(["scontrol", "-o", "show", "partition"], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        if name := re.search(r"PartitionName=(\S+)", line):
            gpus = re.search(r"gres/gpu=(\d+)", line)
            found[name.group(1)] = int(gpus.group(1)) if gpus else 0
    return found


class Request:
    """What the SLURM plugin reads of a job when it picks a partition: threads and resources."""

    def __init__(self, threads: int, **resources):
        self.name, self.threads, self.resources = "request", threads, resources


def test_the_partition_files_send_every_rules_jobs_to_a_partition_with_gpus_exactly_when_they_ask_for_one():
    """The plugin's own choice (get_best_partition) from each profile's partition file, for what every rule in
    rules/resources.yaml asks for under config.yaml (every device key auto) and under the tiny config, in the
    default run's folder and (its own sizes) in target paper_llms's."""
    configs = [
        validate_config(yaml.safe_load(path.read_text()), devices=False)
        for path in (ROOT / "config.yaml", ROOT / ".test" / "config.yaml")
    ]
    for folder in (PROFILE, TEST_PROFILE):
        candidates = read_partition_file(folder / profile(folder)["slurm-partition-config"])
        max_gpu = {p.name: p.limits.max_gpu for p in candidates}
        for config in configs:
            for rule in RESOURCES:
                want = requested(rule, config)
                for sizes in ({}, RESOURCES[rule].get("paper_llms", {})):
                    job = Request(
                        want["threads"],
                        mem_mb=sizes.get("mem_mb", want["mem_mb"]),
                        runtime=sizes.get("runtime", want["runtime"]),
                        gpu=want["gpus"],
                    )
                    chosen = get_best_partition(candidates, job, logging.getLogger(__name__))
                    assert chosen is not None and (max_gpu[chosen] >= 1) == bool(want["gpus"]), (folder.name, rule)
    assert any(requested(rule, configs[0])["gpus"] for rule in RESOURCES)  # config.yaml has GPU jobs


def test_test_partition_file_describes_the_test_cluster(cluster):
    """profiles/slurm-test/partitions.yaml names the local cluster's partitions, and the partition it sends GPU
    jobs to has as many GPUs in SLURM as the file says (both partitions hold the one node: the file keeps CPU
    jobs off the GPUs)."""
    gpus = cluster_partition_gpus()
    limits = partitions(TEST_PROFILE)
    assert set(limits) == set(gpus)
    assert {name: lim.max_gpu for name, lim in limits.items() if lim.max_gpu} == {"gpu": gpus["gpu"]}
    assert gpus["gpu"] >= 1


def test_profiles_take_job_status_from_squeue():
    """sacct says 'CANCELLED by <uid>' for a scancel'd job; plugin 2.8.0 waits forever on that state."""
    for folder in (PROFILE, TEST_PROFILE):
        assert profile(folder)["slurm-status-command"] == "squeue", folder


def sacct_records(job_ids, fields: list[str]) -> dict[str, dict[str, str]]:
    """SLURM job id -> these fields of its allocation (-X), from accounting."""
    proc = subprocess.run(
        ["sacct", "-j", ",".join(job_ids), "-X", "-P", "--noheader", "--format=" + ",".join(["JobID", *fields])],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return {row[0]: dict(zip(fields, row[1:])) for row in rows}


def tres(text: str) -> dict[str, str]:
    """A TRES list (cpu=1,mem=4000M,gres/gpu=1) as a mapping."""
    return dict(item.split("=", 1) for item in text.split(",") if item)


def scontrol_job(job: str) -> dict[str, str]:
    """slurmctld's record of a job (`scontrol -d -o show job`: kept MinJobAge = 3600 s after it ends)."""
    out = subprocess.run(
        ["scontrol", "-d", "-o", "show", "job", job], capture_output=True, text=True, check=True
    ).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def test_a_gpu_rules_job_gets_a_gpu_of_the_cluster_and_a_cpu_rules_job_none(background):
    """The trained NoPE model's extraction and the closed forms on the test cluster: extract takes a GPU under the
    tiny config (extraction.device: auto) and its job asked for one and was given one of the node's fake GPUs, on the GPU
    partition; theory's job asked for none and got none, on the CPU partition. Read from slurmctld (the request
    and the allocation) and from accounting (AllocTRES). First of the tests that wait on the background runs:
    slurmctld forgets a job MinJobAge (3600 s) after it ends."""
    run = background["gpu"]
    rc, out = run.result(timeout=600 * PATIENCE)
    assert rc == 0, f"snakemake --profile profiles/slurm-test (an extraction, the closed forms) failed:\n{out[-8000:]}"
    gpu, cpu = (JOB_ID.search((run.workdir / log).read_text()).group(1) for _, _, log in (GPU_JOB, CPU_JOB))
    shown = {job: scontrol_job(job) for job in (gpu, cpu)}
    assert shown[gpu]["TresPerJob"] == "gres:gpu:1"  # asked for: --gpus=1
    assert shown[gpu]["JOB_GRES"] == "gpu:1" and tres(shown[gpu]["TRES"])["gres/gpu"] == "1"  # given
    assert shown[gpu]["Partition"] == "gpu" and shown[gpu]["JobState"] == "COMPLETED"
    assert "TresPerJob" not in shown[cpu] and shown[cpu]["JOB_GRES"] == "(null)"
    assert "gres/gpu" not in tres(shown[cpu]["TRES"])
    assert shown[cpu]["Partition"] == "cpu" and shown[cpu]["JobState"] == "COMPLETED"
    assert wait_for_accounting([gpu, cpu]) == {gpu: "COMPLETED", cpu: "COMPLETED"}
    accounted = sacct_records([gpu, cpu], ["Comment", "Partition", "AllocTRES"])
    assert accounted[gpu]["Comment"].startswith("rule_extract_wildcards_")  # the plugin names the job's rule
    assert accounted[cpu]["Comment"] == "rule_theory"
    assert tres(accounted[gpu]["AllocTRES"])["gres/gpu"] == "1" and accounted[gpu]["Partition"] == "gpu"
    assert "gres/gpu" not in tres(accounted[cpu]["AllocTRES"]) and accounted[cpu]["Partition"] == "cpu"
    assert (run.workdir / GPU_JOB[1]).exists() and (run.workdir / CPU_JOB[1]).exists()
    print(f"\na GPU job and a CPU job: {run.seconds():.0f} s")


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
    log = workdir / TRAIN_LOG

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
        rc, out = run.result(timeout=300 * PATIENCE + cancelled - run.started)
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
    rc, out = rerun.result(timeout=900 * PATIENCE)
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
    """A copy of the test profile whose partition file names a partition the cluster lacks: a profile mistake."""
    folder = workdir / "profiles" / "slurm-nosuch"
    shutil.copytree(TEST_PROFILE, folder)
    (folder / profile(folder)["slurm-partition-config"]).write_text(
        yaml.safe_dump({"partitions": {"nosuch": {"max_gpu": 8}}})
    )  # takes GPU and CPU jobs alike
    return ["all_figures", "--profile", str(folder)]


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


def log_job_ids(workdir: Path) -> dict[Path, str]:
    """Every rule log of the run (relative to the logs folder) -> the SLURM job id it starts with."""
    logs = workdir / paths.logs_dir()
    job_ids = {}
    for log in sorted(logs.rglob("*.log")):
        match = JOB_ID.search(log.read_text())
        assert match, f"{log} has no 'SLURM job id': the job did not run under SLURM"
        job_ids[log.relative_to(logs)] = match.group(1)
    return job_ids


def test_every_job_ran_as_a_slurm_job_and_completed(slurm_run):
    out = (slurm_run / "snakemake.out").read_text()
    job_ids = log_job_ids(slurm_run)
    assert len(job_ids) == out.count("Finished jobid") - 1 > 30  # every job but the local target all_figures
    assert len(set(job_ids.values())) == len(job_ids)  # one SLURM job per Snakemake job
    states = wait_for_accounting(job_ids.values())
    assert {log: states.get(job) for log, job in job_ids.items()} == {log: "COMPLETED" for log in job_ids}
    # the plugin kept every SLURM log (slurm-keep-successful-logs), one per job, named by the job id
    slurm_logs = {p.stem for p in (slurm_run / ".snakemake" / "slurm_logs").rglob("*.log")}
    assert slurm_logs == set(job_ids.values())
    for rule in ("simulate", "train", "extract", "pretrained"):
        assert any(log.parts[0] == rule for log in job_ids), rule


def test_every_job_asked_slurm_for_what_rules_resources_yaml_gives_its_rule(slurm_run):
    """Each SLURM job of the DAG, by SLURM's accounting: its rule (the plugin's job comment), CPUs, memory, time
    limit, GPUs and partition are what rules/resources.yaml and the run's config give that rule, with nothing in
    the profile in between. The tiny config's GPU rules (device, extraction.device: auto) got a GPU each, on the
    GPU partition; the rest (training.device: cpu) none, on the CPU partition."""
    config = validate_config(yaml.safe_load((slurm_run / "config.yaml").read_text()), devices=False)
    job_ids = log_job_ids(slurm_run)
    accounted = sacct_records(
        job_ids.values(), ["Comment", "AllocCPUS", "ReqMem", "Timelimit", "AllocTRES", "Partition"]
    )
    by_rule = {}
    for log, job in job_ids.items():
        record = accounted[job]
        rule = record["Comment"].removeprefix("rule_").split("_wildcards_")[0]
        got = {
            "threads": int(record["AllocCPUS"]),
            "mem_mb": int(re.fullmatch(r"(\d+)M", record["ReqMem"]).group(1)),
            "runtime": minutes(record["Timelimit"]),
            "gpus": int(tres(record["AllocTRES"]).get("gres/gpu", 0)),
            "partition": record["Partition"],
        }
        assert got == requested(rule, config), f"{log} (SLURM job {job}, rule {rule})"
        by_rule.setdefault(rule, got["gpus"])
    gpu_rules = {rule for rule, gpus in by_rule.items() if gpus}
    # extraction.device auto: a GPU; training.device cpu, and device auto for the simulations (a GPU only where cuda)
    assert gpu_rules == {"extract", "pattern_ablation_pretrained", "emergence"}
    assert {"simulate", "theory", "train", "length_eval", "pattern_ablation", "figure"} <= set(by_rule) - gpu_rules


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
    for model in ("nope", "rope"):  # the training curves too (their speed is a timing, apart)
        metrics = [
            pd.read_parquet(run / results / "models" / model / "metrics.parquet") for run in (slurm_run, local_run)
        ]
        pd.testing.assert_frame_equal(*metrics, check_exact=True, obj=f"{model} metrics")


def test_failing_job_is_reported_failed_and_does_not_hang(background):
    run = background["failing"]
    rc, out = run.result(timeout=300 * PATIENCE)
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
    rc, out = run.result(timeout=400 * PATIENCE)
    assert rc != 0, out
    job = JOB_ID.search((run.workdir / "logs" / "slow.log").read_text()).group(1)
    assert f"SLURM-job '{job}' failed, SLURM status is: 'TIMEOUT'" in out, out[-5000:]
    assert wait_for_accounting([job])[job] == "TIMEOUT"
    assert not (run.workdir / "slow.txt").exists()  # the half-written output is removed
    print(f"\ntime limit reported {run.seconds():.0f} s after the start")
