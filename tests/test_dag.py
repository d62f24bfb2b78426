"""workflow.dag against Snakemake's own DAG, for the default and the tiny config: the rules (--list-rules), the
rule graph (--rulegraph) and every job of a dry run of every target (its outputs, inputs and wildcards)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from causalpos.catalogue import paths
from causalpos.workflow import dag
from causalpos.workflow.config import load_config, results_dir
from helpers import ROOT

CONFIGS = {"default": ROOT / "config.yaml", "tiny": ROOT / ".test" / "config.yaml"}
EVERY_RULE = ("all", "all_figures", "length_seeds", "paper_llms")  # targets that together need every rule
OUTPUT_ONLY = ("results", "name", "ext", "page")  # wildcards of a path pattern, not of a job


def snakemake(configfile, workdir, *args) -> str:
    command = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--configfile", str(configfile),
               "--directory", str(workdir), *args]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=300).stdout


def parse_jobs(text: str) -> list[dict]:
    """Each job of a dry run: its rule, wildcards, inputs and outputs (its benchmark file among them)."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", text):
        head = re.match(r"(?:local)?rule (\w+):\n", block)
        if not head:
            continue
        fields = dict(re.findall(r"^    (\w+): (.*)$", block, flags=re.M))
        wildcards = dict(item.split("=", 1) for item in fields["wildcards"].split(", ")) if "wildcards" in fields else {}
        jobs.append({"rule": head.group(1), "wildcards": wildcards,
                     "input": fields["input"].split(", ") if "input" in fields else [],
                     "output": [path for key in ("output", "benchmark") if key in fields
                                for path in fields[key].split(", ")]})
    return jobs


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def workflow(request, tmp_path_factory):
    configfile = CONFIGS[request.param]
    workdir = tmp_path_factory.mktemp(f"dag_{request.param}")  # empty: every job of the targets is planned
    config = load_config(configfile)
    return {
        "config": config,
        "results": results_dir(config),
        # the registry looks at files where the results lie (the window test reads paper_llms's tables once they
        # exist): ask it about the dry run's folder, not this checkout's
        "results_there": str(workdir / results_dir(config)),
        "rules": set(snakemake(configfile, workdir, "--list-rules").split()),
        "rulegraph": snakemake(configfile, workdir, "--rulegraph", "dot", *EVERY_RULE),
        "jobs": parse_jobs(snakemake(configfile, workdir, "-n", *EVERY_RULE)),
    }


def job_key(rule: str, wildcards: dict) -> tuple:
    return rule, tuple(sorted((k, v) for k, v in wildcards.items() if k not in OUTPUT_ONLY))


def test_every_rule_is_a_stage_or_a_target(workflow):
    assert workflow["rules"] == set(dag.STAGES) | set(dag.TARGETS)
    assert {job["rule"] for job in workflow["jobs"]} == set(dag.STAGES) | set(dag.TARGETS)


def test_every_output_maps_to_the_job_that_writes_it(workflow):
    wrong = {}
    for job in workflow["jobs"]:
        for path in job["output"]:
            found = dag.writer_of(path)
            if found is None or job_key(*found) != job_key(job["rule"], job["wildcards"]):
                wrong[path] = (job["rule"], job["wildcards"], found)
    assert not wrong
    assert sum(len(job["output"]) for job in workflow["jobs"]) > 50


def test_the_inputs_of_every_job_are_the_outputs_of_its_stages_input_jobs(workflow):
    """Snakemake's producer of each input file is the job dag.writer_of names, and the jobs a job reads from
    are dag.input_jobs of its stage (the jobs the upstream digest hashes)."""
    producer = {path: job_key(job["rule"], job["wildcards"]) for job in workflow["jobs"] for path in job["output"]}
    for job in workflow["jobs"]:
        if job["rule"] in dag.TARGETS:
            continue
        from_snakemake = {producer[path] for path in job["input"]}
        assert {job_key(*dag.writer_of(path)) for path in job["input"]} == from_snakemake, job
        registry = dag.input_jobs(workflow["config"], workflow["results_there"], job["rule"], **job["wildcards"])
        assert {job_key(*item) for item in registry} == from_snakemake, job


def test_every_edge_of_the_rule_graph_is_an_edge_of_the_registry(workflow):
    dot = workflow["rulegraph"]
    names = dict(re.findall(r'^\s*(\d+)\[label = "(\w+)"', dot, flags=re.M))
    edges = {(names[a], names[b]) for a, b in re.findall(r"^\s*(\d+) -> (\d+)", dot, flags=re.M)}
    registry = {(writer, job["rule"]) for job in workflow["jobs"] if job["rule"] not in dag.TARGETS
                for writer, _ in dag.input_jobs(workflow["config"], workflow["results_there"], job["rule"],
                                                **job["wildcards"])}
    assert {(a, b) for a, b in edges if b not in dag.TARGETS} == registry
    assert ("extract_trained", "summary") in registry and ("extract_pretrained", "summary") in registry


def test_writer_of_paths_outside_a_dry_run():
    assert dag.stage_writing("/elsewhere/results/simulation/x.parquet") == "simulate"
    assert dag.stage_writing(paths.train_benchmark("nope")) == "train"
    assert dag.stage_writing(paths.train_benchmark("nope", "results/nope-large")) == "train"
    assert dag.stage_writing(paths.snapshot_file("rope", 8, "results/nope-large")) == "train"
    assert dag.stage_writing(paths.snapshot_dir("rope", "results/nope-large")) == "train"
    assert dag.stage_writing(paths.model_file("rope", "length_eval.parquet", "results/x")) == "length_eval"
    assert dag.stage_writing("results/paper_llms/activations/smollm2_135m/scores.parquet") == "paper_llms_extract"
    assert dag.stage_writing("config.yaml") is None
    assert dag.command_for("results/models/nope/metrics.parquet") == "train nope"
    assert dag.command_for("results/seeds/rope/seed3/model.safetensors") == "train-seed rope 3"
    assert dag.command_for("results/summary/runtimes.parquet") is None  # no command of its own


def test_every_stage_names_a_runner_and_every_command_is_a_cli_command():
    from causalpos.workflow import cli, runners

    for entry in dag.STAGE_LIST:
        assert callable(getattr(runners, entry.runner)), entry.name
    parser_commands = set(cli.build_parser()._subparsers._group_actions[0].choices)
    assert {entry.command.split()[0] for entry in dag.STAGE_LIST if entry.command} | {"list"} == parser_commands
