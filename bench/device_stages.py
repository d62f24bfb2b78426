"""`causalpos` stages on a GPU machine where Snakemake is not installed: the trained models' part of a config.

    python bench/device_stages.py --configfile config/nope-large.yaml --tokens-from results --out $OUT

Copies the token blocks and the tokenizer of a finished run (rules sample and tokenizer: `--tokens-from`; the
config must have the same data and tokenizer settings), then runs, through the CLI (`causalpos <stage>`, the
rules' runners and parameters), both trainings side by side, both extractions, every simulation variant, the
closed forms and the claims ledger, and bundles the ledger and the tables it rests on into one tar in `--out`.
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
from causalpos.workflow import dag
from causalpos.workflow.config import with_defaults
from causalpos.catalogue.models import TRAINED as MODELS

# the CLI with the jsonschema-only validation, in a fresh process per stage (one CUDA context each)
CLI = ("import sys; import causalpos.workflow.config as c; c.validate_config = lambda config, devices=True: "
       "c.with_defaults(config); from causalpos.workflow.cli import main; sys.exit(main(sys.argv[1:]))")


def stage(configfile: str, *command: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLI, "--configfile", configfile, *command])


def run_all(configfile: str, commands: list[list[str]], timings: dict) -> None:
    """Run the commands side by side and wait for all; a failure stops the script."""
    start = time.perf_counter()
    running = [(command, stage(configfile, *command)) for command in commands]
    for command, process in running:
        if process.wait():
            raise SystemExit(f"causalpos {' '.join(command)} failed ({process.returncode})")
    timings[" + ".join(" ".join(c) for c in commands)] = time.perf_counter() - start
    print(f"done: {commands} in {time.perf_counter() - start:.0f} s", flush=True)


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
    models = MODELS
    run_all(args.configfile, [["train", m] for m in models], timings)
    run_all(args.configfile, [["extract", m] for m in models]
            + [["simulate", v] for v in config["simulation"]["variants"]] + [["theory"]], timings)
    run_all(args.configfile, [["claims"]], timings)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stages_timings.json").write_text(json.dumps(timings, indent=1))
    claims = dag.inputs(config, results, "claims")
    with tarfile.open(out / "stages.tar.gz", "w:gz") as tar:
        for path in dag.flatten(claims) + [paths.summary_file(f"claims.{ext}", results) for ext in ("parquet", "md")]:
            if Path(path).exists():
                tar.add(path)
        for model in models:
            tar.add(paths.model_file(model, "metrics.parquet", results))
    print(f"bundled into {out / 'stages.tar.gz'}", flush=True)


if __name__ == "__main__":
    main()
