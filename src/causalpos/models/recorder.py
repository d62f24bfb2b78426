"""The attention function that records every layer's scores while the model runs (Sections 4.2 and 5.2).

`recording_attention` is registered in transformers' AttentionInterface under
ATTENTION_NAME (and transformers' SDPA mask builder under the same name, so a
model with sliding-window layers gets its windowed masks). A model loaded with
that implementation calls it in every layer with the queries and keys as the
model uses them (after RoPE, any q/k norm, the model's own scaling), and the mask
the layer applies. It adds the head-averaged scaled scores q.k * scaling of each
sequence to running float64 sums of that layer (and, for standard errors, each
batch's centred sums of squares merged into a running float64 mean and sum of squared deviations, Chan et
al.'s pairwise update: a pair whose score is the same in every sequence has a standard error of exactly 0,
and a large mean does not cancel its spread), then computes the attention output with transformers' own SDPA
function. Nothing of size batch x heads x S x S is ever kept. With `per_head` it also adds each query head's
scores to running float64 sums [layers, heads, pairs] (the mean only: no squares, no groups), in a second
computation beside the head average's, which stays as it is.

Only the lower triangle (key <= query) is kept, packed row-major (causalpos.tril:
pair (q, k) at q (q + 1) / 2 + k). Pairs a layer's mask hides inside that triangle
(keys a sliding window leaves out) get no logit from the model, so their means,
standard errors and group sums are NaN in that layer.

Layers and positions are 0-based; `model.model.layers[l]` is layer l.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from causalpos.models.errors import ExtractionError
from causalpos.tril import packed_size

ATTENTION_NAME = "causalpos_scores"
ROW_BLOCK = 128  # query rows per score block: only blocks on or below the diagonal are multiplied


@dataclass
class ScoreRecorder:
    """Running sums over sequences of every layer's head-averaged scores; optional per-batch captures."""

    n_layers: int
    seq_len: int
    device: torch.device
    capture_layers: tuple = ()
    per_head: bool = False  # also each query head's sums (head_total), extraction.per_head
    total: torch.Tensor = field(init=False)  # [layers, packed pairs] float64, all sequences so far
    # [layers, packed pairs] float64: the running mean and sum of squared deviations of the standard errors
    running_mean: torch.Tensor = field(init=False)
    squared_deviations: torch.Tensor = field(init=False)
    layer_n: list = field(init=False)  # sequences each layer has recorded so far
    group_total: torch.Tensor = field(init=False)  # the open group's sums, float32 as groups.parquet stores them
    hidden: dict = field(default_factory=dict)  # layer -> packed bool, pairs its mask hides (absent: none)
    outputs: dict = field(default_factory=dict)  # layer -> this batch's attention output [B, S, H * D]
    av_gram: dict = field(default_factory=dict)  # layer -> this batch's sum over sequences of the head-mean Gram of AV
    n_sequences: int = 0
    group_n: int = 0
    # [layers, heads, packed pairs] float64 sums of each query head's scores, all sequences so far (per_head;
    # made at the first layer's call, when the number of heads is known)
    head_total: torch.Tensor | None = None

    def __post_init__(self):
        shape = (self.n_layers, packed_size(self.seq_len))
        self.total = torch.zeros(shape, dtype=torch.float64, device=self.device)
        self.running_mean = torch.zeros(shape, dtype=torch.float64, device=self.device)
        self.squared_deviations = torch.zeros(shape, dtype=torch.float64, device=self.device)
        self.layer_n = [0] * self.n_layers
        # float32: a group's sums are stored as float32, and it adds up few batches (one in the default run)
        self.group_total = torch.zeros(shape, dtype=torch.float32, device=self.device)
        self._blocks = _row_blocks(self.seq_len, self.device)

    def record_scores(
        self,
        layer: int,
        query: torch.Tensor,
        key: torch.Tensor,
        scaling: float,
        attention_mask: torch.Tensor | None = None,
    ) -> None:
        batch, heads, seq, dim = query.shape
        if seq != self.seq_len:
            raise ExtractionError(f"layer {layer}: the recorder expects {self.seq_len} positions, got {seq}")
        if layer not in self.hidden:
            self.hidden[layer] = self._hidden_pairs(attention_mask, seq)
        groups = key.shape[1]  # grouped-query attention: heads // groups query heads share each key head
        # sum_h q_h . k_g(h) = sum_g (sum of the query heads of group g) . k_g: one [S, groups * D] x
        # [groups * D, S] product per sequence, the head mean and scaling folded into the queries
        q = query.float().reshape(batch, groups, heads // groups, seq, dim).sum(dim=2) * (scaling / heads)
        q = q.transpose(1, 2).reshape(batch, seq, groups * dim)
        k = key.float().transpose(1, 2).reshape(batch, seq, groups * dim)
        seen = self.layer_n[layer]
        for rows, cols, where, start, stop in self._blocks:
            scores = torch.bmm(q[:, rows], k[:, :cols].transpose(1, 2))  # [B, rows, keys <= the block's last row]
            # float32 over the batch's few sequences, then float64 over all sequences
            block_sum = scores.sum(dim=0).view(-1).index_select(0, where)
            self.total[layer, start:stop] += block_sum
            self.group_total[layer, start:stop] += block_sum
            self._add_spread(layer, start, stop, scores, where, seen)
        self.layer_n[layer] += batch
        if layer == 0:
            self.n_sequences += batch
            self.group_n += batch
        if self.per_head:
            self._record_heads(layer, query, key, scaling)

    def _add_spread(self, layer: int, start: int, stop: int, scores: torch.Tensor, where, seen: int) -> None:
        """Merge the batch's mean and squared deviations into the layer's running ones (pairwise update). The
        batch's are taken about its first sequence (shifted data): float32 differences of nearly equal scores
        are exact, so a constant score adds exactly 0, whatever its size. Overwrites `scores`."""
        batch = scores.shape[0]
        shift = scores[0].clone()
        deviation = scores.sub_(shift)
        s1 = deviation.sum(dim=0).view(-1).index_select(0, where).double()
        s2 = deviation.square_().sum(dim=0).view(-1).index_select(0, where).double()
        batch_mean = shift.view(-1).index_select(0, where).double() + s1 / batch
        batch_m2 = (s2 - s1.square() / batch).clamp_(min=0)
        mean, m2 = self.running_mean[layer, start:stop], self.squared_deviations[layer, start:stop]
        delta = batch_mean - mean
        n = seen + batch
        m2 += batch_m2 + delta.square() * (seen * batch / n)
        mean += delta * (batch / n)

    def _record_heads(self, layer: int, query: torch.Tensor, key: torch.Tensor, scaling: float) -> None:
        """Add each query head's scores of the batch to head_total. Query head h reads key head h // (heads //
        key heads), as transformers' repeat_kv expands them. The sum over the batch of q_b k_b^T is one product
        per head with the sequences side by side in the inner dimension, [rows, B * D] x [B * D, keys]: no
        [B, heads, S, S] transient and no sum over it."""
        batch, heads, seq, dim = query.shape
        groups = key.shape[1]
        if self.head_total is None:
            self.head_total = torch.zeros(
                (self.n_layers, heads, packed_size(self.seq_len)), dtype=torch.float64, device=self.device
            )
        q = (query.float() * scaling).permute(1, 2, 0, 3).reshape(groups, heads // groups, seq, batch * dim)
        k = key.float().permute(1, 2, 0, 3).reshape(groups, seq, batch * dim)
        for rows, cols, where, start, stop in self._blocks:
            # [groups, heads of the group x the block's rows, keys]: head g * (heads // groups) + r of group g
            scores = torch.matmul(q[:, :, rows].reshape(groups, -1, batch * dim), k[:, :cols].transpose(1, 2))
            self.head_total[layer, :, start:stop] += scores.view(heads, -1).index_select(1, where)

    def _hidden_pairs(self, attention_mask: torch.Tensor | None, seq: int) -> torch.Tensor | None:
        """Packed pairs of the lower triangle that the layer's mask hides, None if it hides none.

        The mask is what the model hands its attention (None: plain causal); sequences have no
        padding, so the first sequence's mask is every sequence's."""
        if attention_mask is None:
            return None
        mask = attention_mask[0, 0]
        if tuple(mask.shape) != (seq, seq):
            raise ExtractionError(f"attention mask of shape {tuple(attention_mask.shape)}: expected [.., {seq}, {seq}]")
        visible = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
        query, key = torch.tril_indices(seq, seq, device=mask.device)
        hidden = ~visible[query, key]
        return hidden.to(self.device) if bool(hidden.any()) else None

    def record_output(self, layer: int, output: torch.Tensor) -> None:
        """Attention output AV, [batch, S, heads, head_dim] as transformers' SDPA returns it."""
        if layer not in self.capture_layers:
            return
        heads = output.shape[2]
        gram = torch.einsum("bqhd,bkhd->qk", output.float(), output.float()).double() / heads
        self.av_gram[layer] = gram
        self.outputs[layer] = output.reshape(output.shape[0], output.shape[1], -1)

    def group_sums(self, layer: int) -> np.ndarray:
        """The open group's packed score sums of one layer, float32 (as stored), NaN where the layer hides the pair."""
        return self.masked(layer, self.group_total[layer].cpu().numpy().copy())

    def masked(self, layer: int, values: np.ndarray) -> np.ndarray:
        """`values` (packed, of this layer) with NaN at the pairs the layer's mask hides; in place."""
        if self.hidden.get(layer) is not None:
            values[self.hidden[layer].cpu().numpy()] = np.nan
        return values

    def close_group(self) -> int:
        """Start the next group; returns the size of the one closed."""
        n, self.group_n = self.group_n, 0
        self.group_total.zero_()
        return n

    def mean_and_sem(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean over sequences and its standard error, packed [layers, pairs], NaN where a layer hides a pair.
        Computed in place, layer by layer, over the two accumulators: call it once, at the end."""
        n = self.n_sequences
        for mean, sem in zip(self.total, self.squared_deviations):
            mean /= n
            if n > 1:  # sample variance of the per-sequence scores, then the standard error of their mean
                sem.mul_(1.0 / ((n - 1) * n)).sqrt_()
            else:
                sem.fill_(float("nan"))
        mean, sem = self.total.cpu().numpy(), self.squared_deviations.cpu().numpy()
        for layer in range(self.n_layers):
            self.masked(layer, mean[layer])
            self.masked(layer, sem[layer])
        return mean, sem

    def head_means(self) -> np.ndarray | None:
        """Each head's mean over sequences, packed [layers, heads, pairs], NaN where a layer hides a pair; None
        without per_head. Divides head_total in place: call it once, at the end."""
        if self.head_total is None:
            return None
        mean = self.head_total.div_(self.n_sequences).cpu().numpy()
        for layer in range(self.n_layers):
            if self.hidden.get(layer) is not None:
                mean[layer][:, self.hidden[layer].cpu().numpy()] = np.nan
        return mean


def _row_blocks(seq_len: int, device) -> list:
    """(query rows, key count, packed positions within the block's [rows, keys] product, packed start, stop)."""
    blocks = []
    for first in range(0, seq_len, ROW_BLOCK):
        last = min(seq_len, first + ROW_BLOCK)
        rows = torch.arange(first, last)
        keep = torch.arange(last)[None, :] <= rows[:, None]  # row-major, so the packed order
        blocks.append(
            (
                slice(first, last),
                last,
                keep.view(-1).nonzero().squeeze(1).to(device),
                packed_size(first),
                packed_size(last),
            )
        )
    return blocks


def recording_attention(
    module,
    query,
    key,
    value,
    attention_mask,
    scaling=None,
    dropout=0.0,
    causalpos_recorder: ScoreRecorder | None = None,
    **kwargs,
):
    """transformers attention function: transformers' SDPA, plus the scores' running sums when given a recorder."""
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if kwargs.get("softcap") is not None:  # Gemma-2's tanh capping: SDPA cannot apply it, nor the recorder
        raise ExtractionError(
            f"{type(module).__name__} caps its attention logits (softcap = {kwargs['softcap']}); "
            f"the extraction records uncapped q.k only"
        )
    if causalpos_recorder is not None:
        causalpos_recorder.record_scores(module.layer_idx, query, key, scale, attention_mask)
    output, _ = ALL_ATTENTION_FUNCTIONS["sdpa"](
        module, query, key, value, attention_mask, dropout=dropout, scaling=scale, **kwargs
    )
    if causalpos_recorder is not None:
        causalpos_recorder.record_output(module.layer_idx, output)
    return output, None


AttentionInterface.register(ATTENTION_NAME, recording_attention)
# without a mask function of its own, transformers gives a custom attention no mask at all, which
# would turn a sliding-window layer into a full causal one: use SDPA's, as the SDPA output needs
ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION_NAME, sdpa_mask)
