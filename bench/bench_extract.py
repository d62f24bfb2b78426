"""Peak memory and time of the score extraction against `output_attentions=True` and a plain forward.

Every side runs the decoder without its LM head (no logits) over the same random
sequences of the same pretrained model (SmolLM2-135M: 30 layers, 9 heads, 3 KV heads;
Gemma-3-270M: 18 layers, 4 heads, 1 KV head, sliding windows of 512):

- plain: attn_implementation="sdpa", nothing recorded: what the model costs anyway;
- eager: attn_implementation="eager", output_attentions=True, the returned per-layer
  [batch, heads, S, S] probabilities averaged afterwards (what a notebook does;
  TransformerLens' run_with_cache keeps the same tensors);
- recorder: the reduction alone, `causalpos.models.recorder.ScoreRecorder` passed to the
  attention function registered in transformers' AttentionInterface (running float64
  sums of the lower triangle per layer, transformers' SDPA for the output), then mean and SEM;
- extract: all of `causalpos.models.extract.extract_to_files` with the default run's settings
  (Figure 3's intermediates of layer 0, the position probe on up to 200 sequences at 32
  positions, 16 bootstrap groups), writing the four Parquet tables to a temporary folder.

Each side runs in its own process. "extra" memory is the peak resident set during the
computation minus the resident set just before it (model loaded, weights touched), so it
is what the method itself costs; the peak is reset through /proc/self/clear_refs first.
Time is per sequence; "x plain" is the side's time over the plain forward's at its batch.

    python bench/bench_extract.py                                  # SmolLM2, S = 1,024, 8 sequences, batch 8 and 1
    python bench/bench_extract.py --gguf gemma3-270m --threads 1 --json out.json
    python bench/bench_extract.py --sides extract --batches 1 --sequences 5 20   # memory against the sequences
    python bench/bench_extract.py --interleaved 2 --batches 8 --threads 1         # overhead against a plain forward

--interleaved runs no memory measurement: it times, on each batch in turn, the plain forward
(the recording attention given no recorder: transformers' SDPA alone), the recorder and the
extraction's per-batch step, in one process, and reports the median ratios to the plain forward.
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
FOLDERS = {"smollm2-135m": "smollm2_135m", "gemma3-270m": "gemma3_270m"}  # results/pretrained/<name>
SIDES = ("plain", "eager", "recorder", "extract")


def rss_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # Linux: reset VmHWM (the peak resident set) to the current resident set


def run_side(side: str, model, tokens, batch: int) -> dict:
    """The side's computation: a checksum (so that nothing is optimised away), for extract also the
    seconds of its loop over the batches (the rest writes the tables: a cost that does not grow with
    the number of sequences)."""
    import torch

    from causalpos.models.extract import extract_to_files
    from causalpos.models.probe_split import MIN_SEQUENCES
    from causalpos.models.recorder import ScoreRecorder
    from causalpos.catalogue.tables import ACTIVATION_TABLES

    batches = [torch.from_numpy(tokens[i:i + batch]) for i in range(0, len(tokens), batch)]
    if side == "plain":
        return {"checksum": float(sum(model.model(input_ids=b, use_cache=False).last_hidden_state[:, -1].sum()
                                      for b in batches))}
    if side == "eager":  # what one would write without the recorder: every layer's attention, output_attentions
        total = 0.0
        for b in batches:
            out = model.model(input_ids=b, output_attentions=True, use_cache=False)
            total += float(sum(a.double().mean(dim=1).sum() for a in out.attentions))
        return {"checksum": total}
    if side == "recorder":
        recorder = ScoreRecorder(model.config.num_hidden_layers, tokens.shape[1], torch.device("cpu"))
        for b in batches:
            model.model(input_ids=b, use_cache=False, causalpos_recorder=recorder)
        return {"checksum": float(recorder.mean_and_sem()[0].sum())}
    with tempfile.TemporaryDirectory(prefix="bench_extract_") as folder:
        paths = {table: Path(folder) / f"{table}.parquet" for table in ACTIVATION_TABLES}
        probe = 200 if len(tokens) >= MIN_SEQUENCES else 0
        loop = extract_to_files(model, tokens, "bench", "pretrained", paths, batch_size=batch, intermediates_layer=0,
                                probe_sequences=probe, probe_positions=32, n_groups=16, progress=False)
        return {"checksum": float(sum(p.stat().st_size for p in paths.values())), "loop_seconds": loop}


def one_side(side: str, folder: str, seq_len: int, n: int, batch: int, threads: int) -> dict:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from causalpos.models.recorder import ATTENTION_NAME

    torch.set_num_threads(threads)
    attention = {"plain": "sdpa", "eager": "eager"}.get(side, ATTENTION_NAME)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention, dtype=torch.float32).eval()
    tokens = np.random.default_rng(0).integers(0, model.config.vocab_size, size=(n, seq_len))
    with torch.no_grad():  # touch every weight once, so all sides start from the same resident set
        model.model(input_ids=torch.from_numpy(tokens[:1, :8]))
    reset_peak()
    before = rss_kib("VmRSS")
    start = time.perf_counter()
    with torch.no_grad():
        result = run_side(side, model, tokens, batch)
    seconds = time.perf_counter() - start
    peak = rss_kib("VmHWM")
    return {"side": side, "seconds": seconds, "extra_mib": (peak - before) / 1024, "peak_mib": peak / 1024,
            "before_mib": before / 1024, **result}


def interleaved(folder: str, seq_len: int, n: int, batch: int, passes: int, threads: int) -> dict:
    """Time per batch of the plain forward, the recorder and the extraction's whole per-batch step
    (recorder, intermediates, probe rows), run one after the other on each batch, in turn first, in one
    process with one model: on a machine whose load drifts, the ratios of neighbouring runs hold."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from causalpos.models import extract as extraction
    from causalpos.models.probe_split import MIN_SEQUENCES
    from causalpos.models.recorder import ATTENTION_NAME, ScoreRecorder

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=ATTENTION_NAME,
                                                 dtype=torch.float32).eval()
    tokens = np.random.default_rng(0).integers(0, model.config.vocab_size, size=(n, seq_len))
    settings = extraction.ExtractionSettings(batch_size=batch, probe_sequences=n if n >= MIN_SEQUENCES else 0)
    times = {"plain": [], "recorder": [], "extract": []}
    for _ in range(passes):
        run = extraction.ExtractionRun(model, tokens, "bench", "pretrained", settings)  # fresh sums: probe in order
        recorder = ScoreRecorder(model.config.num_hidden_layers, seq_len, torch.device("cpu"))
        for index in range(run.n_batches):
            ids = torch.from_numpy(tokens[index * batch:(index + 1) * batch])
            sides = {"plain": lambda: model.model(input_ids=ids, use_cache=False),
                     "recorder": lambda: model.model(input_ids=ids, use_cache=False, causalpos_recorder=recorder),
                     "extract": run.run_batch}
            order = list(sides)[index % 3:] + list(sides)[:index % 3]
            for side in order:
                start = time.perf_counter()
                with torch.no_grad():
                    sides[side]()
                times[side].append(time.perf_counter() - start)
    ratios = {side: float(np.median(np.array(times[side]) / np.array(times["plain"]))) for side in times}
    return {"seconds_per_batch": {side: float(np.median(t)) for side, t in times.items()}, "ratio_to_plain": ratios,
            "batches": len(times["plain"]), "batch": batch, "sequences": n}


