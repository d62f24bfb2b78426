"""Damaged model weights and tokenizers end to end (issue 28), on a copy of the session's finished tiny run
(tests/conftest.py): a truncated results/models/rope/model.safetensors fails its length evaluation once, with one
message, and the rerun rebuilds it from the training's final checkpoint; a truncated tokenizer is named and rebuilt.
Job by job: tests/integration/test_damaged_models.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from causalpos import checksums
from causalpos.catalogue import paths
from helpers import planned_jobs, snakemake

pytestmark = pytest.mark.workflow
RERUN = "run the same snakemake command again."


def replace(path: Path, raw: bytes) -> None:
    """Write `raw` as a new file (in a copy of the shared run a large file is a hard link: never write into it), and
    drop its record: the record would name the damage first (tests/workflow/test_nothing_stale.py); these tests are
    of the readers' own checks of the format, for a file without one (made before records, or by hand)."""
    path.unlink()
    path.write_bytes(raw)
    checksums.forget(path)


# ---------------------------------------------------------------- a truncated model, end to end

LENGTH_TARGET = paths.model_file("rope", "length_eval.parquet")  # the smallest target that loads the model
MODEL_TARGET = paths.model_file("rope", "model.safetensors")  # the training's, for its own inputs


# over 20 s (~23 s): a training resumed from its checkpoint and what is made from the model, on a copy
@pytest.mark.workflow
def test_truncated_model_is_named_moved_aside_and_rebuilt_from_its_checkpoint(finished_copy):
    workdir = finished_copy  # of the session's finished run, with the default profile
    relative = paths.model_file("rope", "model.safetensors")  # read by length_eval, extract, emergence, ablation
    weights = workdir / relative
    original = load_file(weights)
    raw = weights.read_bytes()
    replace(weights, raw[: len(raw) // 2])

    failed = snakemake(workdir, LENGTH_TARGET, check=False)
    shown = failed.stdout + failed.stderr
    assert failed.returncode != 0
    message = f"{relative} is damaged (its tensors end at byte "
    advice = f"moved to {relative}.damaged. Rule train rebuilds it: {RERUN}"
    assert shown.count(message) == 1 and shown.count(advice) == 1, shown[-6000:]
    assert "Traceback" not in shown and "SafetensorError" not in shown
    assert not weights.exists() and Path(f"{weights}.damaged").exists()
    assert ("train", "rope") in planned_jobs(workdir, LENGTH_TARGET)  # the dry run plans the training now

    rebuilt = snakemake(workdir, LENGTH_TARGET, check=False)
    shown = rebuilt.stdout + rebuilt.stderr
    assert rebuilt.returncode == 0, shown[-6000:]
    assert "rule train:" in shown and "rule tokenizer:" not in shown
    log = (workdir / "results" / "logs" / "train" / "rope.log").read_text()
    steps = 20  # .test/config.yaml's training.steps: resumed at the end, not one step trained again
    assert re.search(rf"rope: resuming from \S+/last\.ckpt at step {steps};", log), log[:3000]
    assert re.search(r"rope step \d+/", log) is None, log[:3000]
    again = load_file(weights)
    assert again.keys() == original.keys() and all(torch.equal(again[k], original[k]) for k in original)
    assert planned_jobs(workdir, LENGTH_TARGET) == set()


@pytest.mark.workflow
def test_damaged_tokenizer_is_named_moved_aside_and_rebuilt(finished_copy):
    """The tokenizer's folder is read by the training (saved with the model): rule tokenizer rebuilds it, and the
    training resumes from its checkpoint (the same tokens, the same settings). The target is the model: the
    failed training's outputs are what the rerun must make (Snakemake 9 reruns a job whose outputs are missing
    only where a target or a job that runs anyway needs them)."""
    workdir = finished_copy
    relative = f"{paths.tokenizer_dir()}/tokenizer.json"
    path = workdir / relative
    raw = path.read_bytes()
    replace(path, raw[: len(raw) // 2])

    failed = snakemake(workdir, MODEL_TARGET, check=False)
    shown = failed.stdout + failed.stderr
    assert failed.returncode != 0
    message = f"{relative} is damaged (JSONDecodeError: "
    advice = f"moved to {relative}.damaged. Rule tokenizer rebuilds it: {RERUN}"
    assert shown.count(message) == 1 and shown.count(advice) == 1, shown[-6000:]
    assert not path.exists() and Path(f"{path}.damaged").exists()

    rebuilt = snakemake(workdir, MODEL_TARGET, check=False)
    shown = rebuilt.stdout + rebuilt.stderr
    assert rebuilt.returncode == 0, shown[-6000:]
    assert "rule tokenizer:" in shown and "rule train:" in shown
    assert len(AutoTokenizer.from_pretrained(path.parent)) == 400  # .test/config.yaml's tokenizer.vocab_size
    log = (workdir / "results" / "logs" / "train" / "rope.log").read_text()
    assert re.search(r"rope: resuming from \S+/last\.ckpt at step 20;", log), log[:3000]
    assert planned_jobs(workdir, MODEL_TARGET) == set()
