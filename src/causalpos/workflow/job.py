"""Running one job of a rule: its log, its errors, its damaged inputs, and Ctrl-C reaching it.

Every rule's script is workflow_scripts/job.py, which calls `run_job(snakemake)`: the job module of the rule
(causalpos.jobs.<rule>, whose `run(job)` reads job.input, job.output, job.params, job.wildcards, job.threads) runs
inside JobLog. Where Snakemake is not the caller (bench scripts on a GPU node, tests), `Job(...)` stands in for
Snakemake's `snakemake` object. None of this decides a result: the rules' code digests leave it out.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
import re
import signal
from contextlib import nullcontext
from pathlib import Path

from causalpos import checksums
from causalpos.io import DamagedFileError, move_aside
from causalpos.runtime.processes import one_writer, skip_final_collection
from causalpos.workflow.digest import job_module
from causalpos.workflow.user_errors import is_user_error, report_job_error

log = logging.getLogger("causalpos")
WRITERS_ENV = "CAUSALPOS_WRITERS"  # the rules' output patterns, set by the Snakefile (rules/common.smk)
JOBS_ENV = "CAUSALPOS_JOBS"  # {rule name in the running workflow: its job module}, where another workflow renames it


class Files(list):
    """Values in order, read by position, as attributes or by name (`files[0]`, `files.model`, `files["model"]`,
    `files.items()`): Snakemake's Namedlist as the job modules read it, without Snakemake."""

    def __init__(self, named=None):
        named = dict(named or {})
        super().__init__(named.values())
        self.names = list(named)

    def __getattr__(self, name):
        names = self.__dict__.get("names", [])
        if name not in names:
            raise AttributeError(name)
        return self[names.index(name)]

    def __getitem__(self, key):
        return getattr(self, key) if isinstance(key, str) else super().__getitem__(key)

    def keys(self):
        return list(self.names)

    def items(self):
        return list(zip(self.names, self))

    def get(self, name, default=None):
        return self[name] if name in self.names else default


class Job:
    """A job as a rule's script sees it (Snakemake's `snakemake` object): rule, input, output, params, wildcards
    (given as dicts, read as Snakemake's Namedlists are), threads, log. For running a job module without Snakemake:
    bench scripts on a GPU node, tests."""

    def __init__(self, rule: str, input=None, output=None, params=None, wildcards=None, threads: int = 1, log=None):
        self.rule, self.threads = rule, threads
        self.input, self.output = Files(input), Files(output)
        self.params, self.wildcards = Files(params), Files(wildcards)
        self.log = [log] if log else []


def run_job(job) -> None:
    """Run the job module of `job.rule` on `job` inside its JobLog (where the job has a log). A rule renamed by a
    workflow that uses this one as a module (causalpos_train) runs the module of its own name (train)."""
    rule = json.loads(os.environ.get(JOBS_ENV) or "{}").get(job.rule, job.rule)
    module = importlib.import_module(job_module(rule))
    with JobLog(job.log[0]) if job.log else nullcontext(), one_job_writing(job):
        try:
            for output in flat(job.output):  # a job that fails leaves no record of the outputs it was to write
                checksums.forget(output)
            check_inputs(flat(job.input))
            module.run(job)
        except DamagedFileError as err:
            raise moved_aside(err) from err
        for output in flat(job.output):
            checksums.write_record(output, job.rule, flat(job.input))


def flat(items) -> list[str]:
    """The paths of a nest of lists: a job's inputs or outputs (Snakemake's Namedlist is flat already, a Job's may
    hold lists, and None for an input a config leaves out), a target rule's input (lists of paths, rules' outputs)."""
    if items is None:
        return []
    if isinstance(items, (str, os.PathLike)):
        return [str(items)]
    return [path for item in items for path in flat(item)]


def one_job_writing(job):
    """Hold the lock of the job's first output while it runs (runtime.processes.one_writer): a second job writing
    the same outputs (another Snakemake on the same results folder, a bench script) is refused at once, naming the
    first. Two jobs that share an output share the first one: Snakemake lets one rule write a file."""
    outputs = flat(job.output)
    if not outputs:
        return nullcontext()
    return one_writer(outputs[0], f"a job of rule {job.rule}")


def check_inputs(inputs) -> None:
    """Raise DamagedFileError for the first input that is not what its job wrote (causalpos.checksums: every
    byte hashed, a flipped bit included); inputs without a record pass."""
    for path in inputs:
        found = checksums.damage(path, full=True)
        if found and found != "missing":  # a missing input: Snakemake's own message comes first
            raise DamagedFileError(path, found)


