"""What every result was made from: a digest of the params and code behind it, all the way up the DAG.

Snakemake reruns a job when its own params change, but it does not look past a missing input: when a
changed simulation (or training) job is killed, its output is gone, the figures that read it are
still there with unchanged params, and the next run says "Nothing to be done" although they show the
old setting. So every rule that reads results also gets, as a param, the digest of what its inputs
were made from (`upstream`): a change of any setting or code anywhere above a job changes that param,
and the job reruns, pulling its missing inputs back in, whether or not the intermediate files exist.

A job's digest hashes its stage, wildcards, params and code digest (workflow.dag: the same params its rule
gets) and the digests of the jobs whose outputs it reads (dag.input_jobs, from the files it reads).
"""

from __future__ import annotations

import hashlib
import json
from causalpos.workflow import dag


def _digest(*parts) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _key(name: str, wildcards: dict) -> tuple:
    return name, tuple(sorted((k, str(v)) for k, v in wildcards.items()))


def product(config: dict, results: str, name: str, memo: dict | None = None, **wildcards) -> str:
    """The digest of one job's outputs: what they were made from."""
    memo = {} if memo is None else memo
    key = _key(name, wildcards)
    if key not in memo:
        entry = dag.stage(name)
        memo[key] = _digest(name, dict(key[1]), entry.params(config, results, **wildcards), dag.code(name),
                            _upstream(config, results, name, memo, wildcards))
    return memo[key]


def _upstream(config: dict, results: str, name: str, memo: dict, wildcards: dict) -> str:
    jobs = dag.input_jobs(config, results, name, **wildcards)
    if not jobs:
        return ""
    return _digest(name, [product(config, results, writer, memo, **job) for writer, job in jobs])


def upstream(config: dict, results: str, name: str, **wildcards) -> str:
    """The digest of what the inputs of one job of stage `name` were made from ("" for a job without inputs)."""
    return _upstream(config, results, name, {}, wildcards)
