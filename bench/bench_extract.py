"""Peak memory and time of the score extraction against `output_attentions=True` with eager attention.

Both sides average every layer's attention over the same sequences of the same
pretrained model (SmolLM2-135M by default: 30 layers, 9 heads, 3 KV heads),
running the decoder without its LM head (no logits on either side):

- recorder: the reduction alone, `causalpos.models.extract.ScoreRecorder` passed to the
  attention function registered in transformers' AttentionInterface (running
  float64 sums per layer, transformers' SDPA for the output), then mean and SEM;
- extract: all of `causalpos.models.extract.extract` (the same reduction, plus the long
  Parquet-ready table of every layer's lower triangle);
- eager: attn_implementation="eager", output_attentions=True, the returned
  per-layer [batch, heads, S, S] probabilities averaged afterwards (what a
  notebook does; TransformerLens' run_with_cache keeps the same tensors).

Our sides run at the eager batch and at --our-batch (1 by default: the reduction's
memory does not depend on how many sequences there are, so it needs no big batch).

Each side runs in its own process. "extra" memory is the peak resident set
during the computation minus the resident set just before it (model loaded,
weights touched), so it is what the method itself costs; the peak is reset
through /proc/self/clear_refs before each measurement.

    python bench/bench_extract.py                       # S = 512, 8 sequences; eager batch 8, ours 8 and 1
    python bench/bench_extract.py --seq-len 1024 --sequences 16 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def rss_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # Linux: reset VmHWM (the peak resident set) to the current resident set


def one_side(side: str, folder: str, seq_len: int, n: int, batch: int, threads: int) -> dict:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from causalpos.models.extract import ATTENTION_NAME, ScoreRecorder, extract, mean_probabilities_eager

    torch.set_num_threads(threads)
    attention = "eager" if side == "eager" else ATTENTION_NAME
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention, dtype=torch.float32).eval()
    tokens = np.random.default_rng(0).integers(0, model.config.vocab_size, size=(n, seq_len))
    batches = [torch.from_numpy(tokens[i:i + batch]) for i in range(0, n, batch)]
    with torch.no_grad():  # touch every weight once, so both sides start from the same resident set
        model.model(input_ids=batches[0][:1, :8])
    reset_peak()
    before = rss_kib("VmRSS")
    start = time.perf_counter()
    with torch.no_grad():
        if side == "extract":
            result = extract(model, tokens, "bench", "pretrained", batch_size=batch, intermediates_layer=None,
                             probe_sequences=0)
            checksum = float(result.scores["score_mean"].sum())
        elif side == "recorder":
            recorder = ScoreRecorder(model.config.num_hidden_layers, seq_len, torch.device("cpu"))
            for tokens_batch in batches:
                model.model(input_ids=tokens_batch, use_cache=False, causalpos_recorder=recorder)
            checksum = float(recorder.mean_and_sem()[0].sum())
        else:
            checksum = float(mean_probabilities_eager(model, tokens, batch_size=batch).sum())
    seconds = time.perf_counter() - start
    peak = rss_kib("VmHWM")
    return {"side": side, "seconds": seconds, "extra_mib": (peak - before) / 1024, "peak_mib": peak / 1024,
            "before_mib": before / 1024, "checksum": checksum}


def model_folder(path: str | None) -> str:
    """The safetensors folder of the pretrained model; converted from the embedded GGUF when not given."""
    if path:
        return path
    default = ROOT / "results" / "pretrained" / "smollm2_135m"
    if (default / "model.safetensors").exists():
        return str(default)
    from causalpos.models.pretrained import convert_gguf

    out = Path(tempfile.mkdtemp(prefix="bench_extract_")) / "smollm2_135m"
    convert_gguf({"gguf": "embedded"}, out, "bench")
    return str(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="safetensors folder (default: results/pretrained/smollm2_135m, or convert)")
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8, help="batch of the eager side (and of ours, once)")
    parser.add_argument("--our-batch", type=int, default=1, help="our second batch size")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--side", choices=["recorder", "extract", "eager"], help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if args.side:
        print(json.dumps(one_side(args.side, args.model, args.seq_len, args.sequences, args.batch, args.threads)))
        return

    folder = model_folder(args.model)
    runs = [("eager", args.batch), ("recorder", args.batch), ("extract", args.batch),
            ("recorder", args.our_batch), ("extract", args.our_batch)]
    results = []
    for side, batch in runs:
        out = subprocess.run([sys.executable, __file__, "--side", side, "--model", folder, "--seq-len",
                              str(args.seq_len), "--sequences", str(args.sequences), "--batch", str(batch),
                              "--threads", str(args.threads)], check=True, capture_output=True, text=True)
        results.append({**json.loads(out.stdout.strip().splitlines()[-1]), "batch": batch})
    eager = results[0]
    print(f"model {folder}, S = {args.seq_len}, {args.sequences} sequences, {args.threads} threads")
    print(f"{'side':<10} {'batch':>5} {'time s':>8} {'extra MiB':>10} {'peak MiB':>9} "
          f"{'eager/this: extra mem':>22} {'peak mem':>9} {'time':>6}")
    for row in results:
        row["extra_memory_ratio"] = eager["extra_mib"] / max(row["extra_mib"], 1e-9)
        row["peak_memory_ratio"] = eager["peak_mib"] / row["peak_mib"]
        row["time_ratio"] = eager["seconds"] / row["seconds"]
        print(f"{row['side']:<10} {row['batch']:>5} {row['seconds']:>8.2f} {row['extra_mib']:>10.0f} "
              f"{row['peak_mib']:>9.0f} {row['extra_memory_ratio']:>21.1f}x {row['peak_memory_ratio']:>8.1f}x "
              f"{row['time_ratio']:>5.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results, "seq_len": args.seq_len,
                                               "sequences": args.sequences}, indent=1))


if __name__ == "__main__":
    main()
