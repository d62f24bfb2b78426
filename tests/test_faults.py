"""Damaged inputs and interruption (issue 11): what a truncated table, Ctrl-C and SIGTERM leave behind.

- A damaged file between stages names itself and the rule that rebuilds it, is moved aside to
  <name>.damaged, and the next run rebuilds it (units, then end to end on a copy of the tiny workflow).
- A Snakemake job ends with its Snakemake (stop_with_parent); forward_stop_signals passes Ctrl-C and
  SIGTERM on to the jobs; a training stopped that way leaves a checkpoint at the step it reached, no
  model, no process, and the rerun resumes from it.

The damaged table works on a copy of the session's finished run (tests/conftest.py); the interrupted
trainings on a tokenized copy of their own, each held still until its stop signal is pending, so that a
short training suffices.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalpos.io import DamagedFileError, move_aside, read_array, read_json, read_metadata, read_table, \
    usual_mode, write_parquet
from causalpos.catalogue import paths
from causalpos.workflow.job import WRITERS_ENV, Job, run_job
from helpers import ROOT, SNAKEMAKE, copy_run, edit_config, snakemake

# ---------------------------------------------------------------- damaged files, unit


@pytest.fixture
def table(tmp_path) -> Path:
    path = tmp_path / "results" / "activations" / "nope" / "scores.parquet"
    write_parquet(pd.DataFrame({"x": np.arange(5000), "y": np.linspace(0, 1, 5000)}), path, {"seconds": 1.5})
    return path


def damage(path: Path, how: str) -> None:
    raw = path.read_bytes()
    if how == "truncated":
        raw = raw[:len(raw) // 2]
    elif how == "empty":
        raw = b""
    else:  # bytes overwritten inside a data page: only the page checksum notices
        middle = len(raw) // 3
        raw = raw[:middle] + b"\xff" * 16 + raw[middle + 16:]
    path.unlink()  # a new file, not a write into this one: in a copy of the shared run it may be a hard link
    path.write_bytes(raw)


@pytest.mark.parametrize("how", ["truncated", "empty", "overwritten"])
def test_damaged_parquet_raises_an_error_naming_it(table, how):
    damage(table, how)
    with pytest.raises(DamagedFileError, match=rf"^{re.escape(str(table))} is damaged \(") as info:
        read_table(table)
    assert info.value.path == str(table) and isinstance(info.value, ValueError)
    if how != "overwritten":  # the footer holds the schema
        with pytest.raises(DamagedFileError):
            read_metadata(table)


def test_missing_file_is_not_damaged(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_table(tmp_path / "nothing.parquet")


def test_damaged_npy_and_json_raise_an_error_naming_them(tmp_path):
    array = tmp_path / "snippets.npy"
    np.save(array, np.arange(1000).reshape(10, 100))
    assert read_array(array, mmap_mode="r").shape == (10, 100)
    array.write_bytes(array.read_bytes()[:500])
    for mmap_mode in (None, "r"):
        with pytest.raises(DamagedFileError, match=re.escape(f"{array} is damaged")):
            read_array(array, mmap_mode=mmap_mode)
    blocks = tmp_path / "blocks.json"
    blocks.write_text('{"block_len": 3')
    with pytest.raises(DamagedFileError, match=re.escape(f"{blocks} is damaged (JSONDecodeError")):
        read_json(blocks)


def test_move_aside_keeps_the_file_under_a_name_snakemake_does_not_know(table):
    original = table.read_bytes()
    assert move_aside(table) == Path(f"{table}.damaged")
    assert not table.exists() and Path(f"{table}.damaged").read_bytes() == original
    assert move_aside(table) == Path(f"{table}.damaged")  # a second job finding it moved: no error
    # ...and that job's read says so instead of "No such file"
    with pytest.raises(DamagedFileError, match="another job reading it found it damaged and moved it aside"):
        read_table(table)


def run_summary(scores, out_dir) -> None:
    run_job(Job("summary", input={"scores": [str(p) for p in scores], "probe": [str(p) for p in scores]},
                output={"nonrelativeness": str(out_dir / "nonrelativeness.parquet")}))


@pytest.fixture
def writers(table, monkeypatch):
    """The rules' outputs as the Snakefile publishes them to its jobs: rule extract writes the scores table."""
    folder = re.escape(str(table.parents[1]))
    monkeypatch.setenv(WRITERS_ENV, json.dumps([["extract", rf"{folder}/(?P<model>nope|rope)/scores\.parquet", False]]))


