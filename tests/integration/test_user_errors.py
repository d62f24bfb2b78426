"""Errors a user can act on (issue 28): one message, no traceback, before the work; one writer per model folder.

- A rejected config ends `snakemake -n` with its message and a non-zero status, without a Python traceback
  (Snakemake prints one under any exception raised while it reads the Snakefile).
- A job whose stage raises a UserError prints one line on the console; the traceback is in its log.
- The CLI names a config file that is missing, a folder, not text or not YAML (with its line), in one line.
- A training job beside a running training of the same model folder is refused at once, naming the holder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from causalpos.workflow.cli import main
from causalpos.runtime.processes import OutputLocked, lock_file, one_writer
from helpers import ROOT, copy_workflow, snakemake

TINY = str(ROOT / ".test" / "config.yaml")


def no_traceback(text: str) -> bool:
    return "Traceback" not in text and 'File "' not in text


# ---------------------------------------------------------------- snakemake -n with a bad config


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("bad_configs"))


def tiny_with(change) -> str:
    config = yaml.safe_load(Path(TINY).read_text())
    change(config)
    return yaml.safe_dump(config, sort_keys=False)


BAD_CONFIGS = {
    "schema": (tiny_with(lambda c: c["training"].update(steps=-3)), "training.steps = -3 is invalid"),
    "cross-key": (
        tiny_with(lambda c: c["tokenizer"].update(block_len=4096)),
        "tokenizer.block_len = 4096 exceeds training.model.context = 128",
    ),
    "key twice": (Path(TINY).read_text() + "\ndevice: cpu\n", "key device is given twice"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_rejected_config_stops_the_dry_run_with_its_message_and_no_traceback(workflow_copy, case):
    text, message = BAD_CONFIGS[case]
    configfile = workflow_copy / f"bad-{case.replace(' ', '_')}.yaml"
    configfile.write_text(text)
    done = snakemake(workflow_copy, "-n", "--configfile", str(configfile), check=False, timeout=120)
    shown = done.stdout + done.stderr
    assert done.returncode != 0 and message in shown, shown
    assert no_traceback(shown), shown


def test_the_workflows_own_config_yaml_with_a_tab_names_its_line(workflow_copy, tmp_path):
    """Snakemake's own message for a config.yaml it cannot parse names neither the file nor the line."""
    own = workflow_copy / "config.yaml"
    original = own.read_text()
    lines = original.splitlines()
    line = next(i for i, text in enumerate(lines) if text.startswith("  seed:")) + 1  # under data:
    lines[line - 1] = "\tseed: 0"
    try:
        own.write_text("\n".join(lines) + "\n")
        done = snakemake(workflow_copy, "-n", check=False, timeout=120)
    finally:
        own.write_text(original)
    shown = done.stdout + done.stderr
    assert done.returncode != 0 and no_traceback(shown), shown
    assert f"config file config.yaml, line {line}, column 1: not valid YAML" in shown
    assert "YAML indents with spaces, never tabs" in shown


# ---------------------------------------------------------------- a job's error that says what to do


@pytest.mark.parametrize("error", ["user", "bug"])
def test_a_job_prints_a_user_error_in_one_line_and_keeps_the_traceback_in_its_log(tmp_path, error):
    log = tmp_path / "logs" / "job.log"
    raise_it = (
        "from causalpos.io import DamagedFileError; raise DamagedFileError('x.parquet', 'truncated', 'rebuild it')"
        if error == "user"
        else "raise KeyError('a bug')"
    )
    job = f"from causalpos.workflow.job import JobLog\nwith JobLog({str(log)!r}):\n    {raise_it}\n"
    done = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=60)
    text = log.read_text()
    assert done.returncode == 1 and "ERROR job failed" in text and "Traceback" in text
    if error == "user":
        assert done.stderr == f"x.parquet is damaged (truncated); rebuild it (details: {log})\n"
    else:  # a bug keeps its traceback on the console
        assert "Traceback" in done.stderr and "KeyError: 'a bug'" in done.stderr


# ---------------------------------------------------------------- the CLI


def cli(capsys, *argv) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as stop:  # argparse's errors
        code = stop.code
    return code, capsys.readouterr().err.strip()


