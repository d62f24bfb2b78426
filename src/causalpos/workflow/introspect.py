"""The workflow's rules and DAG as Snakemake reads them, in this process: for the docs generator (the rule table and
graph of docs/workflow.md) and the tests, which read the rules instead of keeping a second description of them.

    with loaded_workflow(configfiles=[".test/config.yaml"], targets=["all"]) as workflow:
        workflow.rules          # Snakemake's Rule objects
        rule_edges(workflow)    # (upstream rule, rule) of every dependency of the targets' DAG
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the checkout: Snakefile, rules/


@contextmanager
def loaded_workflow(configfiles=(), config: dict | None = None, targets=None, snakefile=ROOT / "Snakefile"):
    """Snakemake's Workflow of `snakefile` with `configfiles` and `config` (overrides), its DAG of `targets` built
    (every job, as if all had to run) when targets are given. Nothing runs; the working folder and the environment
    are as before afterwards (reading the Snakefile publishes the rules' outputs: workflow.job.WRITERS_ENV)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

    cwd, environ = os.getcwd(), dict(os.environ)
    try:
        with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
            workflow_api = api.workflow(
                resource_settings=ResourceSettings(),
                snakefile=Path(snakefile),
                workdir=Path(snakefile).parent,
                config_settings=ConfigSettings(configfiles=[Path(f) for f in configfiles], config=config or {}),
            )
            workflow = workflow_api._workflow  # reads the Snakefile
            if targets:
                workflow.dag_settings = DAGSettings(targets=set(targets), forceall=True)
                workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
                workflow._build_dag()
            yield workflow
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)


def rule_edges(workflow) -> set[tuple[str, str]]:
    """(rule whose output it reads, rule) of every job of the built DAG: Snakemake's rule graph."""
    dag = workflow.dag
    return {(dep.rule.name, job.rule.name) for job in dag.jobs for dep in dag.dependencies[job]}
