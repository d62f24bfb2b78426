"""One prepared run on a lent GPU machine: the CUDA paths of causalpos against its CPU paths, timed side by side.

    bash bench/device_check.sh                      # on the GPU machine (installs the carried wheels first)
    DEVICE_CHECK_QUICK=1 bash bench/device_check.sh # tiny sizes and model: the script's own test (~1.5 min, 2 CPUs)

Four parts, each in try/except (a failure is recorded and the next part runs), under one time budget
(DEVICE_CHECK_BUDGET_S; a step that would not fit is skipped and says so):

1. simulation: `engine.simulate` with the torch backend on CUDA against the numba kernel on all CPUs, at the
   paper's scale (Section 4.1: N = 100,000, n = 50, d = 64, 4 layers) for l2 alpha 0, l2 alpha 0.2 with the
   authors' sampler, LayerNorm sqrt(d) and RoPE (causal); seconds, peak GPU memory, and the agreement of the
   means (z = difference / combined SEM; the two sides draw different random streams).
2. training: rule train's job (causalpos.jobs.train) of the default model (config.yaml's training section) on synthetic token
   blocks (an order-1 Markov chain over a few hundred token ids of the full 8,192 vocabulary, so that the loss
   has something to fall to), ~300 steps on CUDA (bf16 autocast, as train() does there) and a few on the CPU.
3. extraction: rule extract's job (causalpos.jobs.extract) of the CUDA-trained model on 200 snippets of 50 tokens, on CUDA (bf16
   weights, as load_for_extraction loads them there) and on the CPU (fp32), the score means compared.
4. if time is left, the training of 2. at micro batch 32 on CUDA (how much the default batch of 4 leaves idle).

Without CUDA every CUDA side is skipped and the comparisons run CPU against CPU where that still checks
something: the torch backend on the CPU against the numba kernel (the same statistical test), and the
extraction at two batch sizes (float rounding only). Writes summary.json and summary.md to $OUT (default
./device_out) after every part, so a run cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

QUICK = os.environ.get("DEVICE_CHECK_QUICK", "") not in ("", "0")
# Our thresholds, not the paper's (see the notes written into summary.md).
MAX_ABS_Z = 5.5  # ~2x10^4 z-scores per variant: P(max |z| > 5.5) ~ 1e-3 if they were independent N(0, 1)
BF16_RTOL = 2.0 ** -5  # 8 bf16 unit roundoffs (u = 2^-8): bf16 weights and activations through 4 layers
SAME_DEVICE_RTOL = 1e-4  # float32 on one device, batches of another size: summation order only
LOSS_ATOL_BF16 = 0.05  # nats: the untrained model's held-out loss under bf16 autocast against fp32
GROUP_SUMS_RTOL = 1e-6  # float64 sums of float32 scores: rounding alone stays far below
LOSS_FALL = 0.5  # nats: held-out loss from step 0 to the end of the CUDA training
THRESHOLDS = (f"Thresholds are ours: simulation max |z| < {MAX_ABS_Z} (and entries constant up to float32 rounding "
              f"within 1e-4), per-group score sums / N = mean within {GROUP_SUMS_RTOL} (relative); extraction max "
              f"|diff| <= rtol x max |score mean| per layer, rtol = 2^-5 for bf16 CUDA against fp32 CPU (8 bf16 unit "
              f"roundoffs), {SAME_DEVICE_RTOL} for two batch sizes on one device; step-0 held-out loss CUDA vs CPU "
              f"within {LOSS_ATOL_BF16} nats; the loss falls by more than {LOSS_FALL} nats.")
QUICK_MODEL = {"n_layers": 2, "hidden_size": 64, "n_heads": 2, "n_kv_heads": 1, "head_dim": 32,
               "intermediate_size": 128, "context": 256}


class Budget:
    def __init__(self, seconds: float):
        self.start, self.seconds = time.perf_counter(), seconds

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)

    def allows(self, need: float, what: str, record: dict) -> bool:
        if self.left() >= need:
            return True
        record.setdefault("skipped", []).append(f"{what}: needs ~{need:.0f} s, {self.left():.0f} s left")
        print(f"   skip {what}: needs ~{need:.0f} s, {self.left():.0f} s of the budget left")
        return False


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def attempt(rec: dict, key: str, fn, *args, **kwargs):
    """fn's result, or None with its error recorded under rec["errors"][key]: the other steps of a part go on."""
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001
        traceback.print_exc()
        rec.setdefault("errors", {})[key] = f"{type(err).__name__}: {err}"
        return None