def test_a_job_moves_a_damaged_input_aside_and_names_the_rule_that_rebuilds_it(table, tmp_path, writers):
    damage(table, "truncated")
    expected = (rf"^{re.escape(str(table))} is damaged \(ArrowInvalid: .*\); moved to {re.escape(str(table))}"
                rf"\.damaged\. Rule extract rebuilds it: run the same snakemake command again\.$")
    with pytest.raises(DamagedFileError, match=expected):
        run_summary([table], tmp_path / "summary")
    assert not table.exists() and Path(f"{table}.damaged").exists()
    assert not (tmp_path / "summary").exists()


def test_an_input_no_rule_writes_is_moved_aside_without_a_rule(table, tmp_path):
    damage(table, "truncated")  # no Snakefile published the rules' outputs: a job run by hand
    with pytest.raises(DamagedFileError, match=r"moved to .*\.damaged\. Rerun the step that writes it\.$"):
        run_summary([table], tmp_path / "summary")


def test_a_damaged_link_into_the_cache_says_so(table, tmp_path, writers):
    cached = tmp_path / "cache" / "entry"
    cached.parent.mkdir()
    shutil.move(table, cached)
    table.symlink_to(cached)
    damage(cached, "truncated")
    with pytest.raises(DamagedFileError, match=rf"It was a link to {re.escape(str(cached))} \(the between-workflow "
                                               r"cache\): delete that file too\."):
        run_summary([table], tmp_path / "summary")
    assert cached.exists() and Path(f"{table}.damaged").is_symlink()


def test_usual_mode_gives_files_and_folders_what_open_and_mkdir_give(tmp_path):
    mask = os.umask(0o027)
    try:
        folder = tmp_path / "model"
        folder.mkdir(mode=0o700)
        (folder / "sub").mkdir(mode=0o700)
        for path in (folder / "model.safetensors", folder / "sub" / "x.json"):
            path.write_text("x")
            path.chmod(0o600)
        usual_mode(folder)
        modes = {p.relative_to(tmp_path).as_posix(): p.stat().st_mode & 0o777 for p in [folder, *folder.rglob("*")]}
        assert modes == {"model": 0o750, "model/sub": 0o750, "model/model.safetensors": 0o640,
                         "model/sub/x.json": 0o640}
    finally:
        os.umask(mask)


# ---------------------------------------------------------------- stopping jobs, unit

SRC = str(ROOT / "src")


def default_stop_signals() -> None:
    """In a child: SIGINT and SIGTERM as a terminal's job gets them. A shell script's `cmd &` (and nohup)
    starts pytest with SIGINT ignored, which every child would inherit; these tests are about the signals."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def python(code: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen([sys.executable, "-c", code], env=env, text=True, stdout=subprocess.PIPE,
                            preexec_fn=default_stop_signals, **kwargs)


def test_forward_stop_signals_sends_sigterm_to_the_jobs_then_calls_the_previous_handler():
    proc = python(
        "import os, signal, subprocess, sys, time\n"
        "from causalpos.workflow.job import forward_stop_signals\n"
        "job = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "signal.signal(signal.SIGTERM, lambda s, f: print('previous handler', flush=True))\n"
        "forward_stop_signals()\n"  # its jobs: this process's children
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "print('job ended', job.wait(timeout=10), flush=True)\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(5)\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt', flush=True)\n")
    out, _ = proc.communicate(timeout=30)
    assert out.splitlines() == ["previous handler", f"job ended {-signal.SIGTERM}", "KeyboardInterrupt"]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_job_ends_when_its_parent_dies(tmp_path):
    """What a job's JobLog does: the job gets SIGTERM when its Snakemake is killed (SIGKILL, a crash)."""
    job = ("import time; from causalpos.runtime.processes import stop_with_parent; stop_with_parent(); "
           "print('ready', flush=True); time.sleep(60)")
    parent = python(f"import subprocess, sys; job = subprocess.Popen([sys.executable, '-c', {job!r}]); "
                    "print(job.pid, flush=True); job.wait()", start_new_session=True)
    child = int(parent.stdout.readline())
    assert parent.stdout.readline() == "ready\n"  # the job's own line, through the stdout it inherited
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    still = alive(child)
    if still:
        os.kill(child, signal.SIGKILL)
    assert not still, "the job outlived its parent"


