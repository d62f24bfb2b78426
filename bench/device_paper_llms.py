"""Time and memory of `paper_llms`'s extraction on a GPU, at the paper's size, for models whose weights cannot travel.

The embedded GGUF models (100+ MB) and the paper's 8B models exceed what a call to a lent GPU machine carries, and
such a machine reaches no network. Time and memory of the extraction do not depend on the weights' values, so
this builds each model from its real config (bench/shapes/*.json: SmolLM2-135M's and Gemma-3-270M's as our
conversion writes them; Llama-3.1-8B, Qwen3-8B and Phi-4 as published) with random weights, in bf16 on CUDA as
`load_for_extraction` loads them, and runs the pipeline's own extraction (`extract_to_files`, paper_llms's
settings: 1,024 tokens, batch 8, 64 groups (`--groups`, several to compare), Figure 3's layer-0 intermediates, the probe on 200 sequences) on
random token ids. The numbers it prints are the cost of the extraction; the scores themselves mean nothing.

    python bench/device_paper_llms.py --shapes smollm2_135m gemma3_270m llama3.1_8b --sequences 1000 \\
        --json $OUT/paper_llms_gpu.json --budget-s 420

Per shape: build seconds, extraction seconds (the run's own clock), tokens/s, peak GPU memory
(torch.cuda.max_memory_allocated), peak RSS of the process so far, the tables' sizes. A shape is not started
when less than --min-left-s is left of --budget-s; the JSON says which ran. `--device cpu` (tiny sizes) is
the script's own smoke test on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

SHAPES = Path(__file__).resolve().parent / "shapes"


def build(shape: str, device):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from causalpos.models.extract import ATTENTION_NAME

    config = AutoConfig.for_model(**json.loads((SHAPES / f"{shape}.json").read_text()))
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation=ATTENTION_NAME)
    return model.eval(), config


def measure(
    shape: str, sequences: int, seq_len: int, batch: int, device, per_head: bool = False, groups: int = 64
) -> dict:
    import numpy as np
    import torch

    from causalpos.models.extract import extract_to_files
    from causalpos.catalogue.tables import ACTIVATION_TABLES

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    model, config = build(shape, device)
    built = time.perf_counter() - started
    print(f"{shape}: built in {built:.1f} s", file=sys.stderr, flush=True)
    weights = torch.cuda.max_memory_allocated() if cuda else float("nan")
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, size=(sequences, seq_len))
    with tempfile.TemporaryDirectory(prefix=f"paper-llms-{shape}-") as folder:
        paths = {t: Path(folder) / f"{t}.parquet" for t in ACTIVATION_TABLES}
        seconds = extract_to_files(model, tokens, shape, "pretrained", paths, progress=False, batch_size=batch,
                                   intermediates_layer=0, probe_sequences=200, probe_positions=32, seed=0,
                                   n_groups=groups, per_head=per_head)
        sizes = {t: p.stat().st_size for t, p in paths.items()}
    out = {"shape": shape, "per_head": per_head, "groups": groups, "parameters": sum(p.numel() for p in model.parameters()),
           "layers": config.num_hidden_layers, "sequences": sequences, "seq_len": seq_len, "batch_size": batch,
           "build_s": built, "extract_s": seconds, "tokens_per_s": sequences * seq_len / seconds,
           "weights_gib": weights / 2 ** 30, "peak_gpu_gib": (torch.cuda.max_memory_allocated() if cuda else float("nan")) / 2 ** 30,
           "peak_rss_gib_so_far": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20,
           "table_bytes": sizes}
    del model
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["smollm2_135m", "gemma3_270m"])
    parser.add_argument("--sequences", type=int, default=1000)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--min-left-s", type=float, default=150.0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--per-head", nargs="*", default=[], metavar="SHAPE",
                        help="shapes also measured with extraction.per_head (each after its run without)")
    parser.add_argument("--groups", type=int, nargs="+", default=[64],
                        help="extraction.paper_llms.bootstrap_groups to measure each shape at (64 in config.yaml)")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()

    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("device_paper_llms: no CUDA device", file=sys.stderr)
        return 2
    start, results = time.perf_counter(), []
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    report = {"device": name, "torch": torch.__version__, "results": results, "skipped": []}
    for shape in args.shapes:
        left = args.budget_s - (time.perf_counter() - start)
        if left < args.min_left_s:
            report["skipped"].append({"shape": shape, "left_s": left})
            continue
        for per_head in (False, True) if shape in args.per_head else (False,):
            if per_head and args.budget_s - (time.perf_counter() - start) < args.min_left_s:
                report["skipped"].append({"shape": shape, "per_head": True})
                continue
            for groups in args.groups:
                results.append(measure(shape, args.sequences, args.seq_len, args.batch, device, per_head, groups))
                print(json.dumps(results[-1]), flush=True)
                Path(args.json).write_text(json.dumps(report, indent=1))
    Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
