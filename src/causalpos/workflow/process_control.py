"""What a job process needs around its stage's runner: its log in the file Snakemake's log: names, an end
when the workflow ends (Ctrl-C or SIGTERM to Snakemake reach its jobs; a job dies with its Snakemake), and one
writer per output folder (a training run by hand beside the same Snakemake job is refused).

Kept apart from workflow.runners: none of this decides a result. Only run_train imports it (run_stoppable,
one_writer), so it enters that stage's code digest alone.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
from pathlib import Path

from causalpos.runtime.processes import skip_final_collection, stop_with_parent
from causalpos.workflow.user_errors import is_user_error, report_job_error

log = logging.getLogger("causalpos")


class JobLog:
    """Around a Snakemake job's stage: send its log records (and any traceback) to `path`, as Snakemake's
    log: wants; a UserError ends the job with its message in one line on stderr (workflow.user_errors); stop the job when Snakemake dies (stop_with_parent); at the end, with the job's work done,
    spare its process the final garbage collection (causalpos.runtime.processes)."""

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


# ---------------------------------------------------------------- stopping jobs


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
