"""Inside trained and pretrained decoders (Sections 4.2 and 5.2): attention scores and Figure 3's intermediates.

The scores are reduced inside the attention computation. `recording_attention`
is registered in transformers' AttentionInterface under ATTENTION_NAME; a model
loaded with that implementation calls it in every layer with the queries and
keys as the model uses them (after RoPE and any q/k norm). It adds the
head-averaged scaled scores q.k / sqrt(d) of each sequence to running float64
sums (and sums of squares, for standard errors) of that layer, then computes
the attention output with transformers' own SDPA function. Nothing of size
batch x heads x S x S is ever kept: the extra memory is two [layers, S, S]
float64 accumulators plus one [batch, S, S] transient, whatever the number of
sequences, where `output_attentions=True` keeps layers x batch x heads x S x S.

The intermediates of Figure 3 (layer l and l + 1) are Gram matrices, inner
products between positions averaged over sequences (and heads for per-head
quantities), of: (a) Y = LN(X), (b) QK^T / sqrt(d), (c) AV, (d) AV W_O,
(e) O = AV W_O + X, (f) LN(O), (g) X' = FFN(LN(O)) + O, (h) LN(X') of layer
l + 1 and (i) layer l + 1's QK^T / sqrt(d). (a) and (d)-(h) are recomputed from
the layer's input X and attention output AV with the layer's own modules, and
the recomputed X' must equal the model's own output of layer l, which is
checked on every batch.

Layers and positions are 0-based; `model.model.layers[l]` is layer l.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from transformers import AttentionInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from causalpos.errors import UserError
from causalpos.matrices import diagonal_normalise
from causalpos.tables import GROUP_COLUMNS, INTERMEDIATE_COLUMNS, PROBE_COLUMNS, SCORE_COLUMNS

log = logging.getLogger("causalpos")

ATTENTION_NAME = "causalpos_scores"


class ExtractionError(UserError, RuntimeError):
    """The model cannot be analysed as asked; the message names the model and the setting."""


# ---------------------------------------------------------------- the attention function


@dataclass
class ScoreRecorder:
    """Running sums over sequences of every layer's head-averaged scores; optional per-batch captures."""

    n_layers: int
    seq_len: int
    device: torch.device
    capture_layers: tuple = ()
    total: torch.Tensor = field(init=False)
    total_sq: torch.Tensor = field(init=False)
    probabilities: bool = False  # also sum the head-averaged attention probabilities (for checks against eager)
    prob_total: torch.Tensor | None = None
    outputs: dict = field(default_factory=dict)  # layer -> this batch's attention output [B, S, H * D]
    av_gram: dict = field(default_factory=dict)  # layer -> this batch's sum over sequences of the head-mean Gram of AV
    n_sequences: int = 0
    group_total: torch.Tensor | None = field(init=False, default=None)  # this group's sums, [layers, S, S]
    group_n: int = 0

    def __post_init__(self):
        shape = (self.n_layers, self.seq_len, self.seq_len)
        self.total = torch.zeros(shape, dtype=torch.float64, device=self.device)
        self.total_sq = torch.zeros(shape, dtype=torch.float64, device=self.device)
        self.group_total = torch.zeros(shape, dtype=torch.float64, device=self.device)
        if self.probabilities:
            self.prob_total = torch.zeros(shape, dtype=torch.float64, device=self.device)

    def record_scores(self, layer: int, query: torch.Tensor, key: torch.Tensor, scaling: float) -> None:
        batch, heads, seq, dim = query.shape
        groups = key.shape[1]  # grouped-query attention: heads // groups query heads share each key head
        # sum_h q_h . k_g(h) = sum_g (sum of the query heads of group g) . k_g: no repeated keys, 1/groups the work
        q = query.float().reshape(batch, groups, heads // groups, seq, dim).sum(dim=2)
        per_sequence = torch.einsum("bgqd,bgkd->bqk", q, key.float()).double() * (scaling / heads)
        batch_sum = per_sequence.sum(dim=0)
        self.total[layer] += batch_sum
        self.group_total[layer] += batch_sum
        self.total_sq[layer] += per_sequence.square().sum(dim=0)
        if layer == 0:
            self.n_sequences += batch
            self.group_n += batch
        if self.probabilities:  # per-head scores: a [batch, heads, S, S] transient, for checks only
            k = key.float().repeat_interleave(heads // groups, dim=1)
            scores = torch.einsum("bhqd,bhkd->bhqk", query.float(), k) * scaling
            future = torch.ones(seq, seq, dtype=torch.bool, device=scores.device).triu(1)
            probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
            self.prob_total[layer] += probs.double().mean(dim=1).sum(dim=0)

    def record_output(self, layer: int, output: torch.Tensor) -> None:
        """Attention output AV, [batch, S, heads, head_dim] as transformers' SDPA returns it."""
        if layer not in self.capture_layers:
            return
        heads = output.shape[2]
        gram = torch.einsum("bqhd,bkhd->qk", output.float(), output.float()).double() / heads
        self.av_gram[layer] = gram
        self.outputs[layer] = output.reshape(output.shape[0], output.shape[1], -1)

    def take_group(self) -> tuple[int, np.ndarray]:
        """This group's sequence count and score sums [layers, S, S] (float64, on the CPU); starts the next group."""
        n, sums = self.group_n, self.group_total.cpu().numpy().copy()
        self.group_total.zero_()
        self.group_n = 0
        return n, sums

    def mean_and_sem(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean over sequences and its standard error, [layers, S, S]. Computed in place, layer by
        layer, over the two accumulators (no further [layers, S, S] buffers): call it once, at the end."""
        n = self.n_sequences
        for mean, sem in zip(self.total, self.total_sq):
            mean /= n
            if n > 1:  # sample variance of the per-sequence scores, then the standard error of their mean
                sem.div_(n).sub_(mean.square()).clamp_(min=0).mul_(1.0 / (n - 1)).sqrt_()
            else:
                sem.fill_(float("nan"))
        return self.total.cpu().numpy(), self.total_sq.cpu().numpy()


def recording_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                        causalpos_recorder: ScoreRecorder | None = None, **kwargs):
    """transformers attention function: transformers' SDPA, plus the scores' running sums when given a recorder."""
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if causalpos_recorder is not None:
        causalpos_recorder.record_scores(module.layer_idx, query, key, scale)
    output, _ = ALL_ATTENTION_FUNCTIONS["sdpa"](module, query, key, value, attention_mask, dropout=dropout,
                                                scaling=scale, **kwargs)
    if causalpos_recorder is not None:
        causalpos_recorder.record_output(module.layer_idx, output)
    return output, None


AttentionInterface.register(ATTENTION_NAME, recording_attention)


# ---------------------------------------------------------------- the model


def decoder_layers(model, name: str):
    """The model's decoder layers, checked to be the pre-norm Llama-family layout the extractor understands."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    needed = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
    if layers is None or len(layers) == 0 or not all(all(hasattr(layer, a) for a in needed) for layer in layers):
        raise ExtractionError(f"model {name!r} ({type(model).__name__}) has no decoder layers the extractor "
                              f"understands (model.model.layers with {', '.join(needed)})")
    if not all(hasattr(layer.self_attn, "o_proj") and hasattr(layer.self_attn, "layer_idx") for layer in layers):
        raise ExtractionError(f"model {name!r}: its attention modules lack o_proj / layer_idx")
    return layers


def check_request(model, name: str, seq_len: int, intermediates_layer: int | None) -> None:
    n_layers = len(decoder_layers(model, name))
    context = getattr(model.config, "max_position_embeddings", None)
    if context is not None and seq_len > context:
        raise ExtractionError(f"sequence length {seq_len} exceeds model {name!r}'s context "
                              f"(max_position_embeddings = {context})")
    if intermediates_layer is not None and not 0 <= intermediates_layer < n_layers - 1:
        raise ExtractionError(f"extraction.intermediates_layer = {intermediates_layer} is out of range for model "
                              f"{name!r}: it needs layer l and l + 1, so 0 <= l <= {n_layers - 2}")


@contextmanager
def layer_io(layers, wanted: set):
    """Forward hooks (PyTorch's public API): the input of every layer in `wanted` and the output of the last."""
    seen = {}

    def keep_input(index):
        def hook(module, args, kwargs):
            seen[("in", index)] = args[0] if args else kwargs["hidden_states"]
        return hook

    def keep_output(index):
        def hook(module, args, kwargs, output):
            seen[("out", index)] = output[0] if isinstance(output, tuple) else output
        return hook

    handles = []
    for index in sorted(wanted):
        handles.append(layers[index].register_forward_pre_hook(keep_input(index), with_kwargs=True))
        handles.append(layers[index].register_forward_hook(keep_output(index), with_kwargs=True))
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def gram_sum(x: torch.Tensor) -> torch.Tensor:
    """sum over the batch of X X^T, [S, S] float64, for X [batch, S, features]."""
    x = x.float()
    return torch.einsum("bqh,bkh->qk", x, x).double()


def _intermediates_of_batch(layers, layer: int, seen: dict, recorder: ScoreRecorder, name: str) -> dict:
    """Stages (a), (d)-(h) of this batch as Gram sums, recomputed with the layer's own modules."""
    block, following = layers[layer], layers[layer + 1]
    x, model_output = seen[("in", layer)], seen[("out", layer)]
    av = recorder.outputs.pop(layer)
    y = block.input_layernorm(x)
    av_wo = block.self_attn.o_proj(av)
    o = av_wo + x
    ln_o = block.post_attention_layernorm(o)
    x_next = block.mlp(ln_o) + o
    # the same check the paper's analysis rests on: recomputing X' from these pieces gives the model's own X'
    tolerance = 1e-3 if x.dtype == torch.float32 else 3e-2
    scale = model_output.float().abs().max().item() or 1.0
    error = (x_next.float() - model_output.float()).abs().max().item()
    if not error <= tolerance * scale:
        raise ExtractionError(f"model {name!r}, layer {layer}: X' recomputed as FFN(LN(AV W_O + X)) + AV W_O + X "
                              f"differs from the model's own output of the layer by {error:.3g} (scale {scale:.3g}); "
                              f"its decoder layer is not the pre-norm layout the intermediates assume")
    return {"a": gram_sum(y), "d": gram_sum(av_wo), "e": gram_sum(o), "f": gram_sum(ln_o), "g": gram_sum(x_next),
            "h": gram_sum(following.input_layernorm(x_next))}


# ---------------------------------------------------------------- position probe


def fit_position_probe(features: np.ndarray, positions: np.ndarray, sequence: np.ndarray,
                       penalties=(1e-3, 1e-2, 1e-1, 1, 10, 100, 1000)) -> dict:
    """Ridge regression from hidden state to token position, split by sequence (Haviv et al., 2022).

    The first 60% of sequences train, the next 20% choose the penalty, the last 20%
    give the held-out mean absolute error; `mae_baseline` always predicts the mean
    training position (what a state without positional information can do).
    """
    ids = np.unique(sequence)
    if len(ids) < 5:
        raise ExtractionError(f"the position probe needs at least 5 sequences, got {len(ids)}")
    cut1, cut2 = int(0.6 * len(ids)), int(0.8 * len(ids))
    parts = [np.isin(sequence, ids[:cut1]), np.isin(sequence, ids[cut1:cut2]), np.isin(sequence, ids[cut2:])]
    x = features.astype(np.float64)
    mean, std = x[parts[0]].mean(0), x[parts[0]].std(0) + 1e-8
    x = (x - mean) / std
    y = positions.astype(np.float64)

    def ridge(rows):
        # one SVD gives the ridge solution for every penalty: w = V diag(s / (s^2 + n p)) U^T (y - mean y)
        u, sv, vt = np.linalg.svd(x[rows], full_matrices=False)
        offset = y[rows].mean()
        projected = u.T @ (y[rows] - offset)
        return lambda penalty: (vt.T @ (sv / (sv ** 2 + penalty * rows.sum()) * projected), offset)

    def error(solution, rows):
        weights, offset = solution
        return float(np.abs(x[rows] @ weights + offset - y[rows]).mean())

    fit = ridge(parts[0])
    best = min(penalties, key=lambda p: error(fit(p), parts[1]))
    train = parts[0] | parts[1]  # refit on train + validation with the chosen penalty
    return {"mae": error(ridge(train)(best), parts[2]),
            "mae_baseline": float(np.abs(y[train].mean() - y[parts[2]]).mean()),
            "n_train": int(train.sum()), "n_test": int(parts[2].sum())}


# ---------------------------------------------------------------- extraction


@dataclass
class Extraction:
    scores: pd.DataFrame
    intermediates: pd.DataFrame
    probe: pd.DataFrame
    seconds: float
    groups: pd.DataFrame | None = None


@torch.no_grad()
def extract(model, tokens: np.ndarray, name: str, kind: str, batch_size: int = 8, intermediates_layer: int | None = 0,
            probe_sequences: int = 200, probe_positions: int = 32, seed: int = 0, progress: bool = False,
            n_groups: int = 16) -> Extraction:
    """Scores of every layer over all `tokens` [n_sequences, S]; intermediates and the probe on them too.

    `model` must have been loaded with attn_implementation=ATTENTION_NAME. The probe
    uses the first `probe_sequences` sequences and at most `probe_positions`
    positions of each (seeded choice), so its memory stays small for long sequences.

    The sequences also fall into `n_groups` contiguous groups of whole batches (fewer when
    there are fewer batches), whose sums are kept (`groups`, see group_frame): a bootstrap over
    sequences resamples them, so any statistic of the mean matrices gets an uncertainty.
    """
    if model.config._attn_implementation != ATTENTION_NAME:
        raise ExtractionError(f"model {name!r} was loaded with attention {model.config._attn_implementation!r}; "
                              f"load it with attn_implementation={ATTENTION_NAME!r}")
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or len(tokens) == 0:
        raise ExtractionError(f"model {name!r}: tokens must be a non-empty [sequences, positions] array, "
                              f"got shape {tokens.shape}")
    n_sequences, seq_len = tokens.shape
    check_request(model, name, seq_len, intermediates_layer)
    layers = decoder_layers(model, name)
    n_layers = len(layers)
    device = next(model.parameters()).device
    capture = () if intermediates_layer is None else (intermediates_layer, intermediates_layer + 1)
    recorder = ScoreRecorder(n_layers, seq_len, device, capture_layers=capture[:1])
    rng = np.random.default_rng(seed)
    n_probe = min(probe_sequences, n_sequences)
    positions = np.arange(seq_len) if seq_len <= probe_positions else None
    probe_rows = {layer: [] for layer in range(n_layers + 1)}
    probe_pos, probe_seq = [], []
    wanted = set(range(n_layers)) if n_probe else set(capture[:1])

    started = time.perf_counter()
    batches = range(0, n_sequences, batch_size)
    group_of_batch = batch_groups(len(batches), n_groups)
    group_rows, group_grams = [], {}
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=n_sequences, desc=f"extract {name}", unit="seq")
    for start in batches:
        batch = torch.from_numpy(tokens[start:start + batch_size].astype(np.int64)).to(device)
        with layer_io(layers, wanted) as seen:
            model.model(input_ids=batch, use_cache=False, causalpos_recorder=recorder)  # no LM head: no logits
        if capture:
            batch_grams = _intermediates_of_batch(layers, capture[0], seen, recorder, name)
            batch_grams["c"] = recorder.av_gram[capture[0]]
            for stage, gram in batch_grams.items():
                group_grams[stage] = group_grams.get(stage, 0) + gram
        index = start // batch_size
        if index + 1 == len(batches) or group_of_batch[index + 1] != group_of_batch[index]:
            group_rows.append(_close_group(recorder, group_grams, int(group_of_batch[index]), capture[:1]))
            group_grams = {}
        take = min(len(batch), n_probe - start) if start < n_probe else 0
        for b in range(take):
            pos = positions if positions is not None else np.sort(rng.choice(seq_len, probe_positions, replace=False))
            probe_pos.append(pos)
            probe_seq.append(np.full(len(pos), start + b))
            index = torch.from_numpy(pos).to(device)
            for layer in range(n_layers + 1):
                state = seen[("in", layer)] if layer < n_layers else seen[("out", n_layers - 1)]
                probe_rows[layer].append(state[b].index_select(0, index).float().cpu().numpy())
        if bar is not None:
            bar.update(len(batch))
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - started

    mean, sem = recorder.mean_and_sem()
    scores = score_frame(mean, sem, name, kind, recorder.n_sequences)
    intermediates = pd.DataFrame(columns=INTERMEDIATE_COLUMNS)
    if capture:
        l = capture[0]
        # the groups' float64 sums add up to the whole: (a), (c)-(h); (b) and (i) are the scores' means
        matrices = {stage: sum(stages[stage] for *_, stages in group_rows) / n_sequences
                    for stage in group_rows[0][3] if stage not in "bi"}
        matrices["b"], matrices["i"] = mean[l], mean[l + 1]
        intermediates = intermediate_frame(matrices, l, name, n_sequences)
    probe = pd.DataFrame(columns=PROBE_COLUMNS)
    if n_probe:
        pos, seq = np.concatenate(probe_pos), np.concatenate(probe_seq)
        probe = pd.DataFrame([{"model": name, "kind": kind, "layer": layer, "seq_len": seq_len,
                               **fit_position_probe(np.concatenate(rows), pos, seq)}
                              for layer, rows in probe_rows.items()], columns=PROBE_COLUMNS)
    groups = group_frame(group_rows, name, kind, seq_len, capture[0] if capture else None)
    return Extraction(scores, intermediates, probe, seconds, groups)


def batch_groups(n_batches: int, n_groups: int) -> np.ndarray:
    """Group of each batch: min(n_groups, n_batches) contiguous runs of batches, sizes within one batch."""
    if n_groups < 1:
        raise ExtractionError(f"extraction.bootstrap_groups must be at least 1, got {n_groups}")
    return np.arange(n_batches) * min(n_groups, n_batches) // max(n_batches, 1)


def _close_group(recorder: ScoreRecorder, grams: dict, group: int, capture: tuple) -> tuple:
    """(group, n, score sums [layers, S, S], {stage: sums [S, S]}) of the group just finished."""
    n, sums = recorder.take_group()
    stages = {}
    if capture:
        layer = capture[0]
        stages = {stage: gram.cpu().numpy() for stage, gram in grams.items()}
        stages["b"], stages["i"] = sums[layer], sums[layer + 1]
    return group, n, sums, stages


def group_frame(rows: list, name: str, kind: str, seq_len: int, intermediates_layer: int | None = None) -> pd.DataFrame:
    """The per-group sums as one row per (quantity, stage, layer, group), lower triangle in a float32 list.

    `sums` holds sum over the group's sequences of the quantity at (query q, key k <= q), row-major:
    position q (q + 1) / 2 + k, the order of np.nonzero(np.tril(ones)). Scores: quantity "scores",
    stage "", the attention layer. Figure 3's stages: quantity "intermediate", the stage letter and
    the intermediates layer l (as in intermediates.parquet, except that (h), (i) keep l here too).
    """
    query, key = np.nonzero(np.tril(np.ones((seq_len, seq_len), dtype=bool)))
    records = []
    for group, n, sums, stages in rows:
        for layer, matrix in enumerate(sums):
            records.append(("scores", "", layer, group, n, matrix[query, key].astype(np.float32)))
        for stage in sorted(stages):
            records.append(("intermediate", stage, intermediates_layer, group, n,
                            stages[stage][query, key].astype(np.float32)))
    frame = pd.DataFrame(records, columns=["quantity", "stage", "layer", "group", "n_sequences", "sums"])
    frame.insert(0, "model", name)
    frame.insert(1, "kind", kind)
    frame["seq_len"] = seq_len
    return frame[GROUP_COLUMNS]


def score_frame(mean: np.ndarray, sem: np.ndarray, name: str, kind: str, n_sequences: int) -> pd.DataFrame:
    """Long table of the lower triangle (diagonal included) of every layer's [query, key] scores."""
    n_layers, seq_len, _ = mean.shape
    visible = np.tril(np.ones((seq_len, seq_len), dtype=bool))
    query, key = np.nonzero(visible)
    diagnorm = diagonal_normalise(mean, visible)
    rows = n_layers * len(query)
    frame = pd.DataFrame({
        "model": np.full(rows, name, dtype=object), "kind": np.full(rows, kind, dtype=object),
        "layer": np.repeat(np.arange(n_layers, dtype=np.int32), len(query)),
        "query_pos": np.tile(query.astype(np.int32), n_layers), "key_pos": np.tile(key.astype(np.int32), n_layers),
        "score_mean": mean[:, query, key].ravel(), "score_sem": sem[:, query, key].ravel(),
        "score_diagnorm": diagnorm[:, query, key].ravel(),
        "n_sequences": np.full(rows, n_sequences, dtype=np.int32), "seq_len": np.full(rows, seq_len, dtype=np.int32),
    }, columns=SCORE_COLUMNS, copy=False)  # the columns are fresh arrays: no second copy of 15M rows at S = 1024
    return frame


def intermediate_frame(matrices: dict, layer: int, name: str, n_sequences: int) -> pd.DataFrame:
    seq_len = next(iter(matrices.values())).shape[0]
    query, key = np.nonzero(np.tril(np.ones((seq_len, seq_len), dtype=bool)))
    frames = [pd.DataFrame({"model": name, "layer": layer + (stage in "hi"), "stage": stage, "query_pos": query,
                            "key_pos": key, "value": matrices[stage][query, key], "n_sequences": n_sequences,
                            "seq_len": seq_len})
              for stage in sorted(matrices)]
    return pd.concat(frames, ignore_index=True)[INTERMEDIATE_COLUMNS]


def mean_probabilities_eager(model, tokens: np.ndarray, batch_size: int = 8) -> np.ndarray:
    """The straightforward way: eager attention with output_attentions=True, averaged over sequences
    and heads, [layers, S, S]. An independent computation for the tests and bench/bench_extract.py."""
    total = None
    for start in range(0, len(tokens), batch_size):
        batch = torch.from_numpy(np.asarray(tokens[start:start + batch_size], dtype=np.int64))
        # the decoder without its LM head: no logits, only what the comparison needs
        out = model.model(input_ids=batch.to(next(model.parameters()).device), output_attentions=True,
                          use_cache=False)
        stacked = torch.stack([a.double().mean(dim=1).sum(dim=0) for a in out.attentions])
        total = stacked if total is None else total + stacked
    return (total / len(tokens)).cpu().numpy()
