"""Rule train: the NoPE decoder or its RoPE twin (Section 4.2), or either with another seed (`nope_seed1`), trained
on the token blocks; with train_processes > 1 through torchrun (DDP).

SIGTERM or SIGINT stops the training after a checkpoint at the step it reached (models.train raises
TrainingInterrupted, or torchrun exits non-zero); the next run resumes from it. The checkpoints of a run are keyed
by its settings, its data and the code's digest, so a changed config or code starts afresh while a killed run
with the same ones resumes."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile

from causalpos.catalogue.models import parse_run, uses_rope
from causalpos.runtime.processes import one_writer, run_stoppable

log = logging.getLogger("causalpos")


def checkpoint_folder(root, run: str, settings: dict, blocks_json, code: str) -> str:
    """Checkpoints of one training run under `root`: keyed by its settings, token blocks and code digest."""
    with open(blocks_json, "rb") as fh:
        key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode() + fh.read() + code.encode()).hexdigest()[:12]
    return os.path.join(root, run, key)


def run(job) -> None:
    run_name, settings = job.wildcards.model, job.params.settings
    model, _ = parse_run(run_name)  # the tables name the model (nope, rope); its settings hold the seed
    tokens_dir = os.path.dirname(job.input.blocks)
    tokenizer_dir = os.path.dirname(job.input.tokenizer) if job.input.get("tokenizer") else None  # saved beside
    out_dir = os.path.dirname(job.output.model)
    with one_writer(out_dir, f"training {run_name}"):  # two writers of one model folder: the second is refused
        checkpoints = checkpoint_folder(
            job.params.checkpoints, run_name, settings, job.input.blocks, job.params.get("code", "")
        )
        log.info("train %s: %s; checkpoints in %s", run_name, settings, checkpoints)
        if job.params.processes == 1:
            from causalpos.models.train import train

            train(
                model,
                uses_rope(model),
                tokens_dir,
                out_dir,
                checkpoints,
                settings,
                tokenizer_dir=tokenizer_dir,
                log=log,
                throughput=job.params.get("throughput"),
            )
            return
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(settings, fh)
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={job.params.processes}",
            "-m",
            "causalpos.models.train",
            "--model",
            model,
            "--blocks",
            str(tokens_dir),
            "--out",
            str(out_dir),
            "--checkpoints",
            checkpoints,
            "--config",
            fh.name,
            "--tokenizer",
            str(tokenizer_dir),
        ]
        if job.params.get("throughput"):
            command += ["--throughput", job.params.throughput]
        log.info("launch: %s", " ".join(command))
        try:
            code = run_stoppable(command)
        finally:
            os.unlink(fh.name)
        if code:
            raise subprocess.CalledProcessError(code, command)
