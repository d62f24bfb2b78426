"""Fixtures and helpers shared by test modules (imported as `from conftest import ...`).

Workflow copies: `copy_workflow`, `snakemake`, `edit_config`, `planned_jobs`, `touch_source`, `processes_in`;
SLURM: `job_env`, `wait_for_accounting`, `copy_with_profiles`, `JOB_ID`.

`finished_run`: one finished `snakemake all` of the tiny config (.test/config.yaml, with the default profile) per
test session, shared by every test that needs a finished run (tests/test_workflow.py, test_rerun.py,
test_targets.py, test_stale.py, test_faults.py, test_cli_stages.py, test_paper_llms.py). It starts in the background when the session
starts, so the tests that need no run go on meanwhile; with pytest-xdist the workers share it (the first starts
it, a file lock keeps the others from starting another). It is never changed: a test that runs or edits
anything works on `finished_copy`, a copy of it of its own.

`cluster`: the one-node SLURM cluster of scripts/local-slurm.sh, shared by the
SLURM test modules (tests/test_slurm.py, test_slurm_stopped.py), which
are skipped unless CAUSALPOS_SLURM=1. Session-scoped so that `pytest -m slurm -n 0`
starts it once; stopped at the end if the tests started it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
LOCAL_SLURM = ROOT / "scripts" / "local-slurm.sh"
JOB_ID = re.compile(r"SLURM job id (\d+) on (\S+)")


FINISHED_TARGET = "all"  # every table and figure of the default run (all_figures is part of it)
LINK_MIN_BYTES = 1 << 20  # a copy of a finished run hard-links files this large (the converted LLM, checkpoints)


def copy_workflow(dest: Path) -> Path:
    for name in ("Snakefile", "rules", "workflow_scripts", "envs", "report"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / name)
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(ROOT / ".test" / "config.yaml", dest / "config.yaml")
    # The simulation kernels' numba cache (cache=True: in __pycache__ beside the source) is this checkout's:
    # the sources are the same files with the same times, so each kernel compiles once per test session,
    # not once in every copy and once more in the tests that run it here (some 6 s of CPU each time).
    kernels = ROOT / "src" / "causalpos" / "simulation" / "__pycache__"
    kernels.mkdir(exist_ok=True)
    (dest / "src" / "causalpos" / "simulation" / "__pycache__").symlink_to(kernels, target_is_directory=True)
    return dest


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run snakemake in the copy; past `timeout` its whole process group (its jobs too) is stopped, not left."""
    env = {**os.environ, "PYTHONPATH": str(workdir / "src")}
    popen = subprocess.Popen([SNAKEMAKE, "--cores", "2", *args], cwd=workdir, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.communicate()
        raise AssertionError(f"snakemake {' '.join(args)} still running after {timeout} s; stopped") from None
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, out, err)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def planned_jobs(workdir: Path, target: str = "all_figures") -> set[tuple[str, str]]:
    """(rule, wildcard value or '') of every job `snakemake -n` would run."""
    out = snakemake(workdir, "-n", target).stdout
    jobs, rule = set(), None
    for line in out.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):", line):
            rule = m.group(1)
            jobs.add((rule, ""))
        elif rule and (m := re.match(r"^\s+wildcards: \w+=(\S+)", line)):
            jobs.discard((rule, ""))
            jobs.add((rule, m.group(1)))
            rule = None
    return {job for job in jobs if job[0] not in ("all", "all_figures")}


def touch_source(workdir: Path, module: str) -> None:
    """Append a comment to src/causalpos/<module>.py of the copy (module as a path, e.g. "models/data")."""
    path = workdir / "src" / "causalpos" / f"{module}.py"
    path.write_text(path.read_text() + "\n# an edit\n")


def edit_config(workdir: Path, change) -> None:
    path = workdir / "config.yaml"
    config = yaml.safe_load(path.read_text())
    change(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def job_env(workdir: Path) -> dict:
    """What the submitting process hands to its SLURM jobs (sbatch --export=ALL): the venv first on PATH."""
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
            "PYTHONPATH": str(workdir / "src")}


