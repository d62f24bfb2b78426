"""The rules' jobs on a GPU machine without Snakemake's scheduler: the trained models' part of a config.

    python bench/device_stages.py --configfile config/nope-large.yaml --tokens-from results --out $OUT

Copies the token blocks and the tokenizer of a finished run (rules sample and tokenizer: `--tokens-from`; the
config must have the same data and tokenizer settings), then runs the rules' job modules by hand
(workflow.job.run_job, a fresh process per job: one CUDA context each; inputs, outputs and params as the rules
give them, params from workflow.settings): both trainings side by side, both extractions, every simulation
variant and the closed forms, then the claims ledger of the trained models, and bundles the ledger and the
tables it rests on into one tar in `--out`.
Snakemake is the config's validator elsewhere; here its defaults are filled by jsonschema alone
(config.with_defaults) and check_config's machine checks (the embedded corpora, which such a machine lacks) are
skipped. Timings go to stages_timings.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import yaml

from causalpos.catalogue import paths
from causalpos.catalogue import figures as figure_paths
from causalpos.catalogue.models import TRAINED
from causalpos.workflow import settings
from causalpos.workflow.config import with_defaults

RUN = "import json, sys; from causalpos.workflow.job import Job, run_job; run_job(Job(**json.loads(sys.argv[1])))"


def start(job: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN, json.dumps(job)])


def run_all(jobs: list[dict], timings: dict) -> None:
    """Run the jobs side by side and wait for all; a failure stops the script."""
    begin = time.perf_counter()
    running = [(job, start(job)) for job in jobs]
    for job, process in running:
        if process.wait():
            raise SystemExit(f"{job['rule']} {job.get('wildcards', {})} failed ({process.returncode})")
    name = " + ".join(f"{job['rule']} {' '.join(job.get('wildcards', {}).values())}".strip() for job in jobs)
    timings[name] = time.perf_counter() - begin
    print(f"done: {name} in {timings[name]:.0f} s", flush=True)


def jobs_of(config: dict, results: str) -> tuple[list[dict], list[dict], dict]:
    """The trainings; the extractions, simulations and closed forms; the ledger of the trained models: each job as
    its rule gives it (rules/train.smk, extract.smk, theory.smk, claims.smk)."""
    blocks, tokenizer = paths.table_file("blocks", results), f"{paths.tokenizer_dir(results)}/tokenizer.json"
    trainings = [{"rule": "train", "wildcards": {"model": m}, "input": {"blocks": blocks, "tokenizer": tokenizer},
                  "output": {"model": paths.model_file(m, "model.safetensors", results)},
                  "params": {"settings": settings.training_of(config, m), "processes": config["train_processes"],
                             "checkpoints": paths.checkpoints_dir(results)}} for m in TRAINED]
    extractions = [{"rule": "extract", "wildcards": {"model": m},
                    "input": {"tokens": paths.tokens_file("snippets.npy", results)},
                    "output": paths.activation_tables(m, results),
                    "params": {"settings": settings.extraction_settings(config, m),
                               "location": settings.model_location(config, m, results),
                               "device": config["extraction"]["device"], "seed": config["data"]["seed"],
                               "state": paths.extraction_state_dir(m, results)}} for m in TRAINED]
    variants = settings.recursion_variants(config)
    simulations = [{"rule": "simulate", "wildcards": {"variant": v}, "threads": config["simulation"]["threads"],
                    "output": {"table": paths.simulation_table(v, results),
                               "groups": paths.simulation_groups(v, results)},
                    "params": {"variant": variants[v], "device": config["device"],
                               "chunk_size": config["simulation"]["chunk_size"]}} for v in variants]
    theory = {"rule": "theory", "output": {"table": paths.theory_table(results)},
              "params": {key: config["theory"][key] for key in ("seq_len", "alphas")}}
    inputs = {"simulations": [paths.simulation_table(v, results) for v in variants],
              "simulation_groups": [paths.simulation_groups(v, results) for v in variants],
              "theory": [paths.theory_table(results)],
              **{t: [paths.activation_table(m, t, results) for m in TRAINED] for t in ("scores", "intermediates", "groups")}}
    claims = {"rule": "claims", "input": inputs,
              "output": {"table": paths.table_file("claims", results),
                         "markdown": paths.summary_file("claims.md", results), "figures": figure_paths.claims_dir(results)},
              "params": {"settings": config["claims"], "options": settings.plot_options(config), "claim": None}}
    return trainings, [*extractions, *simulations, theory], claims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", required=True)
    parser.add_argument("--tokens-from", required=True, help="results folder of a run with tokens/ and tokenizer/")
    parser.add_argument("--out", default="device_out")
    args = parser.parse_args()

    config = with_defaults(yaml.safe_load(Path(args.configfile).read_text()))
    results = config["results"]
    for source, target in ((paths.tokens_dir(args.tokens_from), paths.tokens_dir(results)),
                           (paths.tokenizer_dir(args.tokens_from), paths.tokenizer_dir(results))):
        shutil.copytree(source, target, dirs_exist_ok=True)
    timings = {}
    trainings, analyses, claims = jobs_of(config, results)
    run_all(trainings, timings)
    run_all(analyses, timings)
    run_all([claims], timings)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stages_timings.json").write_text(json.dumps(timings, indent=1))
    with tarfile.open(out / "stages.tar.gz", "w:gz") as tar:
        read = [path for files in claims["input"].values() for path in files]
        for path in read + [claims["output"]["table"], claims["output"]["markdown"]]:
            if Path(path).exists():
                tar.add(path)
        for model in TRAINED:
            tar.add(paths.table_file("metrics", results, model=model))
    print(f"bundled into {out / 'stages.tar.gz'}", flush=True)


if __name__ == "__main__":
    main()