def cuda_peak_reset(cuda: bool) -> None:
    import torch

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def cuda_peak_mib(cuda: bool):
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None


# ---------------------------------------------------------------- 1. simulation


def simulation_variants():
    """(label, Variant) of the check, sampler names read from variant.SAMPLERS (they have been renamed before)."""
    from causalpos.simulation.variant import SAMPLERS, Variant

    n = 512 if QUICK else 100_000
    authors = next((s for s in SAMPLERS if s == "official"), None) or next(
        (s for s in SAMPLERS if "official" in s or "paper" in s or "author" in s), None)
    reduced = next((s for s in SAMPLERS if "reduced" in s), None)
    out = [("l2, alpha 0", Variant(n_samples=n))]
    if authors is not None:
        out.append((f"l2, alpha 0.2, {authors}", Variant(alpha=0.2, sampler=authors, n_samples=n)))
    else:
        out.append(("l2, alpha 0.2 (no authors' sampler in SAMPLERS: default)", Variant(alpha=0.2, n_samples=n)))
    out.append(("LayerNorm, sqrt(d)", Variant(norm="layernorm", scale="sqrt_d", n_samples=n)))
    out.append(("RoPE, causal", Variant(pe="rope", n_samples=n)))
    if reduced is not None and Variant().sampler != reduced:
        out.append((f"l2, alpha 0, {reduced}", Variant(sampler=reduced, n_samples=n)))
    if "window" in {f.name for f in dataclasses.fields(Variant)}:  # issue 25's sliding window
        out.append(("l2, alpha 0, window 16", Variant(window=16, n_samples=n)))
        out.append(("RoPE, causal, window 16", Variant(pe="rope", window=16, n_samples=n)))
    return out


def result_arrays(result) -> dict:
    return {k: np.asarray(getattr(result, k)) for k in ("score_mean", "score_sem", "prob_mean", "prob_sem")}


def group_sums_error(result):
    """max |sum of the per-group score sums / N - score mean|, relative to max |score mean| (None: no group sums).

    The groups partition the samples (the block standard errors of issue 23 are computed from them), so their
    sums must add up to N x the mean up to float64 rounding, on every backend and device."""
    sums, sizes = getattr(result, "group_score_sums", None), getattr(result, "group_sizes", None)
    if sums is None or sizes is None:
        return None
    total = np.asarray(sums, dtype=np.float64).sum(axis=0) / np.asarray(sizes).sum()
    return float(np.abs(total - result.score_mean).max() / max(1.0, np.abs(result.score_mean).max()))


