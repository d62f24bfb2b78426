"""Damaged inputs and interruption (issue 11), end to end on copies of the session's finished tiny run
(tests/conftest.py): a truncated table is named, moved aside and rebuilt; a training stopped by Ctrl-C, SIGINT or
SIGTERM leaves a checkpoint at the step it reached, no model, no process, and the rerun resumes from it (each held
still until its stop signal is pending, so that a short training suffices). Job by job:
tests/integration/test_faults.py.
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

from causalpos import checksums
from causalpos.catalogue import paths
from helpers import ROOT, SNAKEMAKE, alive, copy_run, damage, default_stop_signals, edit_config, job_rule, snakemake

pytestmark = pytest.mark.workflow


# ---------------------------------------------------------------- a damaged table, end to end


# over 20 s (~20 s): two runs of fig02 on a copy, the failing one and the rebuild (a simulation and a figure)
@pytest.mark.workflow
def test_truncated_simulation_table_is_named_moved_aside_and_rebuilt(finished_copy):
    workdir = finished_copy  # of the session's finished run, with the default profile
    relative = paths.simulation_table("l2_alpha0.2")  # read by fig02, fig06, the claims and the run times
    table = workdir / relative
    original = pd.read_parquet(table)
    figures = [workdir / p for p in paths.figure_files("fig02_l2norm", ["pdf", "png"])]
    # fig02 alone: one reader is enough to name the damage and move the file aside, and its rebuild is the
    # simulation and this figure (all_figures would also redraw the ledger, which reads every simulation)
    target = [str(p.relative_to(workdir)) for p in figures]
    damage(table, "truncated")
    # Its record would show the damage first, when Snakemake plans (tests/workflow/test_nothing_stale.py); without
    # one (a file made before records, or by hand) the reader's own check of the format names it
    checksums.forget(table)

    failed = snakemake(workdir, *target, check=False)
    shown = failed.stdout + failed.stderr
    assert failed.returncode != 0
    message = f"{relative} is damaged (ArrowInvalid: "
    advice = f"moved to {relative}.damaged. Rule simulate rebuilds it: run the same snakemake command again."
    assert message in shown and advice in shown, shown[-6000:]
    assert "Traceback" not in shown, shown[-6000:]  # a message that says what to do: one line (issue 28)
    assert [
        log for log in (workdir / "results" / "logs").rglob("*.log") if advice in log.read_text()
    ]  # the job's log too
    assert not table.exists() and Path(f"{table}.damaged").exists()

    rebuilt = snakemake(workdir, *target, check=False)
    shown = rebuilt.stdout + rebuilt.stderr
    assert rebuilt.returncode == 0, shown[-6000:]
    assert "rule simulate:" in shown and "wildcards: variant=l2_alpha0.2" in shown
    pd.testing.assert_frame_equal(pd.read_parquet(table), original)  # the simulation is seeded
    assert all(path.stat().st_size > 1000 for path in figures)
    assert "Nothing to be done" in snakemake(workdir, *target).stderr


# ---------------------------------------------------------------- interrupted training, end to end

TRAIN_TARGET = paths.model_file("nope", "model.safetensors")
# the training is held (SIGSTOP) from its first logged row until the stop signal is pending, so it cannot
# end first however long the signal takes: a few seconds of steps are enough (~50-100 steps/s on one core);
# no periodic checkpoint: the only one is what the stop writes
LONG_TRAINING = {"steps": 100, "checkpoint_every": 0, "eval_every": 50, "log_every": 5, "threads": 1}
STOP_SIGNALS = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))  # their bits in /proc/PID/status
STEP_LINE = re.compile(r"nope step ([1-9]\d*)/")  # a row after training steps (step 0: the untrained model)
RESUMED = re.compile(r"nope: resuming from (\S+) at step (\d+)")
# the rules call forward_stop_signals in onstart (issue 11); without it Snakemake alone never signals its jobs
HOOKED = any("forward_stop_signals" in path.read_text() for path in [ROOT / "Snakefile", *ROOT.glob("rules/*.smk")])


@pytest.fixture(scope="module")
def tokenized(finished_run, tmp_path_factory) -> Path:
    """A copy of the session's finished run with LONG_TRAINING: its tokens are there, its training is to do
    (the finished training's model, checkpoints and log are removed: the tests look for this one's)."""
    workdir = copy_run(finished_run, tmp_path_factory.mktemp("interrupt") / "copy")
    edit_config(workdir, lambda config: config["training"].update(LONG_TRAINING))
    shutil.rmtree(workdir / paths.model_dir("nope"))
    shutil.rmtree(workdir / paths.checkpoints_dir())
    (workdir / "results" / "logs" / "train" / "nope.log").unlink()
    return workdir


def train_processes(workdir: Path) -> list[int]:
    """Processes running a train job of this copy (Snakemake runs .snakemake/scripts/tmpXXX.job.py)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(workdir).encode() in a for a in args) and job_rule(args) == "train":
            found.append(int(cmdline.parent.name))
    return [pid for pid in found if alive(pid)]


def state(pid: int) -> str:
    """The process's state letter (/proc/PID/stat): T when stopped by a signal; "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def pending_signals(pid: int) -> int:
    """The signals sent to the process and not yet handled (ShdPnd of /proc/PID/status), as a bit mask."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("ShdPnd:"):
            return int(line.split()[1], 16)
    return 0


