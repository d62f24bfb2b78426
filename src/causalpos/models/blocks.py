"""The token blocks a decoder trains and is evaluated on, memory-mapped; the order training reads them in; the
next-token losses on them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from causalpos.catalogue.tables import TABLES
from causalpos.io import read_array, read_json


# ---------------------------------------------------------------- data


class Blocks:
    """The token blocks of one data folder, memory-mapped."""

    def __init__(self, blocks_dir):
        self.dir = Path(blocks_dir)
        meta_path = self.dir / TABLES["blocks"].filename
        if not meta_path.is_file():
            raise FileNotFoundError(f"{meta_path} does not exist (is {self.dir} a token-blocks folder?)")
        self.meta = read_json(meta_path)
        self.block_len = int(self.meta["block_len"])
        self.vocab_size = int(self.meta["vocab_size"])
        self.eos_token_id = self.meta.get("eos_token_id")
        self.train = self._load("train")
        self.heldout = self._load("heldout")

    def _load(self, split: str) -> np.ndarray:
        path = self.dir / f"{split}.npy"
        array = read_array(path, mmap_mode="r")  # DamagedFileError naming it if truncated
        if array.ndim != 2 or array.shape[1] != self.block_len or array.shape[0] < 1:
            raise ValueError(f"{path}: shape {array.shape} is not [n_blocks >= 1, block_len = {self.block_len}]")
        if array.dtype.kind not in "ui":
            raise ValueError(f"{path}: dtype {array.dtype} is not an integer type")
        low, high = int(array.min()), int(array.max())  # one pass; an id out of range would crash mid-run
        if low < 0 or high >= self.vocab_size:
            raise ValueError(
                f"{path}: token ids {low}..{high} outside the vocabulary 0..{self.vocab_size - 1} "
                f"of {self.dir / TABLES['blocks'].filename}"
            )
        return array


class TrainOrder:
    """Block index at each position of the training stream, epoch after epoch."""

    def __init__(self, n_blocks: int, seed: int):
        self.n, self.seed = n_blocks, seed
        self._epoch, self._perm = -1, None

    def permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:  # positions are read in order, so one cached epoch suffices
            self._epoch, self._perm = epoch, np.random.default_rng([self.seed, epoch]).permutation(self.n)
        return self._perm

    def __call__(self, start: int, count: int) -> np.ndarray:
        parts = []
        while count > 0:
            epoch, offset = divmod(start, self.n)
            take = min(count, self.n - offset)
            parts.append(self.permutation(epoch)[offset : offset + take])
            start, count = start + take, count - take
        return np.concatenate(parts)


def micro_batch_blocks(order: TrainOrder, step: int, micro: int, cfg: dict, rank: int, world: int) -> np.ndarray:
    """The blocks of one rank's micro batch: rank r takes the r-th contiguous slice of the global batch."""
    per_rank = cfg["micro_batch"] * cfg["grad_accum"]
    start = step * per_rank * world + rank * per_rank + micro * cfg["micro_batch"]
    return order(start, cfg["micro_batch"])


def to_tokens(array: np.ndarray, device: torch.device) -> torch.Tensor:
    # int64 for the embedding lookup; copies out of the memory map
    return torch.from_numpy(np.asarray(array, dtype=np.int64)).to(device, non_blocking=True)


# ---------------------------------------------------------------- losses


def token_losses(model, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy at every position but the last, [batch, seq - 1], float32."""
    logits = model(input_ids=tokens).logits
    # pad the targets instead of slicing the logits: no copy of the [batch, seq, vocab] tensor
    targets = F.pad(tokens[:, 1:], (0, 1), value=-100)
    losses = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100, reduction="none")
    return losses.view(tokens.shape)[:, :-1]


def lm_loss(model, tokens: torch.Tensor) -> torch.Tensor:
    return token_losses(model, tokens).mean()
