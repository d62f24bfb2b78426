"""The length comparison over seeds (rule length_seeds) on a GPU machine where Snakemake is not installed.

    python bench/device_length_seeds.py --tokens-from results --results results_gpu --out $OUT --parallel 5

Copies the token blocks and the tokenizer of a finished run (rules sample and tokenizer: `--tokens-from`),
then trains both models with every seed of the comparison (training.seed and evaluation.seeds) and evaluates
each at every length factor, with the job modules and the params of rules train and length_eval (run by hand:
workflow.job.run_job; params from workflow.settings, as the rules give them), `--parallel` trainings at a time (each its own process: one GPU holds several
of these small models), and writes rule length_seeds' table and figure. Everything the table rests on (the
per-seed length_eval tables, the table, the figure, each training's metrics and seconds) goes into one tar in
`--out`. The config's defaults are filled by jsonschema alone (config.with_defaults), so only jsonschema and its
dependencies must be carried to such a machine; bench/device_check.sh installs them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import shutil
import tarfile
import time
from pathlib import Path

import yaml

from causalpos.catalogue import paths
from causalpos.workflow.config import with_defaults
from causalpos.workflow.settings import seed_runs, training_of


def one_run(config: dict, results: str, model: str, seed: int, run: str, output: str) -> dict:
    """Train one model with one seed (its run: "nope", "nope_seed1") and evaluate it at every length, as rules train
    and length_eval do; returns its timings."""
    import torch

    from causalpos.workflow.job import Job, run_job

    model_file = paths.model_file(run, "model.safetensors", results)
    blocks = paths.table_file("blocks", results)
    start = time.perf_counter()
    run_job(Job("train", wildcards={"model": run},
                input={"blocks": blocks, "tokenizer": f"{paths.tokenizer_dir(results)}/tokenizer.json"},
                output={"model": model_file},
                params={"settings": training_of(config, run), "processes": config["train_processes"],
                        "checkpoints": paths.checkpoints_dir(results)}))
    trained = time.perf_counter()
    evaluation = config["evaluation"]
    run_job(Job("length_eval", input={"model": model_file, "blocks": blocks}, output={"table": output},
                params={"factors": evaluation["length_factors"], "max_sequences": evaluation["length_sequences"],
                        "device": config["training"]["device"]}))
    peak = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
    return {"model": model, "seed": seed, "train_seconds": trained - start,
            "eval_seconds": time.perf_counter() - trained, "peak_gpu_mib": peak,
            "device": "cuda" if torch.cuda.is_available() else "cpu"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", default="config.yaml")
    parser.add_argument("--tokens-from", required=True, help="results folder of a run with tokens/ and tokenizer/")
    parser.add_argument("--results", default="results_gpu")
    parser.add_argument("--out", default="device_out")
    parser.add_argument("--parallel", type=int, default=5, help="trainings at a time")
    args = parser.parse_args()

    config = with_defaults(yaml.safe_load(Path(args.configfile).read_text()))
    for source, target in ((paths.tokens_dir(args.tokens_from), paths.tokens_dir(args.results)),
                           (paths.tokenizer_dir(args.tokens_from), paths.tokenizer_dir(args.results))):
        shutil.copytree(source, target, dirs_exist_ok=True)
    runs = [(model, seed, run, paths.table_file("length_eval", args.results, model=run))
            for model, seed, run in seed_runs(config)]
    print(f"{len(runs)} trainings, {args.parallel} at a time", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    timings, done = [], []

    def bundle(extra=()) -> None:
        """What is finished so far, into one tar (rewritten after every run: a run cut short keeps its part)."""
        (out / "length_seeds_timings.json").write_text(json.dumps(
            {"wall_seconds": time.perf_counter() - start, "runs": timings}, indent=1))
        with tarfile.open(out / "length_seeds.tar.gz", "w:gz") as tar:
            for output in done:
                tar.add(output)
                tar.add(str(Path(output).parent / "metrics.parquet"))
            for path in extra:
                tar.add(path)

    spawn = multiprocessing.get_context("spawn")  # CUDA in the workers
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.parallel, mp_context=spawn) as pool:
        futures = {pool.submit(one_run, config, args.results, model, int(seed), run, output): output
                   for model, seed, run, output in runs}
        for future in concurrent.futures.as_completed(futures):
            timings.append(future.result())
            done.append(futures[future])
            print(json.dumps(timings[-1]), flush=True)
            bundle()
    wall = time.perf_counter() - start

    from causalpos.catalogue.figures import LENGTH_SEEDS_FIGURE
    from causalpos.workflow.job import Job, run_job

    options = config["plot"]  # rule length_seeds_table's
    table = paths.table_file("length_seeds", args.results)
    figures = paths.figure_files(LENGTH_SEEDS_FIGURE, options["formats"], args.results)
    run_job(Job("length_seeds_table", input={"runs": [output for *_, output in runs]},
                output={"table": table, "figures": figures},
                params={"runs": [[model, seed] for model, seed, _, _ in runs], "options": options}))
    bundle([table, *figures])
    print(f"done in {wall:.0f} s of training and evaluation -> {out}", flush=True)


if __name__ == "__main__":
    main()
