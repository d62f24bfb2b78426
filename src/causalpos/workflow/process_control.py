"""What a job process needs around its stage's runner: its log in the file Snakemake's log: names, and an end
when the workflow ends (Ctrl-C or SIGTERM to Snakemake reach its jobs; a job dies with its Snakemake).

Kept apart from workflow.runners: none of this decides a result, so none of it enters a code digest.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from causalpos.process_exit import skip_final_collection

log = logging.getLogger("causalpos")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class JobLog:
    """Around a Snakemake job's stage: send its log records (and any traceback) to `path`, as Snakemake's
    log: wants; stop the job when Snakemake dies (stop_with_parent); at the end, with the job's work done,
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
        return False


# ---------------------------------------------------------------- stopping jobs


def run_stoppable(command: list[str]) -> int:
    """Run `command` (torchrun) to its end and pass it the first SIGTERM or SIGINT this process gets.

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
        return proc.wait()


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