def processes_in(workdir: Path) -> dict[int, list[bytes]]:
    """PID -> argv of every process whose working directory is `workdir` (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if os.readlink(entry / "cwd") == str(workdir):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
    return found


def sacct_states(job_ids) -> dict[str, str]:
    """SLURM job id -> state of the job allocation (-X), from accounting."""
    proc = subprocess.run(["sacct", "-j", ",".join(map(str, job_ids)), "--format=JobID,State,ExitCode",
                           "--noheader", "-X", "-P"], capture_output=True, text=True, check=True)
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return {job: state.split()[0] for job, state, _ in rows}


def wait_for_accounting(job_ids, timeout: float = 30) -> dict[str, str]:
    """sacct's states once every job has a final one (slurmctld sends the end record to slurmdbd asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        states = sacct_states(job_ids)
        final = all(states.get(str(job), "PENDING") not in ("PENDING", "RUNNING", "COMPLETING") for job in job_ids)
        if final or time.monotonic() > deadline:
            return states
        time.sleep(1)


def copy_with_profiles(dest: Path) -> Path:
    workdir = copy_workflow(dest)  # Snakefile, rules, scripts, src and .test/config.yaml as config.yaml
    shutil.copytree(ROOT / "profiles", workdir / "profiles")  # profiles/default is the workflow profile there too
    return workdir


def copy_run(src: Path, dest: Path) -> Path:
    """A copy of a finished workflow folder to run and edit, mtimes and Snakemake's metadata kept.

    Files of LINK_MIN_BYTES or more under results/ are hard links, not copies (the converted LLM alone is
    over 500 MB): Snakemake removes a job's outputs before the job runs and every stage writes by rename,
    so a rerun in the copy replaces the link and never writes into the original. A test that damages
    such a file must replace it too, not write into it."""
    def link_or_copy(source: str, target: str) -> None:
        inside = Path(source).relative_to(src).parts[0] == "results"
        if inside and os.path.getsize(source) >= LINK_MIN_BYTES:
            os.link(source, target)
        else:
            shutil.copy2(source, target)

    shutil.copytree(src, dest, symlinks=True, copy_function=link_or_copy)
    return dest


# ---------------------------------------------------------------- the order of the files

# A scheduling hint, nothing more (a wrong entry costs minutes, never a result): pytest-xdist hands whole
# files to its two workers in this order (pyproject: --dist loadfile --no-loadscope-reorder). First the long
# files that need no finished run, while the shared run builds; then those that read it, longest first; the
# other, short files last, so that the two workers end together.
LONG_FILES = ("test_simulate.py", "test_train.py", "test_digest.py", "test_extract.py", "test_emergence.py",
              "test_activation_figures.py", "test_config_checks.py", "test_figures.py", "test_claims.py",
              "test_theory.py",
              # these wait for the shared run
              "test_stale.py", "test_paper_llms.py", "test_targets.py", "test_faults.py", "test_cli_stages.py",
              "test_rerun.py", "test_workflow.py")


