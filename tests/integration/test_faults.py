"""Damaged inputs and interruption (issue 11), job by job: a damaged file between jobs names itself and the rule
that rebuilds it and is moved aside to <name>.damaged; a job ends with its Snakemake (stop_with_parent);
forward_stop_signals passes Ctrl-C and SIGTERM on to the jobs. End to end, on copies of the tiny workflow:
tests/workflow/test_faults_end_to_end.py.
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

from causalpos.io import (
    DamagedFileError,
    move_aside,
    read_array,
    read_json,
    read_metadata,
    read_table,
    usual_mode,
    write_parquet,
)
from causalpos.workflow.job import WRITERS_ENV, Job, run_job
from helpers import ROOT, alive, damage, default_stop_signals

# ---------------------------------------------------------------- damaged files, unit


@pytest.fixture
def table(tmp_path) -> Path:
    path = tmp_path / "results" / "activations" / "nope" / "scores.parquet"
    write_parquet(pd.DataFrame({"x": np.arange(5000), "y": np.linspace(0, 1, 5000)}), path, {"seconds": 1.5})
    return path


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
    run_job(
        Job(
            "summary",
            input={"scores": [str(p) for p in scores], "probe": [str(p) for p in scores]},
            output={"nonrelativeness": str(out_dir / "nonrelativeness.parquet")},
        )
    )


@pytest.fixture
def writers(table, monkeypatch):
    """The rules' outputs as the Snakefile publishes them to its jobs: rule extract writes the scores table."""
    folder = re.escape(str(table.parents[1]))
    monkeypatch.setenv(WRITERS_ENV, json.dumps([["extract", rf"{folder}/(?P<model>nope|rope)/scores\.parquet", False]]))


def test_a_job_moves_a_damaged_input_aside_and_names_the_rule_that_rebuilds_it(table, tmp_path, writers):
    damage(table, "truncated")
    expected = (
        rf"^{re.escape(str(table))} is damaged \(ArrowInvalid: .*\); moved to {re.escape(str(table))}"
        rf"\.damaged\. Rule extract rebuilds it: run the same snakemake command again\.$"
    )
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
    with pytest.raises(
        DamagedFileError,
        match=rf"It was a link to {re.escape(str(cached))} \(the between-workflow "
        r"cache\): delete that file too\.",
    ):
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
        assert modes == {
            "model": 0o750,
            "model/sub": 0o750,
            "model/model.safetensors": 0o640,
            "model/sub/x.json": 0o640,
        }
    finally:
        os.umask(mask)


# ---------------------------------------------------------------- stopping jobs, unit

SRC = str(ROOT / "src")


def python(code: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        preexec_fn=default_stop_signals,
        **kwargs,
    )


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
        "    print('KeyboardInterrupt', flush=True)\n"
    )
    out, _ = proc.communicate(timeout=30)
    assert out.splitlines() == ["previous handler", f"job ended {-signal.SIGTERM}", "KeyboardInterrupt"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_job_ends_when_its_parent_dies(tmp_path):
    """What a job's JobLog does: the job gets SIGTERM when its Snakemake is killed (SIGKILL, a crash)."""
    job = (
        "import time; from causalpos.runtime.processes import stop_with_parent; stop_with_parent(); "
        "print('ready', flush=True); time.sleep(60)"
    )
    parent = python(
        f"import subprocess, sys; job = subprocess.Popen([sys.executable, '-c', {job!r}]); "
        "print(job.pid, flush=True); job.wait()",
        start_new_session=True,
    )
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
    job = (
        "import gc, weakref; from causalpos.workflow.job import JobLog, log\n"
        "class Cycle: pass\n"
        f"with JobLog({str(log)!r}):\n"
        "    log.info('the last record')\n"
        f"    if {fails}: raise RuntimeError('the stage broke')\n"
        "assert gc.get_freeze_count() > 0\n"
        "a = Cycle(); a.me = a; gone = weakref.ref(a); del a\n"
        "gc.collect(); assert gone() is None\n"
        "print('after the stage', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=60)
    text = log.read_text()
    assert "INFO the last record" in text
    if fails:
        assert done.returncode == 1 and "RuntimeError: the stage broke" in done.stderr
        assert "ERROR job failed" in text and "RuntimeError: the stage broke" in text
    else:
        assert done.returncode == 0 and done.stdout == "after the stage\n", done.stderr
