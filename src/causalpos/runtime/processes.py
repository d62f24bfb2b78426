"""What a job's process needs of the operating system: one writer per output folder, a child command that stops
when asked, an end when its parent (Snakemake) dies, and a quick exit.

None of this decides a result. Snakemake's side of the same (a job's log, Ctrl-C reaching the jobs) is in
causalpos.workflow.job.
"""

from __future__ import annotations

import fcntl
import functools
import gc
import os
import select
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from causalpos.errors import UserError

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def skip_final_collection() -> None:
    """Skip the interpreter's last garbage collection; call when the process's work is done and it is about to exit.

    A process that has imported torch and transformers holds a few million objects, and at exit the interpreter
    walks them all once more: about 1 s of CPU, though the operating system frees the memory anyway. gc.freeze()
    puts them out of the collector's reach; objects are still released by reference count and atexit handlers
    (logging's flush) still run."""
    gc.freeze()


# ---------------------------------------------------------------- one writer per output folder


class OutputLocked(UserError):
    """Another process is writing the same output folder (a CLI command beside a Snakemake job, say)."""


def lock_file(folder) -> Path:
    """The lock of an output folder: a hidden file beside it (inside, it would be part of a directory output)."""
    folder = Path(folder)
    return folder.parent / f".{folder.name}.lock"


@contextmanager
def one_writer(folder, what: str):
    """Hold the lock of `folder` (a folder or a file a job writes) while the block writes it, or raise OutputLocked
    at once naming the holder.

    An advisory flock on lock_file(folder): Snakemake's own lock covers two Snakemakes in one working folder,
    not two working folders sharing a results folder, nor a script beside a job. The kernel drops it when its
    process dies, so a kill -9 leaves nothing locked (only the file, which the next holder takes over); a holder
    that ends removes it, and the folder it made for it if that is still empty, so nothing is left beside the
    outputs. A lock file removed between another process's open and its flock is not the lock: that process
    looks again."""
    path = lock_file(folder)
    made = None if path.parent.exists() else path.parent
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fh = open(path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise OutputLocked(
                f"{folder} is being written by another process ({what}, pid {holder}, lock {path}); "
                f"wait for it to end or stop it, then run this again"
            ) from None
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fh.fileno()).st_ino:
            break
        fh.close()  # removed by the holder that just ended: lock the file that is there now
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield
    finally:
        path.unlink(missing_ok=True)  # before the unlock: whoever opens it next makes a new one
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()
        if made is not None:
            try:
                made.rmdir()
            except OSError:  # not empty: the block wrote into it
                pass


# ---------------------------------------------------------------- stopping


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
        raise StoppedBySignal(
            f"stopped by {signal.Signals(forwarded[0]).name} (torchrun exit status {code}); "
            f"the checkpoint of the last step reached is written: run the same command again "
            f"to resume from it"
        )
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


SNAKEMAKE_PID_ENV = "CAUSALPOS_SNAKEMAKE_PID"  # set by the Snakefile: the pid of the Snakemake that starts the jobs


def stop_with_parent(sig=signal.SIGTERM) -> None:
    """Have this process get `sig` when Snakemake dies, so no job outlives a killed workflow; a training takes
    SIGTERM as a cue to checkpoint and stop. Does nothing off Linux.

    Called first thing in a job (workflow_scripts/job.py), before the heavy imports. Linux signals the death of
    the parent (prctl); the pid the Snakefile put in the environment also catches a Snakemake that died before
    this call (in its preamble of the script), and one with a process between it and the job (a conda
    environment's shell), which a thread then watches."""
    prctl = _prctl()
    if prctl is None:
        return
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    snakemake = os.environ.get(SNAKEMAKE_PID_ENV, "")
    if not snakemake.isdigit():
        if os.getppid() != parent:  # it died before the request took effect
            os.kill(os.getpid(), sig)
        return
    snakemake = int(snakemake)
    if not _alive(snakemake) or os.getppid() == 1:
        os.kill(os.getpid(), sig)
    elif snakemake != os.getppid():
        threading.Thread(target=_signal_when_ended, args=(snakemake, sig), daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


def _signal_when_ended(pid: int, sig) -> None:
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # ended already
        os.kill(os.getpid(), sig)
        return
    select.select([fd], [], [])  # readable when the process ends
    os.kill(os.getpid(), sig)
