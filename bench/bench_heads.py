"""What extraction.per_head costs: the extraction of a pretrained model with and without each head's maps.

The model is built from its config (bench/shapes/<shape>.json: SmolLM2-135M by default, 30 layers, 9 query
heads on 3 key heads; gemma3_270m: 18 layers, 4 on 1) with random weights: the time does not depend on the
weights. The sequences are the default run's (config.yaml: extraction.pretrained, 64 x 256 tokens, batch 4,
Figure 3's intermediates of layer 0, the position probe, 16 groups), random token ids. In one process, one
model:

- batches: the extraction's per-batch step (ExtractionRun.run_batch: the forward with the recorder, the
  intermediates, the probe rows) of two runs, per_head off and on, on each batch in turn (which goes first
  alternates), so that a drift of the machine's load falls on both; the median ratio on / off per batch;
- whole: extract_to_files end to end (the batches and the five tables written), off, on, on, off (--repeats
  times that pattern), its wall time, the size of head_scores.parquet and of scores.parquet.

    python bench/bench_heads.py                        # SmolLM2-135M-shaped, 64 x 256, all CPUs
    python bench/bench_heads.py --shape gemma3_270m --threads 2 --json out.json

Prints one JSON object (and writes it to --json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(shape: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from causalpos.models.recorder import ATTENTION_NAME

    spec = json.loads((ROOT / "bench" / "shapes" / f"{shape}.json").read_text())
    config = AutoConfig.for_model(spec.pop("model_type"), **{k: v for k, v in spec.items() if not k.startswith("_")})
    config._attn_implementation = ATTENTION_NAME
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=ATTENTION_NAME, dtype=torch.float32)
    return model.eval()


def default_run_settings() -> dict:
    """The extraction settings and sizes config.yaml gives a pretrained model."""
    from causalpos.workflow.config import load_config

    config = load_config(ROOT / "config.yaml", devices=False)
    section = config["extraction"]
    return {"seq_len": section["pretrained"]["seq_len"], "n_sequences": section["pretrained"]["n_sequences"],
            "settings": dict(batch_size=section["batch_size"], intermediates_layer=section["intermediates_layer"],
                             probe_sequences=section["probe_sequences"], probe_positions=section["probe_positions"],
                             n_groups=section["bootstrap_groups"])}


def batches(model, tokens, settings: dict) -> dict:
    import torch

    from causalpos.models import extract as extraction

    runs = {flag: extraction.ExtractionRun(model, tokens, "bench", "pretrained",
                                           extraction.ExtractionSettings(**settings, per_head=flag))
            for flag in (False, True)}
    times = {False: [], True: []}
    for index in range(runs[False].n_batches):
        for flag in ((False, True) if index % 2 == 0 else (True, False)):
            start = time.perf_counter()
            with torch.no_grad():
                runs[flag].run_batch()
            times[flag].append(time.perf_counter() - start)
    ratios = [on / off for on, off in zip(times[True], times[False])]
    return {"seconds_per_batch_off": statistics.median(times[False]),
            "seconds_per_batch_on": statistics.median(times[True]),
            "ratio_on_off_median": statistics.median(ratios), "batches": len(ratios),
            "loop_seconds_off": sum(times[False]), "loop_seconds_on": sum(times[True])}


def whole(model, tokens, settings: dict, repeats: int) -> dict:
    from causalpos.models.extract import extract_to_files
    from causalpos.catalogue.tables import ACTIVATION_TABLES

    seconds, sizes = {False: [], True: []}, {}
    for flag in [False, True, True, False] * repeats:
        with tempfile.TemporaryDirectory(prefix="bench_heads_") as folder:
            paths = {table: Path(folder) / f"{table}.parquet" for table in ACTIVATION_TABLES}
            start = time.perf_counter()
            extract_to_files(model, tokens, "bench", "pretrained", paths, progress=False, per_head=flag, **settings)
            seconds[flag].append(time.perf_counter() - start)
            sizes[flag] = {table: path.stat().st_size for table, path in paths.items()}
    off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
    return {"seconds_off": seconds[False], "seconds_on": seconds[True], "ratio_on_off": on / off,
            "head_scores_bytes": sizes[True]["head_scores"], "head_scores_bytes_off": sizes[False]["head_scores"],
            "scores_bytes": sizes[True]["scores"], "all_tables_bytes_off": sum(sizes[False].values()),
            "all_tables_bytes_on": sum(sizes[True].values())}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="smollm2_135m", help="a file of bench/shapes (without .json)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--repeats", type=int, default=1, help="times the off, on, on, off pattern of `whole`")
    parser.add_argument("--sequences", type=int, help="instead of the default run's n_sequences")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT / "src"))
    torch.set_num_threads(args.threads)
    run = default_run_settings()
    n = args.sequences or run["n_sequences"]
    model = build(args.shape)
    tokens = np.random.default_rng(0).integers(0, model.config.vocab_size, size=(n, run["seq_len"]))
    config = model.config
    result = {"shape": args.shape, "layers": config.num_hidden_layers, "heads": config.num_attention_heads,
              "kv_heads": config.num_key_value_heads, "seq_len": run["seq_len"], "sequences": n,
              "threads": args.threads, "settings": run["settings"], "torch": torch.__version__,
              "head_sums_mib": config.num_hidden_layers * config.num_attention_heads
              * run["seq_len"] * (run["seq_len"] + 1) / 2 * 8 / 2 ** 20}
    result["batches"] = batches(model, tokens, run["settings"])
    result["whole"] = whole(model, tokens, run["settings"], args.repeats)
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