def part_simulation(ctx, rec: dict) -> None:
    import torch
    from bench_simulate import agreement  # bench/ is on sys.path: this script's folder

    from causalpos.simulation.engine import simulate
    from causalpos.simulation.sampling import RNG_BLOCK

    rec.update(threads=ctx.cpus, rows=[])
    chunks = [1024, 16384] if ctx.cuda else [1024]  # 1024: config.yaml's simulation.chunk_size
    other = "cuda" if ctx.cuda else "cpu"  # without CUDA: the torch backend on the CPU, same test
    for label, v in simulation_variants():
        row = {"variant": label, "params": v.params()}
        if ctx.cuda:
            row["cuda_tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        rec["rows"].append(row)
        if not ctx.budget.allows(12 if QUICK else 25, f"simulation {label}", rec):
            continue
        try:
            say(f"simulation {label}: {v.n_samples:,} samples")
            start = time.perf_counter()
            simulate(dataclasses.replace(v, n_samples=2), device="cpu", backend="numba", threads=ctx.cpus)
            row["cpu_first_call_s"] = round(time.perf_counter() - start, 2)  # numba compile or cache load
            cpu = simulate(v, device="cpu", backend="numba", threads=ctx.cpus)
            row["sampler"] = cpu.sampler
            row["cpu_group_sums_rel_err"] = group_sums_error(cpu)
            row["cpu_numba_s"] = round(cpu.seconds, 3)
            say(f"   cpu numba ({ctx.cpus} threads): {cpu.seconds:.2f} s (first call {row['cpu_first_call_s']} s)")
            cuda_peak_reset(ctx.cuda)
            start = time.perf_counter()
            simulate(dataclasses.replace(v, n_samples=4 * RNG_BLOCK), device=other, backend="torch")
            row[f"{other}_torch_first_call_s"] = round(time.perf_counter() - start, 2)
            for chunk in chunks:
                cuda_peak_reset(ctx.cuda)
                res = simulate(v, device=other, backend="torch", chunk_size=chunk)
                row[f"{other}_torch_s_chunk{chunk}"] = round(res.seconds, 3)
                row[f"{other}_peak_mib_chunk{chunk}"] = cuda_peak_mib(ctx.cuda)
                say(f"   {other} torch, chunk {chunk}: {res.seconds:.2f} s, peak {cuda_peak_mib(ctx.cuda)} MiB")
                if chunk == chunks[0]:
                    a = agreement(result_arrays(cpu), result_arrays(res), v)
                    row["agreement"] = {k: round(x, 4) if isinstance(x, float) else x for k, x in a.items()}
                    row["agree_ok"] = bool(a["max_abs_z"] < MAX_ABS_Z and a["max_abs_diff_degenerate"] < 1e-4)
                    row[f"{other}_group_sums_rel_err"] = group_sums_error(res)
                    errs = [row[f"{side}_group_sums_rel_err"] for side in ("cpu", other)]
                    if None not in errs:
                        row["group_sums_ok"] = bool(max(errs) < GROUP_SUMS_RTOL)
                        say(f"   group sums add up to N x mean: relative error cpu {errs[0]:.1e}, "
                            f"{other} {errs[1]:.1e}")
                    say(f"   agreement vs numba: {a['entries']} entries, max |z| {a['max_abs_z']:.2f}, "
                        f"z mean {a['mean_z']:+.3f}, std {a['std_z']:.3f} -> {'ok' if row['agree_ok'] else 'FAIL'}")
            row["cpu_s_over_torch_s"] = round(row["cpu_numba_s"] / min(
                row[f"{other}_torch_s_chunk{c}"] for c in chunks), 2)
        except Exception as err:  # noqa: BLE001 - recorded, and the next variant runs
            row["error"] = f"{type(err).__name__}: {err}"
            traceback.print_exc()
        ctx.save()
    rec["compared"] = f"numba on {ctx.cpus} CPU threads vs torch on {other}"


# ---------------------------------------------------------------- 2. training


def markov_blocks(root: Path, block_len: int, vocab: int, n_train: int, n_heldout: int, n_snippets: int,
                  snippet_len: int, active: int = 512, seed: int = 0) -> tuple[Path, Path]:
    """Token blocks in the data stage's format, and snippets: an order-1 Markov chain over `active` ids of the
    vocabulary (3 successors each), every block a fresh start. Loss floor ln 3, unigram ~ ln(active)."""
    from causalpos.corpus.tokens import unigram_entropy

    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(1, vocab), active, replace=False)  # 0 is the eos id, never drawn
    successors = rng.integers(0, active, (active, 3))

    def chain(n_rows: int, length: int) -> np.ndarray:
        out = np.empty((n_rows, length), dtype=np.uint16)
        state = rng.integers(0, active, n_rows)
        for t in range(length):  # vectorised over rows: ~256 numpy steps
            out[:, t] = ids[state]
            state = successors[state, rng.integers(0, 3, n_rows)]
        return out

    blocks = root / "blocks"
    blocks.mkdir(parents=True)
    train, heldout = chain(n_train, block_len), chain(n_heldout, block_len)
    np.save(blocks / "train.npy", train)
    np.save(blocks / "heldout.npy", heldout)
    (blocks / "blocks.json").write_text(json.dumps({
        "block_len": block_len, "dtype": "uint16", "vocab_size": vocab, "eos_token_id": 0,
        "n_blocks_train": n_train, "n_tokens_train": n_train * block_len, "n_blocks_heldout": n_heldout,
        "n_tokens_heldout": n_heldout * block_len, "train_unigram_entropy": unigram_entropy(train.ravel(), vocab),
        "synthetic": f"order-1 Markov chain over {active} ids, 3 successors each"}))
    snippets = root / "snippets.npy"
    np.save(snippets, chain(n_snippets, snippet_len))
    return blocks, snippets


