"""The pattern ablation's intervention (issue 27): a model's attention with a bias subtracted from its logits.

`ablating_attention` is registered in transformers' AttentionInterface under ABLATION_ATTENTION (with
transformers' SDPA mask builder, so a sliding-window layer keeps its window). A model loaded with it calls it
in every layer with the queries and keys as the model uses them. Given `causalpos_bias` ([layers, S, S], what
causalpos.models.pattern_ablation defines) it subtracts bias[layer] from the scaled logits q.k * scaling of every head
at every pair the layer's mask lets through, by handing SDPA a float mask (-bias where visible, -inf where
not): softmax(q k^T scaling - B + mask) V, nothing else changed. Given `causalpos_recorder` (a
models.recorder.ScoreRecorder) it also adds the layer's head-averaged logits before the bias to the
recorder's sums: how the mean maps are estimated, with no bias. Without either it is transformers' SDPA.

`ablate` estimates the maps on one set of sequences and measures the per-sequence loss of another set under
every condition; `ablate_trained` and `ablate_pretrained` choose the sequences (held-out blocks of our
trained models at every length factor; documents in a pretrained model's own tokenizer) and make the table.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from causalpos.models.errors import ExtractionError
from causalpos.models.model_files import checked_again_on_failure, verify_model_folder
from causalpos.models.progress import Progress
from causalpos.models.recorder import ScoreRecorder
from causalpos.models.blocks import Blocks, to_tokens
from causalpos.models.pattern_ablation import (
    CONDITIONS,
    PRETRAINED_SEED,
    ablation_rows,
    bias_rms,
    condition_biases,
    square,
)

log = logging.getLogger("causalpos")
ABLATION_ATTENTION = "causalpos_ablation"


def ablating_attention(
    module,
    query,
    key,
    value,
    attention_mask,
    scaling=None,
    dropout=0.0,
    causalpos_recorder: ScoreRecorder | None = None,
    causalpos_bias: torch.Tensor | None = None,
    **kwargs,
):
    """transformers attention function: SDPA with `causalpos_bias[layer]` subtracted from the logits."""
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if kwargs.get("softcap") is not None:  # capping acts on the logits: a bias before or after it differs
        raise ExtractionError(
            f"{type(module).__name__} caps its attention logits (softcap = {kwargs['softcap']}); "
            f"the ablation subtracts from uncapped logits only"
        )
    if causalpos_recorder is not None:
        causalpos_recorder.record_scores(module.layer_idx, query, key, scale, attention_mask)
    if causalpos_bias is not None:
        attention_mask = biased_mask(causalpos_bias[module.layer_idx], attention_mask, query.shape[2], query.dtype)
    output, _ = ALL_ATTENTION_FUNCTIONS["sdpa"](
        module, query, key, value, attention_mask, dropout=dropout, scaling=scale, **kwargs
    )
    return output, None


def biased_mask(bias: torch.Tensor, attention_mask: torch.Tensor | None, seq_len: int, dtype) -> torch.Tensor:
    """The float mask SDPA adds to the logits: -bias where the layer's mask lets a pair through, -inf elsewhere.
    `attention_mask` as transformers hands it (None: plain causal; bool: True = visible; float: additive)."""
    if bias.shape[-1] != seq_len:
        raise ExtractionError(f"a bias for {bias.shape[-1]} positions on {seq_len} positions")
    if attention_mask is None:
        visible = torch.ones(seq_len, seq_len, dtype=torch.bool, device=bias.device).tril()
    elif attention_mask.dtype == torch.bool:
        visible = attention_mask
    else:
        visible = attention_mask > torch.finfo(attention_mask.dtype).min / 2
    return torch.where(visible, -bias.to(dtype), torch.tensor(float("-inf"), dtype=dtype, device=bias.device))


AttentionInterface.register(ABLATION_ATTENTION, ablating_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(ABLATION_ATTENTION, sdpa_mask)  # windowed masks, as the recorder's


def _autocast(device: torch.device):
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


@torch.no_grad()
def mean_score_maps(
    model, tokens: np.ndarray, batch_size: int, device: torch.device, progress: Progress | None = None
) -> np.ndarray:
    """Every layer's mean head-averaged logits over `tokens` [n, S], packed [layers, pairs], NaN where a layer
    hides a pair (the model unmodified). `progress` counts the tokens put through."""
    recorder = ScoreRecorder(model.config.num_hidden_layers, tokens.shape[1], device)
    for start in range(0, len(tokens), batch_size):
        batch = tokens[start : start + batch_size]
        with _autocast(device):
            # no LM head: its logits are never read (Gemma-3's 262k-word head is most of its forward)
            model.model(input_ids=to_tokens(batch, device), causalpos_recorder=recorder, use_cache=False)
        if progress is not None:
            progress.update(batch.size)
    mean, _ = recorder.mean_and_sem()
    return mean


@torch.no_grad()
def sequence_losses(
    model,
    tokens: np.ndarray,
    bias: torch.Tensor | None,
    batch_size: int,
    device: torch.device,
    progress: Progress | None = None,
) -> np.ndarray:
    """Each sequence's mean next-token loss, float64 [n], with `bias` [layers, S, S] subtracted (None: none).
    `progress` counts the tokens put through."""
    per_sequence = []
    for start in range(0, len(tokens), batch_size):
        batch = to_tokens(tokens[start : start + batch_size], device)
        with _autocast(device):
            logits = model(input_ids=batch, causalpos_bias=bias, use_cache=False).logits
        # a sequence at a time: logits[row, :-1] is a view, and cross_entropy's log-softmax is one sequence's
        # (the batch's at once took ~3 copies of 1 GB for Gemma-3's 262k words at 4 x 256 tokens)
        for row in range(len(batch)):
            losses = F.cross_entropy(logits[row, :-1].float(), batch[row, 1:], reduction="none")
            per_sequence.append(losses.double().mean().reshape(1).cpu())
        del logits
        if progress is not None:
            progress.update(batch.numel())
    return torch.cat(per_sequence).numpy()


def ablate(
    model,
    estimate: np.ndarray,
    evaluate: np.ndarray,
    batch_size: int,
    device: torch.device,
    seed: int,
    conditions=CONDITIONS,
    progress: Progress | None = None,
) -> tuple[dict, dict]:
    """({condition: per-sequence losses of `evaluate`}, {condition: bias RMS}), the biases from the mean maps
    of `estimate` (sequences of the same length). `progress` counts the tokens put through (ablated_tokens)."""
    if estimate.shape[1] != evaluate.shape[1]:
        raise ValueError(
            f"estimation sequences of {estimate.shape[1]} tokens for evaluation ones of "
            f"{evaluate.shape[1]}: the maps are estimated at the evaluation length"
        )
    mean = mean_score_maps(model, estimate, batch_size, device, progress)
    biases = condition_biases(mean, seed)
    losses, sizes = {}, {}
    for condition in conditions:
        bias = biases[condition]
        tensor = None if condition == "none" else torch.from_numpy(square(bias.astype(np.float32))).to(device)
        losses[condition] = sequence_losses(model, evaluate, tensor, batch_size, device, progress)
        sizes[condition] = bias_rms(bias, mean, keys_from=0 if condition == "pattern_sink" else 1)
    return losses, sizes


def ablated_tokens(evaluation_tokens: int, conditions=CONDITIONS) -> int:
    """Tokens the evaluation puts through: every evaluation token once per condition."""
    return evaluation_tokens * len(conditions)


def split_heldout(n_blocks: int, factors: list[int], max_sequences: int, n_estimate: int) -> tuple[int, int]:
    """(evaluation blocks, estimation blocks) of a held-out split of `n_blocks`: the estimation sequences come
    from its end (n_estimate x the largest factor blocks), the evaluation from its start (up to max_sequences
    x the largest factor, a whole number of the longest sequences), as rule length_eval's when there is room."""
    longest = max(factors)
    estimate = n_estimate * longest
    evaluate = min(max_sequences * longest, (n_blocks - estimate) // longest * longest)
    if evaluate < longest:
        raise ValueError(
            f"{n_blocks} held-out blocks: evaluation.ablation_sequences = {n_estimate} sequences of "
            f"{longest} blocks for the maps leave none of the longest length to evaluate on; lower "
            f"evaluation.ablation_sequences or evaluation.length_factors"
        )
    return evaluate, estimate


def ablate_trained(
    model_dir,
    blocks_dir,
    factors,
    max_sequences: int,
    n_estimate: int,
    seed: int,
    batch_size: int = 8,
    device: torch.device | None = None,
    model_name: str | None = None,
    training_seed: int = 0,
    progress_terminal: bool | None = None,
) -> pd.DataFrame:
    """The ablation table of one trained model at every length factor (pattern_ablation.ABLATION_COLUMNS).
    Progress: a bar on a terminal, log lines every 5% of the tokens otherwise (`progress_terminal` forces
    one or the other)."""
    from transformers import AutoModelForCausalLM

    device = device or torch.device("cpu")
    blocks = Blocks(blocks_dir)
    factors = sorted({int(f) for f in factors} | {1})  # factor 1: the gaps' reference
    n_eval, n_est = split_heldout(len(blocks.heldout), factors, max_sequences, n_estimate)
    verify_model_folder(model_dir)  # a damaged file: DamagedFileError naming it, not safetensors' error
    with checked_again_on_failure(model_dir):
        model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=ABLATION_ATTENTION).to(device)
    model.eval()
    longest = factors[-1] * blocks.block_len
    if longest > model.config.max_position_embeddings:
        raise ValueError(
            f"factor {factors[-1]} needs sequences of {longest} tokens, beyond max_position_embeddings "
            f"= {model.config.max_position_embeddings} of {model_dir} (training.model.context)"
        )
    heldout = np.asarray(blocks.heldout)
    name = model_name or Path(model_dir).name
    # every factor puts its n_estimate estimation sequences through once and the evaluation tokens once per condition
    total = sum(
        n_estimate * factor * blocks.block_len + ablated_tokens(n_eval * blocks.block_len) for factor in factors
    )
    progress = Progress(total, 0, f"pattern ablation {name}", progress_terminal, unit="tokens")
    losses, sizes, seq_lens = {}, {}, {}
    for factor in factors:
        length = factor * blocks.block_len
        evaluate = heldout[:n_eval].reshape(-1, length)
        estimate = heldout[len(heldout) - n_est :][: n_estimate * factor].reshape(-1, length)
        per_condition, rms = ablate(model, estimate, evaluate, batch_size, device, seed, progress=progress)
        for condition in per_condition:
            losses[(factor, condition)], sizes[(factor, condition)] = per_condition[condition], rms[condition]
        seq_lens[factor] = length
        log.info(
            "pattern ablation %s x%d: %s",
            model_dir,
            factor,
            ", ".join(f"{c} {np.mean(v):.4f}" for c, v in per_condition.items()),
        )
    progress.close()
    return ablation_rows(losses, sizes, seq_lens, name, "trained", training_seed, n_estimate)


def ablate_pretrained(
    model, tokens: np.ndarray, name: str, n_estimate: int, seed: int, batch_size: int, device: torch.device
) -> pd.DataFrame:
    """The ablation table of a pretrained model at its sequences' length: the first `n_estimate` of `tokens`
    [n, S] estimate the maps, the rest are evaluated (factor 1 only: no gaps)."""
    if not 0 < n_estimate < len(tokens) - 1:
        raise ValueError(f"{len(tokens)} sequences cannot give {n_estimate} for the maps and >= 2 to evaluate")
    evaluate = tokens[n_estimate:]
    total = tokens[:n_estimate].size + ablated_tokens(evaluate.size)
    progress = Progress(total, 0, f"pattern ablation {name}", unit="tokens")
    losses, sizes = ablate(model, tokens[:n_estimate], evaluate, batch_size, device, seed, progress=progress)
    progress.close()
    return ablation_rows(
        {(1, c): v for c, v in losses.items()},
        {(1, c): v for c, v in sizes.items()},
        {1: tokens.shape[1]},
        name,
        "pretrained",
        PRETRAINED_SEED,
        n_estimate,
    )