def assert_one_line(code: int, err: str, *fragments: str) -> None:
    assert code == 2 and "\n" not in err and no_traceback(err), err
    for fragment in fragments:
        assert fragment in err, err


def test_cli_names_a_config_file_that_is_a_folder_binary_or_not_yaml(capsys, tmp_path):
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes([0xCB, 0x00, 0xFF]) * 50)
    tabs = tmp_path / "tabs.yaml"
    tabs.write_text("data:\n\tseed: 1\n")
    assert_one_line(*cli(capsys, "--configfile", str(tmp_path / "missing.yaml"), "list"), "does not exist")
    assert_one_line(*cli(capsys, "--configfile", str(folder), "list"), f"config file {folder} is a folder")
    assert_one_line(
        *cli(capsys, "--configfile", str(binary), "list"),
        f"config file {binary} is not a text file (byte 0xcb at offset 0 is not UTF-8)",
    )
    assert_one_line(
        *cli(capsys, "--configfile", str(tabs), "list"),
        f"config file {tabs}, line 2, column 1: not valid YAML",
        "never tabs",
    )


# ---------------------------------------------------------------- one writer per model folder

HOLD = (
    "import sys, time; from causalpos.runtime.processes import one_writer\n"
    "with one_writer(sys.argv[1], 'training nope'):\n"
    "    print('holding', flush=True); time.sleep(120)\n"
)


def hold_lock(folder: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "holding\n"
    return holder


def test_one_writer_refuses_a_second_writer_and_frees_the_folder_when_the_first_is_killed(tmp_path):
    folder = tmp_path / "models" / "nope"
    holder = hold_lock(folder)
    try:
        with pytest.raises(
            OutputLocked,
            match=rf"{folder} is being written by another process \(training nope, "
            rf"pid {holder.pid}, lock {lock_file(folder)}\)",
        ):
            with one_writer(folder, "training nope"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)  # a hard kill: the kernel drops the lock, nothing to clean up
        holder.wait()
    with one_writer(folder, "training nope"):
        assert lock_file(folder).read_text() == f"{os.getpid()}\n"
    assert not folder.exists()  # the lock sits beside the folder, never in it (a directory output stays clean)


def test_a_training_job_beside_a_running_training_of_the_same_model_is_refused(data, tmp_path):
    """Two writers of one model folder (a second Snakemake in another working folder sharing the results, a job
    started by hand): the second is refused at once, before any checkpoint is made."""
    from causalpos.runtime.processes import OutputLocked
    from causalpos.workflow.job import Job, run_job
    from helpers import CFG

    out = tmp_path / "results" / "models" / "nope"
    job = Job(
        "train",
        wildcards={"model": "nope"},
        input={"blocks": str(data / "blocks" / "blocks.json"), "tokenizer": str(data / "tokenizer" / "x")},
        output={"model": str(out / "model.safetensors")},
        params={"settings": CFG, "processes": 1, "checkpoints": str(tmp_path / "checkpoints")},
    )
    holder = hold_lock(out)  # as the other job's training holds it
    try:
        started = time.perf_counter()
        with pytest.raises(OutputLocked, match=rf"{out} is being written by another process .*pid {holder.pid}"):
            run_job(job)
        assert time.perf_counter() - started < 30  # refused at once, not after a training
        assert not (tmp_path / "checkpoints").exists()
    finally:
        holder.kill()
        holder.wait()


def test_the_recovery_docs_say_how_to_unlock_after_a_hard_kill():
    text = (ROOT / "docs" / "workflow.md").read_text()
    recovery = text[text.index("### After a failed, killed or interrupted run") : text.index("## Profiles")]
    bullet = next(item for item in recovery.split("\n- ") if "LockException" in item)
    assert "snakemake --unlock" in bullet and "kill -9" in bullet


def test_list_into_a_closed_pipe_ends_quietly():
    import subprocess
    import sys

    proc = subprocess.run(
        f"{sys.executable} -m causalpos.workflow.cli --configfile {Path(__file__).resolve().parents[2] / '.test' / 'config.yaml'} list | head -1",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert proc.stdout.startswith("variant ") and len(proc.stdout.splitlines()) == 1
    assert proc.stderr == ""