LAST_FILES = ("test_slurm_stopped.py",)  # after every test that uses the local SLURM cluster: it stops it


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    rank |= {name: len(LONG_FILES) + 1 + i for i, name in enumerate(LAST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the rest as collected


# ---------------------------------------------------------------- one finished run per session

INTERRUPTED = False  # Ctrl-C: stop the background run instead of waiting for it


def pytest_keyboard_interrupt(excinfo):
    global INTERRUPTED
    INTERRUPTED = True


class FinishedRun:
    """`snakemake all` on the tiny config in ROOT/finished/workflow, started once per session in the background.

    Under pytest-xdist ROOT is the session's temporary folder shared by the workers; FileLock makes the first
    worker the one that starts it. Its output goes to snakemake.out, its exit status to snakemake.rc."""

    def __init__(self, root: Path):
        self.folder = root / "finished"
        self.workdir = self.folder / "workflow"
        self.out, self.rc = self.folder / "snakemake.out", self.folder / "snakemake.rc"
        self.proc = None

    def start(self) -> None:
        with FileLock(str(self.folder) + ".lock"):
            if self.folder.exists():
                return  # another worker started it
            self.workdir.mkdir(parents=True)
            copy_with_profiles(self.workdir)
            script = f'"$0" --cores 2 {FINISHED_TARGET} > "$1" 2>&1; echo $? > "$2.tmp"; mv "$2.tmp" "$2"'
            # a process group of its own (stopped as one; a terminal's Ctrl-C does not reach it), but the
            # session of the tests: with the kernel's autogroup scheduling a new session would be a group of
            # its own that only ever gets its share, and the tests' lower priority below would not favour it
            self.proc = subprocess.Popen(["bash", "-c", script, SNAKEMAKE, str(self.out), str(self.rc)],
                                         cwd=self.workdir, env={**os.environ, "PYTHONPATH": str(self.workdir / "src")},
                                         process_group=0)

    def wait(self, timeout: float = 1800) -> Path:
        deadline = time.monotonic() + timeout
        while not self.rc.exists():
            if self.proc is not None and self.proc.poll() is not None and not self.rc.exists():
                pytest.fail(f"the shared tiny run ended without an exit status:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the shared tiny run is not finished after {timeout} s:\n{self.output()}")
            time.sleep(0.5)
        if self.rc.read_text().strip() != "0":
            pytest.fail(f"snakemake {FINISHED_TARGET} on the tiny config failed (the shared finished run):\n"
                        f"{self.output()}")
        return self.workdir

    def output(self) -> str:
        return self.out.read_text()[-8000:] if self.out.exists() else "(no output)"

    def end(self) -> None:
        """At the end of the session of the worker that started it: wait for it (another worker may still
        need it), or on Ctrl-C stop it and its jobs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if not INTERRUPTED:
            try:
                self.proc.wait(timeout=1800)
                return
            except (subprocess.TimeoutExpired, KeyboardInterrupt):
                pass
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


def session_folder(request, tmp_path_factory) -> Path:
    """This session's temporary folder: under pytest-xdist the one of all workers, not the worker's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(request.config, "workerinput") else base


@pytest.fixture(scope="session", autouse=True)
def finished_run_in_background(request, tmp_path_factory):
    """Starts the shared run at the start of the session if any selected test needs it."""
    if not any("finished_run" in item.fixturenames for item in request.session.items):
        yield None
        return
    run = FinishedRun(session_folder(request, tmp_path_factory))
    run.start()
    # Every workflow test waits for the run: while it builds, the tests give it the cores first. (A lower
    # priority for this process and what it starts from now on; the run started above keeps its own.)
    os.nice(5)
    yield run
    run.end()


@pytest.fixture(scope="session")
def finished_run(finished_run_in_background) -> Path:
    """The shared finished run of `all` (waits for it). Read it; run and edit only in `finished_copy`."""
    return finished_run_in_background.wait()


@pytest.fixture
def finished_copy(finished_run, tmp_path) -> Path:
    """A copy of the finished run of this test's own (mtimes and Snakemake metadata kept)."""
    return copy_run(finished_run, tmp_path / "copy")


def local_slurm(command: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(LOCAL_SLURM), command], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def cluster(request):
    """A running one-node cluster (partition debug, with accounting); stopped afterwards if this started it.
    Yields whether it was running before."""
    if hasattr(request.config, "workerinput"):
        pytest.fail("the SLURM tests share one cluster that a pytest-xdist worker would stop under the other: "
                    "run them in one process, CAUSALPOS_SLURM=1 pytest -m slurm -n 0")
    was_running = local_slurm("status").returncode == 0
    start = time.perf_counter()
    proc = local_slurm("start")
    if proc.returncode != 0:
        pytest.fail(f"scripts/local-slurm.sh start failed:\n{proc.stdout}\n{proc.stderr}")
    print(f"\nlocal SLURM cluster up in {time.perf_counter() - start:.1f} s")
    yield was_running
    if not was_running:
        proc = local_slurm("stop")
        assert proc.returncode == 0, proc.stderr