class JobLog:
    """Around a Snakemake job: send its log records (and any traceback) to `path`, as Snakemake's log: wants; a
    UserError ends the job with its message in one line on stderr (workflow.user_errors); at the end spare its
    process the final garbage collection. (The job's end with Snakemake comes before, in workflow_scripts/job.py:
    runtime.processes.stop_with_parent.)"""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
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
            log.error("job failed", exc_info=(exc_type, exc, tb))
        log.removeHandler(self.handler)
        self.handler.close()
        skip_final_collection()
        if is_user_error(exc):  # a message that says what to do: one line on the console, the traceback in the log
            report_job_error(exc, self.path)
            raise SystemExit(1) from None
        return False


# ---------------------------------------------------------------- a damaged input


def writer_patterns() -> list[tuple[str, str, bool]]:
    """(rule, regular expression of an output, whether it is a directory()) of every rule of the running workflow,
    as the Snakefile put them in the environment; none outside Snakemake."""
    return [tuple(item) for item in json.loads(os.environ.get(WRITERS_ENV) or "[]")]


def writer_of(path) -> tuple[str, bool] | None:
    """(rule, is a directory() output) of the rule whose output `path` is, or None."""
    text = os.path.normpath(str(path))
    for rule, regex, is_directory in writer_patterns():
        if re.fullmatch(regex, text):
            return rule, is_directory
    return None


def moved_aside(err: DamagedFileError) -> DamagedFileError:
    """Move the damaged input aside (to <name>.damaged, kept for a look; missing, so Snakemake reruns the rule that
    writes it) and say which rule that is. Without this the file stays, every run fails on it again, and each
    failed job deletes its outputs. A file inside a directory() output (a snapshot, a converted pretrained model)
    goes with its whole folder; a model's or tokenizer's file that its rule does not declare
    (models.model_files: generation_config.json) with the folder's file that it does. A model folder that no rule
    writes (the config's `path:`) is the user's: left where it is."""
    from causalpos.models.model_files import move_folder_aside

    found = writer_of(err.path)
    folder = os.path.dirname(err.path)
    in_folder = writer_of(folder) if found is None else None
    companion = getattr(err, "companion", None)
    if found is None and companion and os.path.lexists(companion):
        found = writer_of(companion)
    if found is None and not (in_folder and in_folder[1]):
        if hasattr(err, "companion"):  # a model folder the config names (path:), not a result
            return DamagedFileError(err.path, err.reason, "no rule of the workflow writes it: replace it.")
        return DamagedFileError(
            err.path, err.reason, f"moved to {move_aside(err.path)}. Rerun the step that writes it."
        )
    rebuilt = "it"
    if in_folder and in_folder[1]:  # inside a directory() output, whose files Snakemake does not check
        rule = in_folder[0]
        link = os.readlink(folder) if os.path.islink(folder) else None
        advice = f"moved its folder {folder} (an output of rule {rule}) to {move_folder_aside(folder)}. "
        what = "folder"
    else:
        rule = found[0]
        link = os.readlink(err.path) if os.path.islink(err.path) else None
        if found[1]:  # a directory() output, damaged as a whole (its record: causalpos.checksums)
            moved, what = move_folder_aside(err.path), "folder"
        else:
            moved, what = move_aside(err.path), "file"
        advice = f"moved to {moved}. "
        if companion and os.path.lexists(companion):  # not an output of the rule: a missing one reruns nothing
            advice = (
                f"moved to {moved}, and {companion}, the output of its rule beside it, to "
                f"{move_aside(companion)}, so that Snakemake runs that rule again. "
            )
            rebuilt = "both"
    advice += f"Rule {rule} rebuilds {rebuilt}: run the same snakemake command again."
    if link:  # the rerun would link the same damaged copy again
        advice += f" It was a link to {link} (the between-workflow cache): delete that {what} too."
    return DamagedFileError(err.path, err.reason, advice)


# ---------------------------------------------------------------- Ctrl-C and SIGTERM reach the jobs


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
    jobs = jobs or (lambda: children(os.getpid()))
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if previous not in (signal.SIG_IGN, None):
            signal.signal(sig, functools.partial(_stop_jobs, jobs, previous))


def children(pid: int) -> list[int]:
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
