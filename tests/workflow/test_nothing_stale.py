"""Nothing stale, nothing silent (issue 40), on copies of the session's finished run, with the reliability probe's own
commands: damage that keeps the mtime, missing intermediates, truncated final outputs, a deleted timing, a killed
Snakemake, the CLI that once wrote results behind Snakemake's back. Each of these passed silently on the code of
73d9d88 ("Nothing to be done", a retraining, a job outliving Snakemake)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from causalpos.catalogue import paths
from helpers import SNAKEMAKE, edit_config, job_rule, planned_jobs, processes_in, snakemake

pytestmark = pytest.mark.workflow


def replace_keeping_mtime(path: Path, data: bytes) -> None:
    """Write `data` as a new file (the copy's big files are hard links to the shared run's) with the old times."""
    stat = path.stat()
    path.unlink()
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_flipped_bit_with_the_mtime_kept_is_planned_by_verify_and_rebuilt(finished_copy):
    """heldout.npy with one bit flipped and its mtime kept, as disk corruption keeps it: `all` reads no byte of a
    file whose size and mtime are its record's, `verify` reads them all: the rule that writes it and everything
    made from it are planned, the damaged file moved aside and named; its rule makes the original bits again (the
    rebuild of everything after it, ~100 s here, is left out: it is what the plan says)."""
    heldout = finished_copy / paths.tokens_file("heldout.npy")
    original = heldout.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x10
    replace_keeping_mtime(heldout, bytes(flipped))

    assert planned_jobs(finished_copy, "all") == set()  # size and mtime: no damage seen without reading
    dry = snakemake(finished_copy, "-n", "verify")
    said = dry.stdout + dry.stderr
    planned = planned_jobs(finished_copy, "verify")
    assert ("tokenizer", "") in planned and ("length_eval", "nope") in planned and ("claims", "") in planned, said
    assert f"{paths.tokens_file('heldout.npy')} is damaged: its content is not what rule tokenizer wrote" in said
    assert "rule tokenizer makes it again" in said
    assert Path(f"{heldout}.damaged").read_bytes() == bytes(flipped)

    snakemake(finished_copy, paths.tokens_file("heldout.npy"))
    assert heldout.read_bytes() == original  # the tokenizer and its blocks are deterministic


@pytest.mark.parametrize(
    "lost, rule",
    [
        (paths.model_file("nope", "model.safetensors"), ("train", "nope")),
        (paths.activation_table("nope", "scores"), ("extract", "nope")),
        (paths.tokens_file("heldout.npy"), ("tokenizer", "")),
    ],
    ids=["model", "scores", "tokens"],
)
def test_a_deleted_intermediate_is_planned_with_what_was_made_from_it(finished_copy, lost, rule):
    """Deleted while the results made from it remain: `snakemake -n all` plans the rule that makes it (Snakemake
    alone said "Nothing to be done") and the jobs that read it."""
    (finished_copy / lost).unlink()
    dry = snakemake(finished_copy, "-n", "all")
    said = dry.stdout + dry.stderr
    assert rule in planned_jobs(finished_copy, "all"), said
    assert f"{lost} is missing and a result made from it is not: rule {rule[0]} makes it again" in said
    assert ("claims", "") in planned_jobs(finished_copy, "all")


def test_truncated_final_outputs_are_moved_aside_and_planned(finished_copy):
    """The ledger cut to 30% and a figure emptied: their sizes are not their records', so even the dry run of `all`
    sees them, moves them aside and plans their rules."""
    ledger = finished_copy / paths.table_file("claims")
    figure = finished_copy / paths.figure_files("fig01_mechanism", ["png"])[0]
    replace_keeping_mtime(ledger, ledger.read_bytes()[: int(ledger.stat().st_size * 0.3)])
    replace_keeping_mtime(figure, b"")
    planned = planned_jobs(finished_copy, "all")
    assert ("claims", "") in planned and ("figure", "fig01_mechanism") in planned
    assert Path(f"{ledger}.damaged").exists() and not ledger.exists()


def test_a_deleted_timing_is_reported_missing_and_retrains_nothing(finished_copy):
    """The benchmark of NoPE's training deleted, then one simulation variant changed: the plan is that variant and
    what reads it, never the training; the runtimes table says the timing is missing."""
    (finished_copy / paths.train_benchmark("nope")).unlink()

    def fewer_samples(config):
        first = next(iter(config["simulation"]["variants"]))
        config["simulation"]["variants"][first] = {**(config["simulation"]["variants"][first] or {}), "n_samples": 1000}

    edit_config(finished_copy, fewer_samples)
    planned = planned_jobs(finished_copy, "all")
    assert not {job for job in planned if job[0] in ("train", "length_eval", "extract")}, planned
    snakemake(finished_copy, paths.table_file("runtimes"))
    runtimes = pd.read_parquet(finished_copy / paths.table_file("runtimes"))
    nope = runtimes[(runtimes["rule"] == "train") & (runtimes["job"] == "nope")]
    assert nope["source"].tolist() == ["missing (no benchmark file)"] and nope["seconds"].isna().all()


def test_a_job_dies_with_snakemake_killed_one_second_after_it_started(finished_copy):
    """kill -9 of Snakemake 1 s after an extraction job appeared (during its imports): the job ends within seconds
    and writes nothing; on 73d9d88 it ran 20 s more and rewrote all five activation tables."""
    scores = finished_copy / paths.activation_table("nope", "scores")
    proc = subprocess.Popen(
        [SNAKEMAKE, "--cores", "1", "--forcerun", "extract", str(scores.relative_to(finished_copy))],
        cwd=finished_copy,
        env={**os.environ, "PYTHONPATH": str(finished_copy / "src")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (jobs := [pid for pid, argv in processes_in(finished_copy).items() if job_rule(argv) == "extract"]):
            assert proc.poll() is None and time.monotonic() < deadline, "the extraction job never started"
            time.sleep(0.05)
        time.sleep(1)
        killed = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while (left := [pid for pid in jobs if pid in processes_in(finished_copy)]) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for pid in processes_in(finished_copy):
            os.kill(pid, signal.SIGKILL)
    assert not left, "the job outlived its Snakemake by 10 s"
    time.sleep(2)
    folder = scores.parent
    assert not [p.name for p in folder.iterdir() if p.is_file() and p.stat().st_mtime > killed]


def test_the_cli_writes_no_result(finished_copy):
    """The probe's `causalpos --configfile other.yaml simulate l2_alpha0.0` wrote a table outside Snakemake's
    records; the CLI now only checks and lists a config, and that command is refused with nothing written."""
    before = {p: p.stat().st_mtime_ns for p in (finished_copy / "results").rglob("*") if p.is_file()}
    proc = subprocess.run(
        ["causalpos", "--configfile", "config.yaml", "simulate", "l2_alpha0.0"],
        cwd=finished_copy,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "invalid choice: 'simulate'" in proc.stderr
    after = {p: p.stat().st_mtime_ns for p in (finished_copy / "results").rglob("*") if p.is_file()}
    assert after == before