@pytest.mark.parametrize("fails", [False, True], ids=["succeeds", "fails"])
def test_a_job_skips_the_final_collection_and_keeps_its_log_and_exit_status(tmp_path, fails):
    """JobLog ends a job with gc.freeze() (causalpos.runtime.processes): the log still gets every record and
    a failing stage's traceback, and the process's exit status is the stage's; garbage made after the
    freeze is still collected (the freeze does not switch collection off)."""
    log = tmp_path / "logs" / "job.log"
    job = ("import gc, weakref; from causalpos.workflow.job import JobLog, log\n"
           "class Cycle: pass\n"
           f"with JobLog({str(log)!r}):\n"
           "    log.info('the last record')\n"
           f"    if {fails}: raise RuntimeError('the stage broke')\n"
           "assert gc.get_freeze_count() > 0\n"
           "a = Cycle(); a.me = a; gone = weakref.ref(a); del a\n"
           "gc.collect(); assert gone() is None\n"
           "print('after the stage', flush=True)\n")
    done = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=60)
    text = log.read_text()
    assert "INFO the last record" in text
    if fails:
        assert done.returncode == 1 and "RuntimeError: the stage broke" in done.stderr
        assert "ERROR job failed" in text and "RuntimeError: the stage broke" in text
    else:
        assert done.returncode == 0 and done.stdout == "after the stage\n", done.stderr


# ---------------------------------------------------------------- a damaged table, end to end


@pytest.mark.workflow
def test_truncated_simulation_table_is_named_moved_aside_and_rebuilt(finished_copy):
    workdir = finished_copy  # of the session's finished run, with the default profile
    relative = paths.simulation_table("l2_alpha0.2")  # read by fig02, fig06, the claims and the run times
    table = workdir / relative
    original = pd.read_parquet(table)
    figures = [workdir / p for p in paths.figure_files("fig02_l2norm", ["pdf", "png"])]
    damage(table, "truncated")

    failed = snakemake(workdir, "all_figures", check=False)
    shown = failed.stdout + failed.stderr
    assert failed.returncode != 0
    # from whichever job read it first (fig02, fig06, claims, runtimes); the others say it was moved
    message = f"{relative} is damaged (ArrowInvalid: "
    advice = f"moved to {relative}.damaged. Rule simulate rebuilds it: run the same snakemake command again."
    assert message in shown and advice in shown, shown[-6000:]
    assert "Traceback" not in shown, shown[-6000:]  # a message that says what to do: one line (issue 28)
    assert [log for log in (workdir / "results" / "logs").rglob("*.log") if advice in log.read_text()]  # the job's log too
    assert not table.exists() and Path(f"{table}.damaged").exists()

    rebuilt = snakemake(workdir, "all_figures", check=False)
    shown = rebuilt.stdout + rebuilt.stderr
    assert rebuilt.returncode == 0, shown[-6000:]
    assert "rule simulate:" in shown and "wildcards: variant=l2_alpha0.2" in shown
    pd.testing.assert_frame_equal(pd.read_parquet(table), original)  # the simulation is seeded
    assert all(path.stat().st_size > 1000 for path in figures)
    assert "Nothing to be done" in snakemake(workdir, "all_figures").stderr


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
    """Processes running this copy's train job script (Snakemake runs .snakemake/scripts/tmpXXX.train.py)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(workdir).encode() in a and a.endswith(b".train.py") for a in args):
            found.append(int(cmdline.parent.name))
    return [pid for pid in found if alive(pid)]


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
        proc = subprocess.Popen([SNAKEMAKE, "--cores", "2", TRAIN_TARGET], cwd=workdir, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(workdir / "src")},
                                start_new_session=True,  # its own process group, like a shell's job
                                preexec_fn=default_stop_signals)
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


@pytest.mark.workflow
@pytest.mark.skipif(not HOOKED, reason="needs `onstart: forward_stop_signals()` in the rules (issue 11)")
def test_ctrl_c_sigint_and_sigterm_each_stop_training_with_a_checkpoint_and_each_rerun_resumes(tokenized, tmp_path):
    """Three stops of one training under Snakemake, each rerun resuming from the checkpoint the stop before it
    wrote: a terminal's Ctrl-C (SIGINT to the whole foreground process group, Snakemake and its jobs), then
    `kill -INT` and `kill -TERM` to Snakemake's process only (a supervisor, a batch system). The last rerun
    completes the training."""
    workdir = copy_run(tokenized, tmp_path / "copy")
    stops = [(lambda proc: os.killpg(proc.pid, signal.SIGINT), "SIGINT|SIGTERM"),  # the terminal's SIGINT, or
             (lambda proc: proc.send_signal(signal.SIGINT), "SIGTERM"),  # the SIGTERM Snakemake's handler sends
             (lambda proc: proc.send_signal(signal.SIGTERM), "SIGTERM")]
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
