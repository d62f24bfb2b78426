"""Pre-train the NoPE and RoPE decoders of Section 4.2, and test their length generalisation.

The paper trains a 1.5B Llama-3 decoder without positional encoding (AdamW,
cosine schedule with warmup, peak lr 3e-4, context 1024). Here the same recipe
trains two small decoders that differ only in RoPE (`causalpos.models.model`):

    python -m causalpos.models.train --blocks data/blocks --out models/nope \
        --checkpoints checkpoints/nope --config training.json --model nope
    torchrun --standalone --nproc_per_node 2 -m causalpos.models.train ...   # same, data parallel

--config names complete settings (this layer reads no schema, so it fills in no default): `causalpos train`
is the way in from a config file, which it validates and completes with the schema's defaults.

A plain PyTorch loop (nanoGPT style): gradient accumulation, clipping, bf16
autocast on CUDA (fp32 on CPU), DistributedDataParallel when WORLD_SIZE > 1,
and checkpoints from which a killed run resumes to bitwise the same weights
as an uninterrupted one (on CPU with the same thread count).

Data: `blocks_dir` holds train.npy and heldout.npy, 2-D integer arrays
[n_blocks, block_len] of consecutive token blocks, and blocks.json. Every
training sequence is one block. Epoch e visits all training blocks in a
permutation seeded by (seed, e), so the data at any step follows from the
step alone: resuming needs no loader state, and ranks take disjoint slices
of each global batch.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import signal
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist

from causalpos.runtime.devices import job_cpus, resolve_device
from causalpos.errors import UserError
from causalpos.catalogue.models import TRAINED, uses_rope
from causalpos.catalogue.tables import METRIC_COLUMNS, TABLES, THROUGHPUT_COLUMNS
from causalpos.io import atomic_path, usual_mode, write_parquet
from causalpos.models.checkpoints import (
    CHECKPOINT_MAGIC,  # noqa: F401  (re-exported: the checkpoint format's names live in models.checkpoints)
    CHECKPOINT_NAME,
    RESUMABLE_CHANGES,  # noqa: F401
    CheckpointError,
    check_fingerprint,
    fingerprint,
    load_checkpoint,
    remove_stale_temporaries,
    rng_states,
    save_checkpoint,
    set_rng_states,
)
from causalpos.models.blocks import Blocks, TrainOrder, lm_loss, micro_batch_blocks, to_tokens, token_losses
from causalpos.models.model import build_model, count_parameters
from causalpos.models.model_files import verify_tokenizer_folder
from causalpos.models.settings import snapshot_schedule, training_settings
from causalpos.models.snapshots import FOLDER as SNAPSHOT_FOLDER
from causalpos.models.snapshots import Snapshots
from causalpos.runtime.processes import skip_final_collection

DEBUG_ENV = "CAUSALPOS_TRAIN_DEBUG"  # a folder: each rank writes the blocks it read and its final weights

logger = logging.getLogger("causalpos")


class TrainingInterrupted(UserError, RuntimeError):
    """SIGTERM or SIGINT stopped the run after a checkpoint at the step it reached; the rerun resumes there."""

    def __init__(self, signum: int, step: int, path):
        self.signum, self.step = signum, step
        super().__init__(
            f"stopped by {signal.Signals(signum).name} at step {step}; checkpoint {path} written: "
            f"run the same command again to resume from it"
        )


# ---------------------------------------------------------------- settings


def lr_at(step: int, cfg: dict) -> float:
    """Learning rate of optimizer step `step` (0-based): linear warmup to lr at step
    warmup_steps, then a cosine down to min_lr at step `steps`."""
    warmup, total = cfg["warmup_steps"], cfg["steps"]
    if step < warmup:
        return cfg["lr"] * (step + 1) / (warmup + 1)
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return cfg["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg["lr"] - cfg["min_lr"])


# ---------------------------------------------------------------- distributed


@dataclass
class Context:
    rank: int
    world: int
    device: torch.device
    owns_group: bool  # we called init_process_group, so we destroy it

    @property
    def main(self) -> bool:
        return self.rank == 0

    def autocast(self):
        # bf16 autocast on CUDA (weights and optimizer stay fp32); plain fp32 on CPU
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return nullcontext()

    def all_mean(self, values: list[float]) -> list[float]:
        return values if self.world == 1 else [v / self.world for v in self.all_sum(values)]

    def all_sum(self, values: list[float]) -> list[float]:
        if self.world == 1:
            return values
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.tolist()


def setup(cfg: dict) -> Context:
    """Rank, world size and device from torchrun's environment; a process group when WORLD_SIZE > 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(cfg["device"], "training.device")
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    # training.threads per job, at most the CPUs it may use (Snakemake caps both by the rule's threads); the
    # ranks on one node share them: more threads than cores only thrash
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    torch.set_num_threads(max(1, min(cfg["threads"], job_cpus()) // local_world))
    owns = False
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")  # env:// from torchrun
        owns = True
    return Context(rank, world, device, owns)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


class StopRequest:
    """SIGTERM (what SLURM sends before a kill or a preemption, and Snakemake's jobs on Ctrl-C) or SIGINT
    only raise a flag: the loop ends its step, writes a checkpoint there and stops (TrainingInterrupted)."""

    def __enter__(self):
        self.signum, self._previous = 0, {}
        if threading.current_thread() is threading.main_thread():  # signal.signal works only there
            for sig in (signal.SIGTERM, signal.SIGINT):
                if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup, `cmd &` in a script: keep ignoring
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.signum = self.signum or signum  # the first one is the cause (Ctrl-C may bring SIGINT and SIGTERM)

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    def agreed(self, ctx: Context) -> int:
        """The signal to stop for (0: go on), any rank's: a rank that stopped alone would hang the others."""
        if ctx.world == 1:
            return self.signum
        flag = torch.tensor([self.signum], dtype=torch.int64, device=ctx.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())


# ---------------------------------------------------------------- training


def make_optimizer(model: torch.nn.Module, cfg: dict) -> torch.optim.AdamW:
    # decay matrices and embeddings, not norm gains (nanoGPT)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg["weight_decay"]},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg["lr"], betas=tuple(cfg["betas"]))


@torch.no_grad()
def heldout_loss(model, heldout: np.ndarray, cfg: dict, ctx: Context) -> float:
    """Mean next-token loss over the first eval_batches micro batches of held-out blocks."""
    n = min(cfg["eval_batches"] * cfg["micro_batch"], len(heldout))
    starts = range(0, n, cfg["micro_batch"])
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in list(starts)[ctx.rank :: ctx.world]:  # ranks split the batches
        tokens = to_tokens(heldout[start : min(n, start + cfg["micro_batch"])], ctx.device)
        with ctx.autocast():
            losses = token_losses(model, tokens)
        total += losses.double().sum().item()
        count += losses.numel()
    model.train(was_training)
    total, count = ctx.all_sum([total, float(count)])
    return total / count


class Progress:
    """A tqdm bar on a terminal (rank 0), log lines through `log` otherwise."""

    def __init__(self, log, total: int, initial: int, name: str, enabled: bool):
        self.log, self.name = log, name
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=name, unit="step", dynamic_ncols=True)
        self.enabled, self.total = enabled, total

    def step(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def row(self, row: dict) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{row['train_loss']:.3f}", tok_s=f"{row['tokens_per_s']:.0f}")
            if not math.isnan(row["heldout_loss"]):
                self.bar.write(f"{self.name} step {row['step']}: heldout loss {row['heldout_loss']:.4f}")
            return
        self.log.info(
            "%s step %d/%d tokens %d train_loss %.4f heldout_loss %.4f lr %.2e %.0f tokens/s",
            self.name,
            row["step"],
            self.total,
            row["tokens_seen"],
            row["train_loss"],
            row["heldout_loss"],
            row["lr"],
            row["tokens_per_s"],
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def train(
    model_name: str,
    rope: bool,
    blocks_dir,
    out_dir,
    checkpoint_dir,
    cfg: dict,
    tokenizer_dir=None,
    log: logging.Logger | None = None,
    throughput=None,
) -> pd.DataFrame:
    """Train one decoder and write it to `out_dir`; returns the metrics table.

    `cfg` is a complete training section (causalpos.models.settings.TrainingSettings, with its `model`; the
    config schema holds the defaults, which causalpos.workflow.config fills in). Under torchrun with
    WORLD_SIZE > 1 every rank calls this; each computes a disjoint slice of every global batch
    (micro_batch x grad_accum sequences per rank) and only rank 0 writes.

    Resumes from `checkpoint_dir`/last.ckpt when it exists (written every
    checkpoint_every steps, at the end, and when SIGTERM or SIGINT arrives: then
    it raises TrainingInterrupted after that step's checkpoint). Writes to `out_dir`: the model
    (save_pretrained, safetensors), the tokenizer of `tokenizer_dir` if given,
    snapshots/ (the weights at the steps of training.snapshot_steps, causalpos.models.snapshots),
    training.json, and last metrics.parquet (model, step, tokens_seen,
    train_loss: mean over the steps since the previous row, heldout_loss: NaN
    where not evaluated, lr). The speed of each row (tokens_per_s: of the training steps since the previous row
    alone) goes to the TSV file `throughput` (catalogue.paths.train_throughput) when given: a timing, apart
    from the results.
    """
    log = log or logger
    cfg = training_settings(cfg)
    blocks = Blocks(blocks_dir)
    if tokenizer_dir is not None:  # saved with the model at the end: a damaged one stops the run before training
        verify_tokenizer_folder(tokenizer_dir)
    if blocks.block_len > cfg["model"]["context"]:
        raise ValueError(
            f"block_len = {blocks.block_len} of {blocks.dir} exceeds training.model.context = {cfg['model']['context']}"
        )
    threads = torch.get_num_threads()
    ctx = setup(cfg)
    try:
        with StopRequest() as stop:
            return _train(
                ctx,
                model_name,
                rope,
                blocks,
                Path(out_dir),
                Path(checkpoint_dir),
                cfg,
                tokenizer_dir,
                log,
                stop,
                throughput,
            )
    finally:
        torch.set_num_threads(threads)  # leave the caller's process as it was
        if ctx.owns_group:
            dist.destroy_process_group()


def _train(
    ctx: Context,
    model_name,
    rope,
    blocks: Blocks,
    out_dir: Path,
    checkpoint_dir: Path,
    cfg: dict,
    tokenizer_dir,
    log,
    stop: StopRequest,
    throughput,
) -> pd.DataFrame:
    seed_everything(cfg["seed"])  # same seed on every rank: same initial weights
    model = build_model(cfg["model"], blocks.vocab_size, rope, blocks.eos_token_id).to(ctx.device)
    model.train()
    optimizer = make_optimizer(model, cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(s, cfg) / cfg["lr"])
    identity = fingerprint(model_name, rope, cfg, blocks, ctx.world)
    ckpt_path = checkpoint_dir / CHECKPOINT_NAME
    if ctx.main:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(checkpoint_dir)
    step, metrics, interval = resume(ckpt_path, identity, model, optimizer, scheduler)
    snapshots = Snapshots(checkpoint_dir / SNAPSHOT_FOLDER, snapshot_schedule(cfg))
    if ctx.main:
        check_snapshots(snapshots, step, ckpt_path)
        if step == 0:
            snapshots.write(model, 0)  # the initial weights
    if ctx.main:
        sizes = count_parameters(model)
        log.info(
            "%s: %s at step %d; %d parameters (%d outside the embedding), rope=%s, %d ranks on %s, %d threads",
            model_name,
            f"resuming from {ckpt_path}" if step else "training from scratch",
            step,
            sizes["total"],
            sizes["non_embedding"],
            rope,
            ctx.world,
            ctx.device,
            torch.get_num_threads(),
        )
    wrapped = model
    if ctx.world > 1:
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)

    order = TrainOrder(len(blocks.train), cfg["seed"])
    batch_tokens = identity["global_batch"] * blocks.block_len
    debug_dir = os.environ.get(DEBUG_ENV)
    consumed = [] if debug_dir else None  # (step, micro, blocks) of this rank, for the debug file
    progress = Progress(log, cfg["steps"], step, model_name, ctx.main)

    def add_row(train_loss: float, lr: float, seconds: float, steps_done: int, evaluate: bool) -> None:
        heldout = heldout_loss(model, blocks.heldout, cfg, ctx) if evaluate else math.nan
        row = {
            "model": model_name,
            "step": step,
            "tokens_seen": step * batch_tokens,
            "train_loss": train_loss,
            "heldout_loss": heldout,
            "lr": lr,
            "tokens_per_s": steps_done * batch_tokens / seconds if seconds > 0 else math.nan,
        }
        metrics.append(row)
        progress.row(row)

    def checkpoint() -> None:
        # with the loss sum since the last row (so that row is as without a stop): all ranks, rank 0 writes
        loss_sum = ctx.all_mean([interval[0]])[0]
        if ctx.main:
            save_checkpoint(
                {
                    "fingerprint": identity,
                    "step": step,
                    "position": step * identity["global_batch"],
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "rng": rng_states(),
                    "metrics": metrics,
                    "interval": [loss_sum, *interval[1:]],
                },
                ckpt_path,
            )
        if ctx.world > 1:
            dist.barrier()

    if step == 0 and cfg["eval_every"]:
        add_row(math.nan, lr_at(0, cfg), 0.0, 0, evaluate=True)  # the untrained model's held-out loss

    while step < cfg["steps"]:
        started = time.perf_counter()
        lr = scheduler.get_last_lr()[0]
        interval[0] += train_step(wrapped, model, optimizer, scheduler, blocks.train, order, step, cfg, ctx, consumed)
        step += 1
        interval[1] += 1
        interval[2] += time.perf_counter() - started
        progress.step()

        done = step == cfg["steps"]
        evaluate = bool(cfg["eval_every"]) and (step % cfg["eval_every"] == 0 or done)
        if step % cfg["log_every"] == 0 or evaluate or done:
            train_loss = ctx.all_mean([interval[0] / interval[1]])[0]
            add_row(train_loss, lr, interval[2], interval[1], evaluate)
            interval = [0.0, 0, 0.0]
        if ctx.main:
            snapshots.write(model, step)  # before the checkpoint: a checkpoint at s implies the snapshots up to s
        stop_signal = 0 if done else stop.agreed(ctx)
        if done or stop_signal or (cfg["checkpoint_every"] and step % cfg["checkpoint_every"] == 0):
            checkpoint()
        if stop_signal:
            progress.close()
            raise TrainingInterrupted(stop_signal, step, ckpt_path)
    progress.close()

    if debug_dir:
        write_debug(Path(debug_dir), ctx.rank, consumed, model)
    frame = metrics_frame(metrics)
    if ctx.main:
        if throughput:
            write_throughput(metrics, Path(throughput))
        snapshots.publish(out_dir)
        write_outputs(
            model,
            frame,
            out_dir,
            tokenizer_dir,
            {
                "model_name": model_name,
                "rope": bool(rope),
                "training": cfg,
                "world_size": ctx.world,
                "device": str(ctx.device),
                "blocks": blocks.meta,
                "blocks_dir": str(blocks.dir),
            },
        )
        log.info("%s: wrote %s (final heldout loss %.4f)", model_name, out_dir, frame["heldout_loss"].iloc[-1])
    return frame


def check_snapshots(snapshots: Snapshots, step: int, ckpt_path: Path) -> None:
    """A run resumed at `step` must find the snapshots of the steps before it (written before its checkpoint)."""
    for tmp in snapshots.folder.glob(".step_*.tmp.safetensors"):  # a save cut short by SIGKILL
        tmp.unlink(missing_ok=True)
    missing = snapshots.missing(step) if step else []
    if missing:
        raise CheckpointError(
            f"checkpoint {ckpt_path} is at step {step}, but the snapshots of steps {missing} are "
            f"missing from {snapshots.folder}; delete the checkpoint to train from the start"
        )


def resume(path: Path, identity: dict, model, optimizer, scheduler) -> tuple[int, list, list]:
    """From the checkpoint at `path`, if any: the step to go on from, the rows so far, [loss sum, steps, s] since."""
    if not path.exists():
        return 0, [], [0.0, 0, 0.0]
    state = load_checkpoint(path)
    check_fingerprint(state["fingerprint"], identity, path)
    step = state["step"]
    if state["position"] != step * identity["global_batch"]:
        raise CheckpointError(
            f"checkpoint {path}: data position {state['position']} does not match "
            f"step {step} x global batch {identity['global_batch']}"
        )
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_states(state["rng"])
    return step, state["metrics"], list(state.get("interval", [0.0, 0, 0.0]))  # older checkpoints: none


def train_step(
    wrapped,
    model,
    optimizer,
    scheduler,
    train_blocks,
    order: TrainOrder,
    step: int,
    cfg: dict,
    ctx: Context,
    consumed: list | None,
) -> float:
    """One optimizer step over this rank's share of global batch `step`; its mean loss on this rank."""
    step_loss = torch.zeros((), device=ctx.device)
    for micro in range(cfg["grad_accum"]):
        indices = micro_batch_blocks(order, step, micro, cfg, ctx.rank, ctx.world)
        if consumed is not None:
            consumed.append((step, micro, indices.copy()))
        tokens = to_tokens(train_blocks[indices], ctx.device)
        last = micro == cfg["grad_accum"] - 1
        # DDP all-reduces gradients on the last micro batch only
        with nullcontext() if last or ctx.world == 1 else wrapped.no_sync():
            with ctx.autocast():
                loss = lm_loss(wrapped, tokens) / cfg["grad_accum"]
            loss.backward()
        step_loss += loss.detach()
    if cfg["grad_clip"]:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return step_loss.item()  # also waits for the GPU, so the step timing is honest


def metrics_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    return frame.astype(
        {
            "step": "int64",
            "tokens_seen": "int64",
            "train_loss": "float64",
            "heldout_loss": "float64",
            "lr": "float64",
        }
    )


def write_throughput(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pd.DataFrame(rows, columns=THROUGHPUT_COLUMNS).to_csv(tmp, sep="\t", index=False)


def write_outputs(model, frame: pd.DataFrame, out_dir: Path, tokenizer_dir, info: dict) -> None:
    """Model, tokenizer and training.json first, metrics.parquet last: its presence marks a complete folder."""
    from transformers.utils import logging as hf_logging

    out_dir.mkdir(parents=True, exist_ok=True)
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a one-shard bar is only noise in the logs
    try:
        model.save_pretrained(out_dir, safe_serialization=True)
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    if tokenizer_dir is not None:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out_dir)
    usual_mode(out_dir)  # safetensors writes model.safetensors 0600: unreadable to others sharing the folder
    with atomic_path(out_dir / "training.json") as tmp:
        tmp.write_text(json.dumps(info, indent=1, default=str) + "\n")
    write_parquet(
        frame,
        out_dir / TABLES["metrics"].filename,
        {"stage": "train", "model": info["model_name"], "device": info.get("device")},
    )


def write_debug(debug_dir: Path, rank: int, consumed: list, model) -> None:
    debug_dir.mkdir(parents=True, exist_ok=True)
    steps = np.array([[s, m] for s, m, _ in consumed], dtype=np.int64).reshape(-1, 2)
    blocks = np.stack([b for _, _, b in consumed]) if consumed else np.zeros((0, 0), dtype=np.int64)
    np.savez(debug_dir / f"rank{rank}.npz", steps=steps, blocks=blocks)
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, debug_dir / f"rank{rank}_state.pt")


# ---------------------------------------------------------------- command line


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m causalpos.models.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", required=True, help="token-blocks folder (train.npy, heldout.npy, blocks.json)")
    parser.add_argument("--out", required=True, help="folder for the trained model and its training curve")
    parser.add_argument("--checkpoints", required=True, help="folder for last.ckpt (resumed from if present)")
    parser.add_argument(
        "--config",
        required=True,
        help="JSON file: complete training settings, or an object with them under `training` (a "
        "trained model's training.json; the workflow writes one for torchrun)",
    )
    parser.add_argument("--model", required=True, choices=list(TRAINED), help="which decoder to train")
    parser.add_argument("--tokenizer", help="tokenizer folder to save with the model")
    parser.add_argument("--throughput", help="TSV file for the tokens per second of each row of the curve")
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING, format=f"%(asctime)s [rank {rank}] %(message)s"
    )
    cfg = json.loads(Path(args.config).read_text())
    cfg = cfg.get("training", cfg)
    try:
        train(
            args.model,
            uses_rope(args.model),
            args.blocks,
            args.out,
            args.checkpoints,
            cfg,
            tokenizer_dir=args.tokenizer,
            throughput=args.throughput,
        )
    except (ValueError, CheckpointError, FileNotFoundError, TrainingInterrupted) as err:
        print(f"causalpos.models.train: {err}", file=sys.stderr)
        # stopped by a signal: the status of a process it killed, as shells and torchrun read it
        return 128 + err.signum if isinstance(err, TrainingInterrupted) else 2
    skip_final_collection()
    return 0


if __name__ == "__main__":
    sys.exit(main())
