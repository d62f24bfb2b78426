"""Weight-only snapshots of a training run at chosen steps (training.snapshot_steps), for the emergence sweep.

A snapshot of step s holds the model's weights after exactly s optimizer steps (step 0: the initial weights),
as safetensors (tied weights stored once), nothing else: no optimizer state, no RNG. Training writes each one
atomically into the checkpoint folder as it reaches the step, before that step's checkpoint, so a checkpoint
at step s means every snapshot up to s is on disk; a resumed run writes those after its checkpoint, and since
the resumed weights are bitwise those of an uninterrupted run, so are its snapshots. They live beside the
checkpoints, not in the model folder, because Snakemake removes the outputs of a failed job: at the end the
complete set is copied into the model folder's `snapshots/`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from causalpos.catalogue.paths import SNAPSHOT_FOLDER as FOLDER
from causalpos.catalogue.paths import snapshot_name
from causalpos.io import atomic_path

PATTERN = re.compile(r"step_(\d+)\.safetensors")


def step_of(path) -> int:
    """The step of a snapshot file, from its name."""
    match = PATTERN.fullmatch(Path(path).name)
    if match is None:
        raise ValueError(f"{path}: not a snapshot file name (step_NNNNNNN.safetensors)")
    return int(match.group(1))


def write_snapshot(model, path) -> None:
    """The model's weights to `path`, atomically (a kill leaves the old file or none, never half of one)."""
    from safetensors.torch import save_model

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        save_model(model, str(tmp))


def load_snapshot(model, path) -> None:
    """Load the weights of a snapshot into `model` (the same architecture), in the model's own dtype; a damaged
    file raises DamagedFileError naming it (models.model_files)."""
    from safetensors.torch import load_model

    from causalpos.models.model_files import verify_safetensors

    verify_safetensors(path)
    missing, unexpected = load_model(model, str(path), strict=True)
    if missing or unexpected:  # load_model raises on these with strict=True; kept as a guard
        raise ValueError(f"{path}: does not fit the model (missing {missing}, unexpected {unexpected})")


class Snapshots:
    """The snapshots of one run: which steps are due and where they go."""

    def __init__(self, folder, steps):
        self.folder, self.steps = Path(folder), sorted(set(int(s) for s in steps))

    def path(self, step: int) -> Path:
        return self.folder / snapshot_name(step)

    def due(self, step: int) -> bool:
        return step in self.steps

    def missing(self, up_to: int) -> list[int]:
        """Scheduled steps <= up_to without their file (a resumed run must have them all)."""
        return [s for s in self.steps if s <= up_to and not self.path(s).is_file()]

    def write(self, model, step: int) -> None:
        if self.due(step):
            write_snapshot(model, self.path(step))

    def publish(self, out_dir) -> list[Path]:
        """Copy every snapshot into `out_dir`/snapshots/ (each file atomically); the paths written."""
        if not self.steps:
            return []
        target = Path(out_dir) / FOLDER
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for step in self.steps:
            with atomic_path(target / snapshot_name(step)) as tmp:
                shutil.copyfile(self.path(step), tmp)
            written.append(target / snapshot_name(step))
        return written