def default_config_section(key: str) -> dict:
    """A section of config.yaml as written (validating it needs snakemake, which the GPU machine lacks)."""
    import yaml

    path = Path(__file__).resolve().parents[1] / "config.yaml"
    return (yaml.safe_load(path.read_text()) or {}).get(key) or {}


def train_once(ctx, blocks: Path, out: Path, device: str, steps: int, **overrides) -> dict:
    import pandas as pd

    from causalpos.workflow.config import training_defaults
    from causalpos.workflow.job import Job, run_job

    section = default_config_section("training")
    if QUICK:  # a tiny model of the same code: the quick run tests the script, not the machine
        section["model"] = {**section.get("model", {}), **QUICK_MODEL}
    section = {**section, "steps": steps, "device": device, "threads": ctx.cpus,
               "warmup_steps": min(100, steps // 3), "eval_every": steps, "eval_batches": 8,
               "checkpoint_every": 0, "log_every": max(1, min(20, steps // 4)), **overrides}
    settings = training_defaults(section)
    cuda = device == "cuda"
    cuda_peak_reset(cuda)
    start = time.perf_counter()
    run_job(Job("train", wildcards={"model": "nope"}, input={"blocks": str(Path(blocks) / "blocks.json")},
                output={"model": str(out / "model.safetensors")},
                params={"settings": settings, "processes": 1, "checkpoints": str(out.parent / f"{out.name}-ckpt"),
                        "throughput": str(out / "throughput.tsv")}))
    wall = time.perf_counter() - start
    metrics = pd.read_parquet(out / "metrics.parquet")
    metrics["tokens_per_s"] = pd.read_csv(out / "throughput.tsv", sep="\t")["tokens_per_s"]
    rows = metrics[metrics["step"] > 0].reset_index(drop=True)
    # each row's tokens_per_s covers the training steps since the previous row (evaluations excluded); the
    # first row's steps hold the warm-up (CUDA context, kernels, allocator), so it is left out where others exist
    tokens = rows["tokens_seen"].diff()
    if len(rows) == 1:
        tokens = rows["tokens_seen"].astype(float)
    timed = tokens.notna()
    n_tokens = float(tokens[timed].sum())
    step_seconds = float((tokens[timed] / rows["tokens_per_s"][timed]).sum())
    batch_tokens = settings["micro_batch"] * settings["grad_accum"] * json.loads(
        (blocks / "blocks.json").read_text())["block_len"]
    heldout = metrics.dropna(subset=["heldout_loss"])
    rec = {"device": device, "steps": steps, "micro_batch": settings["micro_batch"], "wall_s": round(wall, 2),
           "timed_steps": int(n_tokens // batch_tokens),
           "step_ms": round(1e3 * step_seconds * batch_tokens / n_tokens, 2),
           "tokens_per_s": round(n_tokens / step_seconds, 0), "peak_gpu_mib": cuda_peak_mib(cuda),
           "heldout_loss_first": round(float(heldout["heldout_loss"].iloc[0]), 4),
           "heldout_loss_last": round(float(heldout["heldout_loss"].iloc[-1]), 4),
           "train_loss_first_row": round(float(rows["train_loss"].iloc[0]), 4),
           "model": settings["model"]}
    rec["loss_falls"] = bool(rec["heldout_loss_last"] < rec["heldout_loss_first"] - LOSS_FALL)
    say(f"   {device}: {steps} steps in {wall:.1f} s; {rec['step_ms']} ms/step, {rec['tokens_per_s']:.0f} tokens/s "
        f"(steps after the first row), peak GPU {rec['peak_gpu_mib']} MiB; held-out loss "
        f"{rec['heldout_loss_first']} -> {rec['heldout_loss_last']}")
    return rec


def part_training(ctx, rec: dict) -> None:
    rec["runs"] = {}
    sizes = dict(block_len=64 if QUICK else 256, vocab=1024 if QUICK else 8192, n_train=200 if QUICK else 4500,
                 n_heldout=64 if QUICK else 225, n_snippets=40 if QUICK else 200, snippet_len=50,
                 active=128 if QUICK else 512)
    rec["data"] = sizes
    ctx.blocks, ctx.snippets = markov_blocks(ctx.work / "data", **sizes)
    say(f"training data: {sizes}")
    gpu_steps, cpu_steps = (30, 12) if QUICK else (300, 30)
    runs = rec["runs"]
    if ctx.cuda and ctx.budget.allows(60, "training on CUDA", rec):
        runs["cuda"] = attempt(rec, "cuda", train_once, ctx, ctx.blocks, ctx.work / "model-cuda", "cuda", gpu_steps)
        ctx.model_dir = ctx.work / "model-cuda" if runs["cuda"] else None
        ctx.save()
    if ctx.budget.allows(15 if QUICK else 40, "training on the CPU", rec):
        runs["cpu"] = attempt(rec, "cpu", train_once, ctx, ctx.blocks, ctx.work / "model-cpu", "cpu", cpu_steps)
        if runs["cpu"] and ctx.model_dir is None:
            ctx.model_dir = ctx.work / "model-cpu"
    for key in [k for k, v in runs.items() if v is None]:
        del runs[key]
    if "cuda" in runs and "cpu" in runs:
        # same seed, same data order, same initial weights: the step-0 held-out loss differs by precision only
        diff = abs(runs["cuda"]["heldout_loss_first"] - runs["cpu"]["heldout_loss_first"])
        rec["step0_heldout_abs_diff"] = round(diff, 4)
        rec["step0_ok"] = bool(diff < LOSS_ATOL_BF16)
        rec["cpu_over_cuda_step_time"] = round(runs["cpu"]["step_ms"] / runs["cuda"]["step_ms"], 2)
        say(f"   step time CPU / CUDA: {rec['cpu_over_cuda_step_time']}x; step-0 held-out loss |diff| {diff:.4f}")


def part_training_large_batch(ctx, rec: dict) -> None:
    """The same model at micro batch 32 on CUDA: how far the default batch of 4 leaves the GPU idle."""
    if not ctx.cuda:
        rec["skipped"] = ["no CUDA"]
    elif ctx.blocks is not None and ctx.budget.allows(45, "training at micro batch 32", rec):
        rec.update(train_once(ctx, ctx.blocks, ctx.work / "model-cuda-mb32", "cuda", 100, micro_batch=32))


# ---------------------------------------------------------------- 3. extraction


def extraction_settings() -> dict:
    section = default_config_section("extraction")
    defaults = {"batch_size": 4, "intermediates_layer": 0, "probe_sequences": 200, "probe_positions": 32,
                "bootstrap_groups": 16}
    return {"kind": "trained", **{k: section.get(k, v) for k, v in defaults.items()}}


def extract_once(ctx, device: str, tag: str, **overrides) -> tuple[dict, dict]:
    import pyarrow.parquet as pq

    from causalpos.catalogue.tables import ACTIVATION_TABLES
    from causalpos.workflow.job import Job, run_job

    settings = {**extraction_settings(), **overrides}
    folder = ctx.work / f"extract-{tag}"
    paths = {table: folder / f"{table}.parquet" for table in ACTIVATION_TABLES}
    cuda = device == "cuda"
    cuda_peak_reset(cuda)
    start = time.perf_counter()
    run_job(Job("extract", wildcards={"model": "nope"}, input={"tokens": str(ctx.snippets)},
                output={table: str(path) for table, path in paths.items()},
                params={"settings": settings, "location": str(ctx.model_dir), "device": device, "seed": 0,
                        "state": None}))
    wall = time.perf_counter() - start
    frames = {table: pq.read_table(path).to_pandas() for table, path in paths.items()}
    meta = json.loads(pq.read_schema(paths["scores"]).metadata[b"causalpos"])
    numeric = [frames[t].select_dtypes("number") for t in ("scores", "intermediates", "probe")]
    n_tokens = int(np.load(ctx.snippets).size)
    rec = {"device": device, "settings": settings, "wall_s": round(wall, 2), "extract_s": round(meta["seconds"], 2),
           "tokens_per_s": round(n_tokens / meta["seconds"], 0), "peak_gpu_mib": cuda_peak_mib(cuda),
           "rows": {t: len(f) for t, f in frames.items()},
           "finite": bool(all(np.isfinite(f.to_numpy(dtype=float)).all() for f in numeric))}
    say(f"   {tag}: {rec['extract_s']} s ({rec['tokens_per_s']:.0f} tokens/s, wall {wall:.1f} s with loading), "
        f"peak GPU {rec['peak_gpu_mib']} MiB, rows {rec['rows']}, all finite: {rec['finite']}")
    return rec, frames


def compare_tables(a: dict, b: dict, rtol: float) -> dict:
    """Score means (per layer) and intermediates of two extractions of one model on the same tokens."""
    keys = ["layer", "query_pos", "key_pos"]
    out = {"rtol": rtol, "layers": []}
    sa, sb = (f.sort_values(keys).reset_index(drop=True) for f in (a["scores"], b["scores"]))
    if not sa[keys].equals(sb[keys]):
        return {"error": "the score tables cover different entries"}
    ok = True
    for layer, ga in sa.groupby("layer"):
        x, y = ga["score_mean"].to_numpy(), sb.loc[ga.index, "score_mean"].to_numpy()
        sem = np.hypot(ga["score_sem"].to_numpy(), sb.loc[ga.index, "score_sem"].to_numpy())
        scale = float(np.sqrt(np.mean(x**2)))
        diff = np.abs(y - x)
        layer_ok = bool(diff.max() <= rtol * np.abs(x).max())  # relative error in the max norm of the layer
        ok &= layer_ok
        out["layers"].append({"layer": int(layer), "rms_mean": round(scale, 4), "max_abs_diff": float(diff.max()),
                              "rel_rms_diff": float(np.sqrt(np.mean(diff**2)) / scale),
                              "median_diff_over_sem": float(np.median(diff / np.maximum(sem, 1e-12))),
                              "ok": layer_ok})
    ia, ib = (f.sort_values(["layer", "stage", "query_pos", "key_pos"])["value"].to_numpy()
              for f in (a["intermediates"], b["intermediates"]))
    if len(ia) == len(ib) and len(ia):
        out["intermediates_rel_rms_diff"] = float(np.sqrt(np.mean((ia - ib) ** 2) / np.mean(ia**2)))
    out["probe_mae"] = [a["probe"]["mae"].round(4).tolist(), b["probe"]["mae"].round(4).tolist()]
    out["ok"] = bool(ok)
    return out


def part_extraction(ctx, rec: dict) -> None:
    if ctx.model_dir is None:
        rec["skipped"] = ["no trained model (the training part did not finish)"]
        return
    rec["model_dir"] = ctx.model_dir.name
    if ctx.cuda and ctx.budget.allows(40, "extraction on CUDA", rec):
        cuda_side = attempt(rec, "cuda", extract_once, ctx, "cuda", "cuda")
        ctx.save()
        if ctx.budget.allows(40, "extraction on the CPU", rec):
            cpu_side = attempt(rec, "cpu", extract_once, ctx, "cpu", "cpu")
            for key, side in (("cuda", cuda_side), ("cpu", cpu_side)):
                if side:
                    rec[key] = side[0]
            if cuda_side and cpu_side:
                rec["cuda_vs_cpu"] = compare_tables(cpu_side[1], cuda_side[1], BF16_RTOL)
    elif not ctx.cuda and ctx.budget.allows(20, "extraction on the CPU", rec):
        batch = extraction_settings()["batch_size"]
        rec["cpu"], first = extract_once(ctx, "cpu", "cpu")
        rec["cpu_batch_x2"], second = extract_once(ctx, "cpu", "cpu-batch-x2", batch_size=2 * batch)
        rec["cpu_vs_cpu_batch_x2"] = compare_tables(first, second, SAME_DEVICE_RTOL)
    for key in ("cuda_vs_cpu", "cpu_vs_cpu_batch_x2"):
        if key in rec and "layers" in rec[key]:
            worst = max(rec[key]["layers"], key=lambda r: r["rel_rms_diff"])
            say(f"   {key}: worst layer {worst['layer']} rel RMS diff {worst['rel_rms_diff']:.2e}, max |diff| "
                f"{worst['max_abs_diff']:.2e}, median |diff|/SEM {worst['median_diff_over_sem']:.3f} "
                f"(rtol {rec[key]['rtol']:.3g}) -> {'ok' if rec[key]['ok'] else 'FAIL'}")


# ---------------------------------------------------------------- summary


def environment(cuda: bool, cpus: int) -> dict:
    import numba
    import torch
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__, "numba": numba.__version__,
           "transformers": transformers.__version__, "cpus": cpus, "cuda": cuda, "quick": QUICK}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=torch.cuda.get_device_name(0), gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   cuda_runtime=torch.version.cuda)
    return env


def verdicts(s: dict) -> list[tuple[str, bool]]:
    """Every pass/fail check that ran: (name, passed)."""
    out = [(f"simulation {r['variant']}: means agree", r["agree_ok"])
           for r in s.get("simulation", {}).get("rows", []) if "agree_ok" in r]
    out += [(f"simulation {r['variant']}: group sums add up", r["group_sums_ok"])
            for r in s.get("simulation", {}).get("rows", []) if "group_sums_ok" in r]
    out += [(f"simulation {r['variant']}: ran", False) for r in s.get("simulation", {}).get("rows", []) if "error" in r]
    tr = s.get("training", {})
    cuda_run = tr.get("runs", {}).get("cuda")
    if cuda_run:  # the CPU's few steps are for timing; their loss is recorded, not judged
        out.append((f"training cuda: held-out loss falls by > {LOSS_FALL} nats", cuda_run["loss_falls"]))
    if "step0_ok" in tr:
        out.append(("training: step-0 held-out loss CUDA (bf16) = CPU (fp32)", tr["step0_ok"]))
    ex = s.get("extraction", {})
    out += [(f"extraction {k}: all finite", ex[k]["finite"]) for k in ("cuda", "cpu", "cpu_batch_x2") if k in ex]
    out += [(f"extraction {k}: within rtol {ex[k].get('rtol')}", bool(ex[k].get("ok")))
            for k in ("cuda_vs_cpu", "cpu_vs_cpu_batch_x2") if k in ex]
    out += [(f"{k}: finished without error", False) for k, v in s.items() if isinstance(v, dict) and "error" in v]
    out += [(f"{k} {step}: ran", False) for k, v in s.items() if isinstance(v, dict) for step in v.get("errors", {})]
    return out


def markdown(s: dict) -> str:
    env = s.get("environment", {})
    checks = verdicts(s)
    failed = [name for name, passed in checks if not passed]
    lines = ["# causalpos device check", "", f"{env}", "", f"Total {s.get('seconds', 0):.0f} s. Checks: "
             f"{len(checks) - len(failed)} of {len(checks)} passed" + (f"; FAILED: {failed}" if failed else "."), ""]
    sim = s.get("simulation", {})
    if sim.get("rows"):
        lines += [f"## Simulation ({sim.get('compared', '')})", "",
                  ("| variant | sampler | CPU numba s | torch first call s | torch s (chunk 1024) "
                   "| torch s (chunk 16384) | peak GPU MiB | max abs z | z mean | z std | ok |"), "|" + " --- |" * 11]
        for r in sim["rows"]:
            other = "cuda" if any(k.startswith("cuda_") for k in r) else "cpu"
            a = r.get("agreement", {})
            lines.append(f"| {r['variant']} | {r.get('sampler', '')} | {r.get('cpu_numba_s', '')} | "
                         f"{r.get(f'{other}_torch_first_call_s', '')} | {r.get(f'{other}_torch_s_chunk1024', '')} | "
                         f"{r.get(f'{other}_torch_s_chunk16384', '')} | {r.get(f'{other}_peak_mib_chunk1024', '')} | "
                         f"{a.get('max_abs_z', '')} | {a.get('mean_z', '')} | {a.get('std_z', '')} | "
                         f"{r.get('agree_ok', r.get('error', ''))} |")
        lines.append("")
    tr = s.get("training", {})
    runs = [("default", d, r) for d, r in tr.get("runs", {}).items()]
    if s.get("training_large_batch", {}).get("device"):
        runs.append(("micro batch 32", "cuda", s["training_large_batch"]))
    if runs:
        lines += [f"## Training ({'tiny' if env.get('quick') else 'default'} model, synthetic Markov blocks: "
                  f"{tr.get('data')})", "",
                  "| run | device | steps | ms/step | tokens/s | peak GPU MiB | held-out loss first -> last |",
                  "|" + " --- |" * 7]
        for name, dev, r in runs:
            lines.append(f"| {name} | {dev} | {r['steps']} | {r['step_ms']} | {r['tokens_per_s']:.0f} | "
                         f"{r['peak_gpu_mib']} | {r['heldout_loss_first']} -> {r['heldout_loss_last']} |")
        for key in ("cpu_over_cuda_step_time", "step0_heldout_abs_diff", "step0_ok"):
            if key in tr:
                lines.append(f"- {key}: {tr[key]}")
        lines.append("")
    ex = s.get("extraction", {})
    sides = [(k, ex[k]) for k in ("cuda", "cpu", "cpu_batch_x2") if k in ex]
    if sides:
        lines += ["## Extraction (rule extract's job)", "", "| side | s | tokens/s | peak GPU MiB | finite |",
                  "|" + " --- |" * 5]
        lines += [f"| {k} | {r['extract_s']} | {r['tokens_per_s']:.0f} | {r['peak_gpu_mib']} | {r['finite']} |"
                  for k, r in sides]
        for key in ("cuda_vs_cpu", "cpu_vs_cpu_batch_x2"):
            if key in ex:
                lines.append(f"- {key}: ok {ex[key].get('ok')}; per layer "
                             + "; ".join(f"L{r['layer']} rel RMS {r['rel_rms_diff']:.2e}, max |d| "
                                         f"{r['max_abs_diff']:.2e}, median |d|/SEM {r['median_diff_over_sem']:.3f}"
                                         for r in ex[key].get("layers", [])))
        lines.append("")
    errors = {k: v.get("error") or v.get("errors") for k, v in s.items()
              if isinstance(v, dict) and ("error" in v or v.get("errors"))}
    skipped = {k: v["skipped"] for k, v in s.items() if isinstance(v, dict) and v.get("skipped")}
    if errors or skipped:
        lines += ["## Errors and skips", "", f"errors: {errors}", "", f"skipped: {skipped}", ""]
    lines.append(THRESHOLDS)
    return "\n".join(lines) + "\n"


class Context:
    def __init__(self, out: Path, budget: Budget, cuda: bool, cpus: int, work: Path):
        self.out, self.budget, self.cuda, self.cpus, self.work = out, budget, cuda, cpus, work
        self.summary: dict = {}
        self.model_dir = self.blocks = self.snippets = None

    def save(self) -> None:
        self.summary["seconds"] = round(self.budget.seconds - self.budget.left(), 1)
        (self.out / "summary.json").write_text(json.dumps(self.summary, indent=1, default=str))
        (self.out / "summary.md").write_text(markdown(self.summary))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT") or "device_out")
    p.add_argument("--budget-s", type=float,
                   default=float(os.environ.get("DEVICE_CHECK_BUDGET_S") or (100 if QUICK else 300)))
    p.add_argument("--parts", default="simulation,training,extraction,training_large_batch")
    args = p.parse_args(argv)
    budget = Budget(args.budget_s)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("causalpos").setLevel(logging.INFO)

    import torch

    from causalpos.runtime.devices import available_cpus

    cpus = available_cpus()
    torch.set_num_threads(cpus)
    cuda = torch.cuda.is_available()  # TF32 left as torch's default: train() turns it on for itself (and
    # leaves it on in this process, so the simulation, a process of its own in the workflow, runs first)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = {"simulation": part_simulation, "training": part_training, "extraction": part_extraction,
             "training_large_batch": part_training_large_batch}
    with tempfile.TemporaryDirectory(prefix="device-check-") as work:
        ctx = Context(out, budget, cuda, cpus, Path(work))
        ctx.summary["environment"] = attempt(ctx.summary, "environment", environment, cuda, cpus) or {}
        say(f"device check: {ctx.summary['environment']}; budget {args.budget_s:.0f} s; out {out}")
        for name in args.parts.split(","):
            say(f"== {name} ({budget.left():.0f} s of the budget left)")
            start = time.perf_counter()
            rec = ctx.summary[name] = {}  # filled in place: a save mid-part keeps what it has
            try:
                parts[name](ctx, rec)
            except Exception as err:  # noqa: BLE001 - recorded; the next part runs
                traceback.print_exc()
                rec["error"] = f"{type(err).__name__}: {err}"
            rec["part_s"] = round(time.perf_counter() - start, 1)
            ctx.save()
    say(f"done in {ctx.summary['seconds']:.0f} s; {out / 'summary.md'}:")
    print(markdown(ctx.summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
