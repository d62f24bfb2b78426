"""The pytest hooks and fixtures shared by the test modules (pytest provides these without an import; the plain
helpers the modules share are in tests/helpers.py, imported as `from helpers import ...`).

`finished_run`: one finished `snakemake all` of the tiny config (.test/config.yaml, with the default profile) per
test session, shared by every test that needs a finished run (the workflow tier, tests/workflow/, and the docs'
snippets). It starts in the background when the session
starts, so the tests that need no run go on meanwhile; with pytest-xdist the workers share it (the first starts
it, a file lock keeps the others from starting another). It is never changed: a test that runs or edits
anything works on `finished_copy`, a copy of it of its own.

`cluster`: the one-node SLURM cluster of scripts/local-slurm.sh, shared by the
SLURM test modules (tests/slurm/test_slurm.py, test_slurm_stopped.py), which
are skipped unless CAUSALPOS_SLURM=1. Session-scoped so that `pytest -m slurm -n 0`
starts it once; stopped at the end if the tests started it.

`data`: the Markov-chain blocks and word-level tokenizer of the tiny trainings (tests/integration/test_train.py,
test_emergence.py), made once per test module.

The fixtures import tests/helpers.py when they run, not when this file loads: helpers imports torch and
transformers (its extraction references), seconds that a run of the light test files, and pytest-xdist's
controlling process, need not spend.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

FINISHED_TARGET = "all"  # every table and figure of the default run (all_figures is part of it)


# ---------------------------------------------------------------- the order of the files

# A scheduling hint, nothing more (a wrong entry costs minutes, never a result): pytest-xdist hands whole
# files to its two workers in this order (pyproject: --dist loadfile --no-loadscope-reorder). First the long
# files that need no finished run, while the shared run builds; then those that read it, longest first; the
# other, short files last, so that the two workers end together.
LONG_FILES = (
    "test_simulate.py",
    "test_train.py",
    "test_extract.py",
    "test_emergence.py",
    "test_activation_figures.py",
    "test_config_checks.py",
    "test_figures.py",
    "test_claims.py",
    "test_recursion.py",
    # these wait for the shared run
    "test_stale.py",
    "test_nothing_stale.py",
    "test_faults_end_to_end.py",
    "test_paper_llms.py",
    "test_targets.py",
    "test_damaged_end_to_end.py",
    "test_rerun.py",
    "test_workflow.py",
    "test_digest_run.py",
    "test_figure_text.py",
    "test_docs_snippets.py",
)


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
        from helpers import SNAKEMAKE, copy_with_profiles

        with FileLock(str(self.folder) + ".lock"):
            if self.folder.exists():
                return  # another worker started it
            self.workdir.mkdir(parents=True)
            copy_with_profiles(self.workdir)
            script = f'"$0" --cores 2 {FINISHED_TARGET} > "$1" 2>&1; echo $? > "$2.tmp"; mv "$2.tmp" "$2"'
            # a process group of its own (stopped as one; a terminal's Ctrl-C does not reach it), but the
            # session of the tests: with the kernel's autogroup scheduling a new session would be a group of
            # its own that only ever gets its share, and the tests' lower priority below would not favour it
            self.proc = subprocess.Popen(
                ["bash", "-c", script, SNAKEMAKE, str(self.out), str(self.rc)],
                cwd=self.workdir,
                env={**os.environ, "PYTHONPATH": str(self.workdir / "src")},
                process_group=0,
            )

    def wait(self, timeout: float = 1800) -> Path:
        deadline = time.monotonic() + timeout
        while not self.rc.exists():
            if self.proc is not None and self.proc.poll() is not None and not self.rc.exists():
                pytest.fail(f"the shared tiny run ended without an exit status:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the shared tiny run is not finished after {timeout} s:\n{self.output()}")
            time.sleep(0.5)
        if self.rc.read_text().strip() != "0":
            pytest.fail(
                f"snakemake {FINISHED_TARGET} on the tiny config failed (the shared finished run):\n{self.output()}"
            )
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
    from helpers import copy_run

    return copy_run(finished_run, tmp_path / "copy")


@pytest.fixture(scope="session")
def cluster(request):
    """A running one-node cluster (partitions cpu and gpu, 8 fake GPUs, with accounting); stopped afterwards if
    this started it. Yields whether it was running before."""
    from helpers import local_slurm

    if hasattr(request.config, "workerinput"):
        pytest.fail(
            "the SLURM tests share one cluster that a pytest-xdist worker would stop under the other: "
            "run them in one process, CAUSALPOS_SLURM=1 pytest -m slurm -n 0"
        )
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


@pytest.fixture(scope="session")
def rule_outputs():
    """Every rule's outputs as the Snakefile publishes them to its jobs (helpers.rule_outputs: read once)."""
    from helpers import rule_outputs as read

    return read()


@pytest.fixture
def published_writers(rule_outputs, tmp_path, monkeypatch):
    """The environment of a job of the tiny workflow whose results folder is tmp_path/results: a damaged input is
    named with the rule that rebuilds it (workflow.job.moved_aside)."""
    from causalpos.workflow.job import WRITERS_ENV
    from helpers import writers_for

    monkeypatch.setenv(WRITERS_ENV, writers_for(rule_outputs, tmp_path / "results"))


# ---------------------------------------------------------------- the tiny trainings' data


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Blocks of a noisy order-1 Markov chain (3 successors per token) and a word-level tokenizer."""
    from helpers import BLOCK, VOCAB, make_tokenizer

    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    successors = rng.integers(1, VOCAB, size=(VOCAB, 3))
    n_train, n_heldout = 160, 32
    stream = np.empty((n_train + n_heldout) * BLOCK, dtype=np.int64)
    stream[0] = 1
    choices = rng.integers(0, 3, size=len(stream))
    for i in range(1, len(stream)):
        stream[i] = successors[stream[i - 1], choices[i]]
    blocks = root / "blocks"
    blocks.mkdir()
    stream = stream.astype(np.uint16).reshape(-1, BLOCK)
    np.save(blocks / "train.npy", stream[:n_train])
    np.save(blocks / "heldout.npy", stream[n_train:])
    (blocks / "blocks.json").write_text(
        json.dumps(
            {
                "block_len": BLOCK,
                "dtype": "uint16",
                "vocab_size": VOCAB,
                "eos_token_id": 0,
                "n_blocks_train": n_train,
                "n_tokens_train": n_train * BLOCK,
                "n_blocks_heldout": n_heldout,
                "n_tokens_heldout": n_heldout * BLOCK,
                "unigram_entropy": 5.5,
            }
        )
    )
    make_tokenizer(root / "tokenizer")
    return root