def model_folder(path: str | None, gguf: str) -> str:
    """The safetensors folder: --model, else results/pretrained/<model>, else converted from the embedded GGUF."""
    if path:
        return path
    default = ROOT / "results" / "pretrained" / FOLDERS[gguf]
    if (default / "model.safetensors").exists():
        return str(default)
    from causalpos.models.pretrained import convert_gguf

    out = Path(tempfile.mkdtemp(prefix="bench_extract_")) / FOLDERS[gguf]
    convert_gguf({"gguf": gguf}, out, "bench")
    return str(out)


def child(side: str, folder: str, args, batch: int, n: int) -> dict:
    command = [sys.executable, __file__, "--side", side, "--model", folder, "--seq-len", str(args.seq_len),
               "--sequences", str(n), "--batches", str(batch), "--threads", str(args.threads)]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{side}, batch {batch}, {n} sequences failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "batch": batch, "sequences": n}


def report(results: list, folder: str, args) -> None:
    print(f"model {folder}, S = {args.seq_len}, {args.threads} threads")
    print(f"{'side':<9} {'batch':>5} {'seqs':>5} {'s/seq':>7} {'extra MiB':>10} {'peak MiB':>9} "
          f"{'eager/this: extra':>18} {'time x plain':>13}")
    for row in results:
        same = {r["side"]: r for r in results if r["batch"] == row["batch"] and r["sequences"] == row["sequences"]}
        per_sequence = row["seconds"] / row["sequences"]
        ratio = same["eager"]["extra_mib"] / max(row["extra_mib"], 1e-9) if "eager" in same else float("nan")
        versus = row["seconds"] / same["plain"]["seconds"] if "plain" in same else float("nan")
        row.update(seconds_per_sequence=per_sequence, eager_extra_ratio=ratio, time_vs_plain=versus)
        print(f"{row['side']:<9} {row['batch']:>5} {row['sequences']:>5} {per_sequence:>7.2f} "
              f"{row['extra_mib']:>10.0f} {row['peak_mib']:>9.0f} {ratio:>17.1f}x {versus:>12.2f}x")
    for row in results:
        if "loop_seconds" not in row:
            continue
        # the loop's time per sequence, plus the tables once (they do not grow with the sequences)
        loop, tables = row["loop_seconds"], row["seconds"] - row["loop_seconds"]
        row["estimate_1000_s"] = loop / row["sequences"] * 1000 + tables
        plain = [r for r in results if r["side"] == "plain" and (r["batch"], r["sequences"]) ==
                 (row["batch"], row["sequences"])]
        row["loop_vs_plain"] = loop / plain[0]["seconds"] if plain else float("nan")
        print(f"extract, batch {row['batch']}, {row['sequences']} sequences: loop {loop / row['sequences']:.2f} "
              f"s/sequence ({row['loop_vs_plain']:.2f}x plain), tables {tables:.1f} s; 1,000 sequences: about "
              f"{row['estimate_1000_s'] / 3600:.2f} h")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="safetensors folder (default: results/pretrained/<model>, or convert)")
    parser.add_argument("--gguf", choices=sorted(FOLDERS), default="smollm2-135m", help="embedded model")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--sequences", type=int, nargs="+", default=[8])
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 1], help="batch sizes")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--interleaved", type=int, metavar="PASSES",
                        help="instead: time plain, recorder and extract steps batch by batch in one process")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if args.side:
        print(json.dumps(one_side(args.side, args.model, args.seq_len, args.sequences[0], args.batches[0],
                                  args.threads)))
        return
    folder = model_folder(args.model, args.gguf)
    if args.interleaved:
        runs = [interleaved(folder, args.seq_len, n, batch, args.interleaved, args.threads)
                for n in args.sequences for batch in args.batches]
        print(f"model {folder}, S = {args.seq_len}, {args.threads} threads; median over batches")
        for run in runs:
            print(f"batch {run['batch']}, {run['batches']} batches: " + ", ".join(
                f"{side} {run['seconds_per_batch'][side]:.1f} s ({run['ratio_to_plain'][side]:.3f}x plain)"
                for side in run["seconds_per_batch"]))
        if args.json:
            Path(args.json).write_text(json.dumps({"interleaved": runs, "model": folder}, indent=1))
        return
    results = [child(side, folder, args, batch, n) for n in args.sequences for batch in args.batches
               for side in args.sides]
    report(results, folder, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results, "seq_len": args.seq_len, "model": folder,
                                               "threads": args.threads}, indent=1))


if __name__ == "__main__":
    main()
