"""Where every result comes from, read off Snakemake's own rules: which rule writes a path, and a digest of the
params and code behind a job's inputs, all the way up the DAG.

Snakemake reruns a job when its own params change, but it does not look past a missing input: when a changed
simulation (or training) job is killed, its output is gone, the figures that read it are still there with unchanged
params, and the next run says "Nothing to be done" although they show the old setting. So every rule that reads
results also gets, as a param, the digest of what its inputs were made from (`upstream`): a change of any setting or
code anywhere above a job changes that param, and the job reruns, pulling its missing inputs back in, whether or not
the intermediate files exist.

Nothing here describes the DAG a second time. A job's inputs are its rule's `input:` for its wildcards
(Rule.expand_input), the job that writes an input is found by Snakemake's own matching of the rules' outputs
(Rule.is_producer, Rule.get_wildcards), and a job's digest hashes its rule, wildcards and params (`code` among them:
workflow.digest) and the digests of the jobs whose outputs it reads. Params are plain values or functions of the
wildcards alone (the rules' convention), so they are evaluated here as Snakemake evaluates them.
"""

from __future__ import annotations

import hashlib
import json

UPSTREAM = "upstream"  # the param that holds the digest itself


def _digest(*parts) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def writer_patterns(workflow) -> list[tuple[str, str, bool]]:
    """(rule, regular expression of an output, whether it is a directory()) of every output of every rule, for a
    job to name the rule that rebuilds a damaged input (workflow.job.moved_aside)."""
    from snakemake.io import is_flagged

    return [
        (rule.name, output.regex().pattern, bool(is_flagged(output, "directory")))
        for rule in workflow.rules
        for output in rule.output
    ]


class Provenance:
    """The upstream digests of the jobs of one workflow (its config is fixed for the life of the process, so every
    job's digest is worked out once)."""

    def __init__(self, workflow):
        self.workflow = workflow
        self.products: dict[tuple, str] = {}
        self.writers: dict[str, tuple | None] = {}

    def upstream(self, rule: str, wildcards: dict) -> str:
        """The digest of what the inputs of one job of `rule` were made from ("" for a job that reads no result)."""
        jobs = self.input_jobs(rule, wildcards)
        return _digest(rule, [self.product(*job) for job in jobs]) if jobs else ""

    def product(self, rule: str, wildcards: dict) -> str:
        """The digest of one job's outputs: its rule, wildcards, params (with its code) and its upstream."""
        key = (rule, tuple(sorted(wildcards.items())))
        if key not in self.products:
            self.products[key] = _digest(rule, wildcards, self.params(rule, wildcards), self.upstream(rule, wildcards))
        return self.products[key]

    def params(self, rule: str, wildcards: dict) -> dict:
        """A job's params as its rule gives them, but the upstream digest."""
        from snakemake.iocontainers import Wildcards

        values = {}
        for name, value in self.workflow.get_rule(rule).params.items():
            if name != UPSTREAM:
                values[name] = value(Wildcards(fromdict=wildcards)) if callable(value) else value
        return values

    def inputs(self, rule: str, wildcards: dict) -> list[str]:
        """The input paths of one job of `rule`, as Snakemake expands them."""
        from snakemake.iocontainers import Wildcards

        inputs, *_ = self.workflow.get_rule(rule).expand_input(Wildcards(fromdict=wildcards))
        return [str(path) for path in inputs]

    def input_jobs(self, rule: str, wildcards: dict) -> list[tuple[str, dict]]:
        """The jobs (rule, wildcards) whose outputs one job of `rule` reads, each once, in order; an input no rule
        writes (a model the config names, an installed corpus) has no job."""
        jobs = []
        for path in self.inputs(rule, wildcards):
            job = self.writer(str(path))
            if job is not None and job not in jobs:
                jobs.append(job)
        return jobs

    def writer(self, path: str) -> tuple[str, dict] | None:
        """(rule, wildcards) of the job whose output `path` is, by Snakemake's matching of the rules' outputs."""
        if path not in self.writers:
            found = [rule for rule in self.workflow.rules if rule.output and rule.is_producer(path)]
            if len(found) > 1:
                raise ValueError(f"{path} is an output of rules {[r.name for r in found]}: one rule writes a file")
            self.writers[path] = (found[0].name, dict(found[0].get_wildcards(path))) if found else None
        return self.writers[path]