def interrupt_training(workdir: Path, send) -> tuple[int, str]:
    """Start the training under snakemake in `workdir`; once its log shows steps, hold the training (SIGSTOP),
    `send(snakemake)` and let it go on (SIGCONT) once a stop signal is pending for it. Return the step the log
    reached and snakemake's output. Fails if a train process is left 30 s later."""
    log = workdir / "results" / "logs" / "train" / "nope.log"
    log.unlink(missing_ok=True)  # the run before's: the steps looked for are this run's
    out_path = workdir / "snakemake.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [SNAKEMAKE, "--cores", "2", TRAIN_TARGET],
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(workdir / "src")},
            start_new_session=True,  # its own process group, like a shell's job
            preexec_fn=default_stop_signals,
        )
    held = []
    try:
        deadline = time.monotonic() + 300
        while not (log.exists() and STEP_LINE.search(log.read_text())):
            assert proc.poll() is None, out_path.read_text()[-5000:]
            assert time.monotonic() < deadline, f"no training steps after 300 s:\n{out_path.read_text()[-5000:]}"
            time.sleep(0.02)
        held = train_processes(workdir)
        for pid in held:
            os.kill(pid, signal.SIGSTOP)
        # stopped before the signal comes: a SIGINT arriving while SIGSTOP is still pending is taken first (the
        # lower number), so its handler would run and leave nothing pending to see (a race on a loaded machine)
        deadline = time.monotonic() + 60
        while not all(state(pid) in ("T", "t") for pid in held):
            assert time.monotonic() < deadline, f"the training {held} did not stop on SIGSTOP in 60 s"
            time.sleep(0.01)
        send(proc)
        deadline = time.monotonic() + 60
        while not all(pending_signals(pid) & STOP_SIGNALS for pid in held):
            assert time.monotonic() < deadline, "no stop signal reached the training in 60 s"
            time.sleep(0.02)
        for pid in held:
            os.kill(pid, signal.SIGCONT)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while train_processes(workdir) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = train_processes(workdir)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in train_processes(workdir):
            os.kill(pid, signal.SIGKILL)
    output = out_path.read_text()
    assert held, f"no train process to hold:\n{output[-5000:]}"
    assert not left, f"train processes {left} still running 30 s after snakemake ended:\n{output[-5000:]}"
    assert proc.returncode != 0, output[-5000:]
    reached = max(int(m.group(1)) for m in STEP_LINE.finditer(log.read_text()))
    return reached, output


def assert_stopped(workdir: Path, reached: int, signames: str) -> tuple[int, Path]:
    """No model; a checkpoint at or after the step the log reached, named by the log: (its step, its path)."""
    from causalpos.models.train import load_checkpoint

    log = workdir / "results" / "logs" / "train" / "nope.log"
    assert not (workdir / TRAIN_TARGET).exists()
    (checkpoint,) = workdir.glob(f"{paths.checkpoints_dir()}/nope/*/last.ckpt")
    step = load_checkpoint(checkpoint)["step"]
    assert reached <= step < LONG_TRAINING["steps"]
    assert re.search(rf"stopped by (?:{signames}) at step {step}; checkpoint", log.read_text())
    return step, checkpoint


def assert_resumed(workdir: Path, step: int, checkpoint: Path, output: str) -> None:
    """This run's log resumed from `checkpoint` at `step`; Snakemake ran train again, not what lies before it."""
    log = (workdir / "results" / "logs" / "train" / "nope.log").read_text()
    resumed = RESUMED.search(log)
    assert resumed and int(resumed.group(2)) == step, log[:3000]
    assert Path(resumed.group(1)) == checkpoint.relative_to(workdir)
    assert "rule train:" in output  # Snakemake 9 reports jobs on stderr
    assert "rule sample:" not in output and "rule tokenizer:" not in output


# over 20 s (~25 s): three stopped trainings under Snakemake and their resumed reruns
@pytest.mark.workflow
@pytest.mark.skipif(not HOOKED, reason="needs `onstart: forward_stop_signals()` in the rules (issue 11)")
def test_ctrl_c_sigint_and_sigterm_each_stop_training_with_a_checkpoint_and_each_rerun_resumes(tokenized, tmp_path):
    """Three stops of one training under Snakemake, each rerun resuming from the checkpoint the stop before it
    wrote: a terminal's Ctrl-C (SIGINT to the whole foreground process group, Snakemake and its jobs), then
    `kill -INT` and `kill -TERM` to Snakemake's process only (a supervisor, a batch system). The last rerun
    completes the training."""
    workdir = copy_run(tokenized, tmp_path / "copy")
    stops = [
        (lambda proc: os.killpg(proc.pid, signal.SIGINT), "SIGINT|SIGTERM"),  # the terminal's SIGINT, or
        (lambda proc: proc.send_signal(signal.SIGINT), "SIGTERM"),  # the SIGTERM Snakemake's handler sends
        (lambda proc: proc.send_signal(signal.SIGTERM), "SIGTERM"),
    ]
    stopped = None
    for send, signames in stops:
        reached, output = interrupt_training(workdir, send)
        # an expected stop: one line saying so on the console, its traceback in the log alone (issue 28)
        assert re.search(r"stopped by SIG(?:INT|TERM) at step \d+; checkpoint \S+ written", output), output[-5000:]
        assert "Traceback" not in output, output[-5000:]
        if stopped:
            assert_resumed(workdir, *stopped, output)
        stopped = assert_stopped(workdir, reached, signames)
    rerun = snakemake(workdir, TRAIN_TARGET)
    assert_resumed(workdir, *stopped, rerun.stderr)
    metrics = pd.read_parquet(workdir / paths.model_file("nope", "metrics.parquet"))
    assert metrics["step"].iloc[-1] == LONG_TRAINING["steps"] and metrics["step"].is_unique
