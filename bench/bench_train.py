"""Training throughput and model-FLOP utilisation of the default decoder.

Two loops over the same model and batch shape, one after the other in this process:
- bare: forward, backward, clip, AdamW step on one random batch held in memory;
- real: causalpos.models.train.train() on token blocks of the real size (memory-mapped
  .npy, a fresh permutation each epoch), with its held-out evaluations,
  metrics rows, log lines and checkpoints at the configured cadence.
The ratio real / bare is what the data loading, evaluation, logging and
checkpointing cost.

FLOPs per trained token (2 per multiply-add, backward = 2 x forward):
    6 * N_matmul + 6 * n_layers * seq_len * hidden
N_matmul = weights of all nn.Linear layers (q, k, v, o, gate, up, down and the
lm_head, which runs as a matmul even when tied to the embedding); the
embedding lookup and the norms are not counted. The attention term counts QK^T
and AV under the causal mask (half of the T x T products; PaLM's 12 L T d
counts all of them). MFU = counted FLOP/s / peak, the peak being a large
matmul timed in this run: fp32 on CPU, bf16 on CUDA (training uses bf16 autocast there).

    python bench/bench_train.py                    # default model and training settings
    python bench/bench_train.py --micro-batch 16 --steps 60 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from causalpos.runtime.devices import available_cpus, resolve_device
from causalpos.models.model import build_model
from causalpos.models.blocks import lm_loss
from causalpos.models.train import make_optimizer, train
from causalpos.workflow.config import training_defaults

DEFAULT_TRAIN = training_defaults()  # the config schema's training defaults
DEFAULT_MODEL = DEFAULT_TRAIN["model"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="timed optimizer steps, after the warm-up")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first (a multiple of --log-every)")
    p.add_argument("--micro-batch", type=int, default=DEFAULT_TRAIN["micro_batch"])
    p.add_argument("--grad-accum", type=int, default=DEFAULT_TRAIN["grad_accum"])
    p.add_argument("--block-len", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--train-blocks", type=int, default=4500, help="size of the synthetic training split")
    p.add_argument("--eval-every", type=int, default=DEFAULT_TRAIN["eval_every"])
    p.add_argument("--checkpoint-every", type=int, default=DEFAULT_TRAIN["checkpoint_every"])
    p.add_argument("--log-every", type=int, default=DEFAULT_TRAIN["log_every"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=int, default=0, help="0 = the CPUs available")
    p.add_argument("--skip-real", action="store_true")
    p.add_argument("--json", help="also write the results here")
    return p.parse_args(argv)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_flops(device: torch.device, seconds: float = 3.0) -> float:
    """FLOP/s of a large square matmul: fp32 on CPU, bf16 on CUDA."""
    n, dtype = (4096, torch.float32) if device.type == "cpu" else (8192, torch.bfloat16)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    sync(device)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
        if device.type == "cuda" and count % 10:
            continue
        sync(device)
    sync(device)
    return 2 * n**3 * count / (time.perf_counter() - start)


def flops_per_token(model, seq_len: int) -> dict:
    cfg = model.config
    n_matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    attention = 6 * cfg.num_hidden_layers * seq_len * cfg.num_attention_heads * cfg.head_dim
    return {"n_matmul": n_matmul, "dense": 6 * n_matmul, "attention": attention, "total": 6 * n_matmul + attention}


def bare_loop(args, device: torch.device) -> dict:
    torch.manual_seed(0)
    model = build_model(DEFAULT_MODEL, args.vocab, rope=True).to(device).train()
    optimizer = make_optimizer(model, DEFAULT_TRAIN)
    batch = torch.randint(0, args.vocab, (args.grad_accum, args.micro_batch, args.block_len), device=device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()

    def step():
        for micro in batch:
            with autocast:
                loss = lm_loss(model, micro) / args.grad_accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(args.warmup):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync(device)
    seconds = time.perf_counter() - start
    tokens = args.steps * args.grad_accum * args.micro_batch * args.block_len
    return {"seconds": seconds, "tokens_per_s": tokens / seconds, "flops": flops_per_token(model, args.block_len)}


def synthetic_blocks(root: Path, args) -> Path:
    """Random tokens in the data stage's format, at the real split sizes."""
    rng = np.random.default_rng(0)
    blocks = root / "blocks"
    blocks.mkdir()
    for split, n in (("train", args.train_blocks), ("heldout", max(64, args.train_blocks // 20))):
        np.save(blocks / f"{split}.npy", rng.integers(0, args.vocab, (n, args.block_len), dtype=np.uint16))
    (blocks / "blocks.json").write_text(json.dumps({
        "block_len": args.block_len, "dtype": "uint16", "vocab_size": args.vocab, "eos_token_id": 0,
        "n_blocks_train": args.train_blocks, "unigram_entropy": math.log(args.vocab)}))
    return blocks


class RowTimes(logging.Handler):
    """Wall-clock time of each metrics row's log line (the loop logs one per row off a terminal)."""

    def __init__(self):
        super().__init__()
        self.times = {}

    def emit(self, record):
        if record.args and isinstance(record.args, tuple) and "step %d/%d" in str(record.msg):
            self.times[record.args[1]] = record.created


def real_loop(args, device: torch.device) -> dict:
    cfg = {**DEFAULT_TRAIN, "model": DEFAULT_MODEL, "steps": args.warmup + args.steps,
           "micro_batch": args.micro_batch, "grad_accum": args.grad_accum, "eval_every": args.eval_every,
           "checkpoint_every": args.checkpoint_every, "log_every": args.log_every, "device": device.type,
           "threads": torch.get_num_threads()}
    log = logging.getLogger("causalpos.bench")
    log.setLevel(logging.INFO)
    log.propagate = False
    rows = RowTimes()
    log.addHandler(rows)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        blocks = synthetic_blocks(root, args)
        with contextlib.redirect_stderr(io.StringIO()):  # no tqdm bar: the loop logs every row instead
            metrics = train("rope", True, blocks, root / "out", root / "ckpt", cfg, log=log,
                            throughput=root / "throughput.tsv")
        metrics = metrics.assign(tokens_per_s=pd.read_csv(root / "throughput.tsv", sep="\t")["tokens_per_s"])
    first, last = args.warmup, args.warmup + args.steps
    seconds = rows.times[last] - rows.times[first]
    tokens = args.steps * args.grad_accum * args.micro_batch * args.block_len
    # each row's tokens_per_s covers the training steps since the previous row
    rows_tokens = metrics["tokens_seen"].diff()
    timed = (metrics["step"] > first) & (metrics["step"] <= last)
    step_seconds = (rows_tokens[timed] / metrics["tokens_per_s"][timed]).sum()
    return {"seconds": seconds, "tokens_per_s": tokens / seconds, "steps_only_tokens_per_s": tokens / step_seconds,
            "evaluations": int(metrics["heldout_loss"][timed].notna().sum()),
            "checkpoints": (last // args.checkpoint_every - first // args.checkpoint_every) if args.checkpoint_every else 0}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.warmup % args.log_every:
        raise SystemExit("--warmup must be a multiple of --log-every (the timing starts at a metrics row)")
    device = resolve_device(args.device)
    torch.set_num_threads(args.threads or available_cpus())
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {name}; torch {torch.__version__}")
    peak = peak_flops(device)
    print(f"peak ({'fp32' if device.type == 'cpu' else 'bf16'} matmul): {peak / 1e9:.1f} GFLOP/s")

    bare = bare_loop(args, device)
    f = bare["flops"]
    print(f"model: {DEFAULT_MODEL}, vocab {args.vocab}, seq {args.block_len}; "
          f"batch {args.grad_accum} x {args.micro_batch} sequences")
    print(f"FLOPs/token: 6 x {f['n_matmul']:,} matmul weights + 6 x L x T x d = {f['dense'] / 1e6:.2f}M + "
          f"{f['attention'] / 1e6:.2f}M = {f['total'] / 1e6:.2f}M")
    results = {"device": name, "peak_flops": peak, "bare": bare, "args": vars(args)}
    lines = [("bare loop", bare["tokens_per_s"])]
    if not args.skip_real:
        real = real_loop(args, device)
        results["real"] = real
        lines += [("train(), training steps only", real["steps_only_tokens_per_s"]),
                  (f"train(), end to end ({real['evaluations']} evals, {real['checkpoints']} checkpoints)",
                   real["tokens_per_s"])]
    print(f"{args.steps} timed steps after {args.warmup} warm-up steps:")
    for label, tps in lines:
        print(f"  {label:<50} {tps:8.0f} tokens/s  {tps * f['total'] / 1e9:6.1f} GFLOP/s  "
              f"MFU {tps * f['total'] / peak:6.1%}")
    if not args.skip_real:
        print(f"  real / bare: steps only {real['steps_only_tokens_per_s'] / bare['tokens_per_s']:.3f}, "
              f"end to end {real['tokens_per_s'] / bare['tokens_per_s']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
