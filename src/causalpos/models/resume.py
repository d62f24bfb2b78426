"""Restarting a killed extraction from its last completed group of sequences instead of from zero.

When a group of sequences is complete its rows of groups.parquet are written as a file
of their own, then `state.pt` (running sums, the intermediates' and the probe's sums,
the position in the sequences, the seconds spent) is replaced atomically: a kill at any
moment leaves the state of the last completed group and its files. The state belongs to
one run, named by a key that hashes the model (class, config, weights, dtype, device
type), the tokens, the settings and the extraction's own code: a different key starts
afresh and clears the folder. The folder is removed once the tables are written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import torch

from causalpos.io import atomic_path
from causalpos.models.outputs import part_name

log = logging.getLogger("causalpos")

STATE = "state.pt"


def run_key(model, tokens: np.ndarray, settings: dict, code: str) -> str:
    """SHA-256 of everything that decides the extraction's numbers (the weights' bytes included: ~1 s per GB);
    `code` is the digest of the code that computes them (its caller's: workflow.digest.code_digest)."""
    digest = hashlib.sha256()
    parameter = next(model.parameters())
    described = {
        "settings": settings,
        "class": type(model).__name__,
        "config": model.config.to_dict(),
        "dtype": str(parameter.dtype),
        "device": parameter.device.type,
        "tokens": [list(tokens.shape), str(tokens.dtype)],
    }
    digest.update(json.dumps(described, sort_keys=True, default=str).encode())
    digest.update(np.ascontiguousarray(tokens).tobytes())
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy())
    digest.update(code.encode())
    return digest.hexdigest()


class ExtractionState:
    """The restart state of one extraction, kept in a folder: its group parts and `state.pt` (training
    checkpoints are another thing, causalpos.models.checkpoints)."""

    def __init__(self, folder, key: str):
        self.folder, self.key = Path(folder), key

    def part(self, group: int) -> Path:
        return self.folder / part_name(group)

    def load(self, device) -> dict | None:
        """The saved state of this run (its later group parts removed), or None, the folder cleared."""
        path = self.folder / STATE
        if not path.exists():
            self.clear()
            return None
        try:  # our own file, holding numpy arrays and the probe's objects besides tensors
            state = torch.load(path, map_location=device, weights_only=False)
        except Exception as err:  # a damaged state costs the work done so far, nothing else
            log.warning("extract: cannot read %s (%s: %s); starting afresh", path, type(err).__name__, err)
            self.clear()
            return None
        if state.get("key") != self.key:
            log.info(
                "extract: %s belongs to another run (model, tokens, settings or code differ); starting afresh", path
            )
            self.clear()
            return None
        if not all(self.part(group).exists() for group in range(state["groups_done"])):
            log.warning("extract: %s lacks group files its state counts; starting afresh", self.folder)
            self.clear()
            return None
        for part in self.folder.glob("group-*.parquet"):  # written after the state was: redone
            if int(part.stem.split("-")[1]) >= state["groups_done"]:
                part.unlink()
        return state

    def save(self, state: dict) -> None:
        with atomic_path(self.folder / STATE) as tmp:
            torch.save({**state, "key": self.key}, tmp)

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True, exist_ok=True)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
