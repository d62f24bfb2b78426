"""What a job process needs around its stage's runner: its log in the file Snakemake's log: names, an end
when the workflow ends (Ctrl-C or SIGTERM to Snakemake reach its jobs; a job dies with its Snakemake), and one
writer per output folder (a training run by hand beside the same Snakemake job is refused).

Kept apart from workflow.runners: none of this decides a result. Only run_train imports it (run_stoppable,
one_writer), so it enters that stage's code digest alone.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from causalpos.errors import UserError
from causalpos.process_exit import skip_final_collection
from causalpos.workflow.user_errors import is_user_error, report_job_error

log = logging.getLogger("causalpos")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class JobLog:
    """Around a Snakemake job's stage: send its log records (and any traceback) to `path`, as Snakemake's
    log: wants; a UserError ends the job with its message in one line on stderr (workflow.user_errors); stop the job when Snakemake dies (stop_with_parent); at the end, with the job's work done,
    spare its process the final garbage collection (causalpos.process_exit)."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        stop_with_parent()
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self.handler = logging.FileHandler(self.path, mode="w")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(self.handler)
        log.setLevel(logging.INFO)
        job = os.environ.get("SLURM_JOB_ID")
        if job:
            log.info("SLURM job id %s on %s", job, os.environ.get("SLURMD_NODENAME", "?"))
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None:
            log.error("stage failed", exc_info=(exc_type, exc, tb))
        log.removeHandler(self.handler)
        self.handler.close()
        skip_final_collection()
        if is_user_error(exc):  # a message that says what to do: one line on the console, the traceback in the log
            report_job_error(exc, self.path)
            raise SystemExit(1) from None
        return False


# ---------------------------------------------------------------- one writer per output folder


class OutputLocked(UserError):
    """Another process is writing the same output folder (a CLI command beside a Snakemake job, say)."""


def lock_file(folder) -> Path:
    """The lock of an output folder: a hidden file beside it (inside, it would be part of a directory output)."""
    folder = Path(folder)
    return folder.parent / f".{folder.name}.lock"


@contextmanager
def one_writer(folder, what: str):
    """Hold the lock of `folder` while the block writes it, or raise OutputLocked at once naming the holder.

    An advisory flock on lock_file(folder): Snakemake's own lock covers two Snakemakes in one working folder,
    not `causalpos train` run beside its job, nor two working folders sharing a results folder. The kernel
    drops it when its process dies, so a kill -9 leaves nothing to clean up; the file stays, unlocked."""
    path = lock_file(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise OutputLocked(f"{folder} is being written by another process ({what}, pid {holder}, lock {path}); "
                               f"wait for it to end or stop it, then run this again") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ---------------------------------------------------------------- stopping jobs


def run_stoppable(command: list[str]) -> int:
    """Run `command` (torchrun) to its end and pass it the first SIGTERM or SIGINT this process gets; return
    its exit status, or raise StoppedBySignal where that signal stopped it.

    Its own session keeps a terminal's Ctrl-C from reaching it a second time (torchrun cuts its shutdown
    short on a second signal); it gets SIGTERM if this process dies; and unlike subprocess.run, no
    SIGKILL on an interrupt, which would orphan the ranks (torchrun starts them in sessions of their own)."""
    proc = subprocess.Popen(command, start_new_session=True, preexec_fn=_parent_death_signal())
    forwarded = []

    def forward(signum, frame):
        if not forwarded:
            forwarded.append(signum)
            proc.send_signal(signum)

    with _handling(forward):
        code = proc.wait()
    if code and forwarded:  # expected: the ranks wrote their checkpoints (models.train); no traceback to show
        raise StoppedBySignal(f"stopped by {signal.Signals(forwarded[0]).name} (torchrun exit status {code}); "
                              f"the checkpoint of the last step reached is written: run the same command again "
                              f"to resume from it")
    return code


class StoppedBySignal(UserError):
    """SIGTERM or SIGINT, passed on by run_stoppable, stopped the command it ran."""


@contextmanager
def _handling(handler, signals=(signal.SIGTERM, signal.SIGINT)):
    """`handler` for `signals` while the block runs, but for those ignored (nohup, `cmd &` in a script)."""
    previous = {sig: signal.signal(sig, handler) for sig in signals if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


def _parent_death_signal(sig=signal.SIGTERM):
    """A preexec_fn by which Linux sends the child `sig` when its parent dies (None elsewhere). prctl is
    looked up here, before the fork: the child of a threaded process should do no more than call it."""
    prctl = _prctl()
    return None if prctl is None else functools.partial(prctl, PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def stop_with_parent(sig=signal.SIGTERM) -> None:
    """Have Linux send this process `sig` when its parent (Snakemake) dies, so no job outlives a killed
    workflow; a training takes SIGTERM as a cue to checkpoint and stop. Does nothing off Linux."""
    prctl = _prctl()
    if prctl is None:
        return
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), sig)


def forward_stop_signals(local: bool = True, jobs=None) -> None:
    """Make Ctrl-C and SIGTERM to Snakemake stop its running jobs: call it in the Snakefile's onstart with
    `workflow.local_exec` (a cluster executor cancels its jobs itself, and its children are sbatch and
    squeue calls, never to be signalled).

    Snakemake 9 never signals its local jobs itself: on SIGINT it waits for them to end (and a second
    Ctrl-C makes it exit and leaves them running), on SIGTERM it lets them finish, by design. So this
    handler first sends SIGTERM to each job process (`jobs()`: pids, default this process's children:
    a local Snakemake starts nothing else while jobs run), then does what Snakemake's handler does. A
    training writes a checkpoint and stops; a job in a shell wrapper follows its shell (stop_with_parent)."""
    if not local:
        return
    jobs = jobs or (lambda: _children(os.getpid()))
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if previous not in (signal.SIG_IGN, None):
            signal.signal(sig, functools.partial(_stop_jobs, jobs, previous))


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc; none elsewhere)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:  # the field after the state
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    return found


def _stop_jobs(jobs, previous, signum, frame) -> None:
    for pid in jobs():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    if previous is signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    else:
        previous(signum, frame)
