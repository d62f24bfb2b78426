"""Code digests follow meaning, on a finished run (issue 39): a docstring and a comment edited in the module that
writes every Parquet file (causalpos/io.py) leave `snakemake -n all_figures` with nothing to do; a new statement
there plans every job whose rule's code imports it, which is every job of the run."""

from __future__ import annotations

import re

import pytest

from causalpos.workflow.digest import import_closure, job_module
from helpers import planned_jobs, snakemake

pytestmark = pytest.mark.workflow


def test_a_docstring_and_a_comment_rerun_nothing_a_statement_reruns_every_user(finished_copy):
    io = finished_copy / "src" / "causalpos" / "io.py"
    text = io.read_text()
    assert text.startswith('"""') and "def write_parquet(" in text
    edited = text.replace('"""', '"""Edited: a sentence of the module\'s docstring. ', 1)
    edited = edited.replace("def write_parquet(", "# a comment of the edit\ndef write_parquet(", 1)
    io.write_text(edited)
    assert planned_jobs(finished_copy, "all_figures") == set()

    io.write_text(edited + "\nEDITED_BY_A_TEST = True\n")
    planned = planned_jobs(finished_copy, "all_figures")
    every = snakemake(finished_copy, "-n", "--forceall", "all_figures").stdout
    stats = every.split("Job stats:")[1].split("\n\n")[0]  # the "job  count" rows, up to the blank line after them
    jobs = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M) if m[1] != "total"}
    users = {rule for rule in jobs if rule != "all_figures" and "causalpos.io" in import_closure([job_module(rule)])}
    assert {rule for rule, _ in planned} == users
    assert len(planned) == sum(count for rule, count in jobs.items() if rule in users)
