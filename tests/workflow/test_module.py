"""The workflow as a Snakemake module of another workflow, in another folder; the package the rules' conda
environment installs; the Snakemake version the Snakefile asks for."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest
import yaml

from helpers import ROOT, copy_workflow, planned_jobs

HOST = """\
import os

configfile: "{config}"


module causalpos:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from causalpos as causalpos_*

print("CAUSALPOS_ROOT=" + os.environ["CAUSALPOS_ROOT"])
"""


@pytest.mark.workflow
def test_the_workflow_imported_as_a_module_plans_and_runs_from_another_folder(tmp_path):
    (tmp_path / "Snakefile").write_text(
        HOST.format(config=ROOT / ".test" / "config.yaml", snakefile=ROOT / "Snakefile")
    )
    run = [sys.executable, "-m", "snakemake", "--cores", "1"]
    plan = subprocess.run([*run, "-n", "causalpos_all"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr
    planned = set(re.findall(r"^rule (\w+):$", plan.stdout, flags=re.M))
    # the rules the workflow's own `all` plans, each under its prefix
    (tmp_path / "direct").mkdir()
    direct = {rule for rule, _ in planned_jobs(copy_workflow(tmp_path / "direct"), "all")}
    assert planned == {f"causalpos_{name}" for name in direct} | {"causalpos_all"}
    assert f"CAUSALPOS_ROOT={ROOT}" in plan.stdout  # what the conda environment's pip entry installs
    # a job runs there, its script and library found from the module's folder, its results in this one
    done = subprocess.run(
        [*run, "results/theory/layer2_scores.parquet"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "results" / "theory" / "layer2_scores.parquet").stat().st_size > 0
    assert (tmp_path / "results" / "logs" / "theory.log").exists() and not (ROOT / ".test" / "results").exists()


def test_the_conda_environment_installs_this_checkout_editable(tmp_path):
    """envs/causalpos.yaml's pip entries, as conda hands them to pip (a requirements file), with CAUSALPOS_ROOT
    as the Snakefile sets it: pip resolves them to this checkout, editable."""
    env = yaml.safe_load((ROOT / "envs" / "causalpos.yaml").read_text())
    (entries,) = [item["pip"] for item in env["dependencies"] if isinstance(item, dict)]
    (tmp_path / "requirements.txt").write_text("\n".join(entries) + "\n")
    report = tmp_path / "report.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "--report",
            str(report),
            "-r",
            "requirements.txt",
        ],
        cwd=tmp_path,
        check=True,
        timeout=300,
        capture_output=True,
        env={"CAUSALPOS_ROOT": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    (installed,) = json.loads(report.read_text())["install"]
    assert installed["metadata"]["name"] == "causalpos"
    assert installed["download_info"]["url"] == ROOT.as_uri()
    assert installed["download_info"]["dir_info"] == {"editable": True}


def test_min_version_is_the_snakemake_pyproject_requires():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pinned,) = [
        re.fullmatch(r"snakemake>=([\d.]+)", item).group(1) for item in requires if item.startswith("snakemake>")
    ]
    assert re.search(r'^min_version\("([\d.]+)"\)', (ROOT / "Snakefile").read_text(), flags=re.M).group(1) == pinned
    (conda,) = [
        item
        for item in yaml.safe_load((ROOT / "envs" / "causalpos.yaml").read_text())["dependencies"]
        if isinstance(item, str) and item.startswith("snakemake")
    ]
    assert conda.split(">=")[1].strip() == pinned
