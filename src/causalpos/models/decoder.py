"""The decoder layers the extractor understands, the hooks that read them, and Figure 3's intermediates.

Figure 3 follows a pre-norm layer (Llama, SmolLM2/3, Qwen): O = AV W_O + X,
X' = FFN(LN(O)) + O. Gemma 2/3 normalise each branch again before it joins the
residual stream ("sandwich" norms): O = LN_attn(AV W_O) + X, X' = LN_ffn(FFN(LN(O))) + O.
The stages keep their roles in both: (a) Y = LN(X), the attention's input;
(d) what the attention adds to the residual stream (AV W_O, or LN_attn(AV W_O));
(e) O = (d) + X; (f) the FFN's normalised input LN(O); (g) X', the layer's output;
(h) LN(X') of layer l + 1. (b), (c) and (i) come from the attention function.
Each is recomputed from the layer's input X and attention output AV with the
layer's own modules, and the recomputed X' must equal the model's own output of
the layer, checked on every batch: a layout that is not what it seems stops the run.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from causalpos.models.errors import ExtractionError


@dataclass(frozen=True)
class Layout:
    """Names of a decoder layer's norms around its two branches (None: no such norm)."""

    name: str
    attention_out: str | None  # applied to AV W_O before it joins the residual stream
    ffn_in: str  # applied to O before the FFN
    ffn_out: str | None  # applied to the FFN's output before it joins the residual stream


PRE_NORM = Layout("pre-norm", None, "post_attention_layernorm", None)
SANDWICH = Layout("sandwich", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")


def layout_of(layer) -> Layout:
    return (
        SANDWICH
        if hasattr(layer, "pre_feedforward_layernorm") and hasattr(layer, "post_feedforward_layernorm")
        else PRE_NORM
    )


def layer_modules(model, name: str):
    """The model's decoder layers, checked to be a layout the extractor understands (pre-norm or sandwich)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    needed = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
    if layers is None or len(layers) == 0 or not all(all(hasattr(layer, a) for a in needed) for layer in layers):
        raise ExtractionError(
            f"model {name!r} ({type(model).__name__}) has no decoder layers the extractor "
            f"understands (model.model.layers with {', '.join(needed)})"
        )
    if not all(hasattr(layer.self_attn, "o_proj") and hasattr(layer.self_attn, "layer_idx") for layer in layers):
        raise ExtractionError(f"model {name!r}: its attention modules lack o_proj / layer_idx")
    return layers


@contextmanager
def layer_io(layers, keep: set, probe_index: torch.Tensor | None):
    """Forward hooks (PyTorch's public API) that fill the yielded dict:

    ("in", l), ("out", l): the whole input and output of every layer l in `keep`;
    ("probe", l): every layer's input, and as l = len(layers) the last layer's output, at the
    positions `probe_index` [sequences, positions] of the batch's first sequences (float32).
    Only those rows are kept, so the probe costs no memory of the size of the batch.
    """
    seen = {}

    def rows(state):
        index = probe_index[..., None].expand(-1, -1, state.shape[-1])
        return state[: len(probe_index)].gather(1, index).float()

    def keep_input(index):
        def hook(module, args, kwargs):
            state = args[0] if args else kwargs["hidden_states"]
            if index in keep:
                seen[("in", index)] = state
            if probe_index is not None:
                seen[("probe", index)] = rows(state)

        return hook

    def keep_output(index):
        def hook(module, args, kwargs, output):
            state = output[0] if isinstance(output, tuple) else output
            if index in keep:
                seen[("out", index)] = state
            if probe_index is not None and index == len(layers) - 1:
                seen[("probe", len(layers))] = rows(state)

        return hook

    handles = []
    wanted = set(range(len(layers))) if probe_index is not None else set(keep)
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


def intermediates_of_batch(
    layers, layer: int, x: torch.Tensor, av: torch.Tensor, model_output: torch.Tensor, name: str
) -> dict:
    """Stages (a), (d)-(h) of this batch as Gram sums [S, S], recomputed with the layer's own modules one
    sequence at a time (the FFN's hidden activations of a whole batch would cost more than the rest)."""
    sums = {}
    for index in range(len(x)):
        one = slice(index, index + 1)
        for stage, gram in _intermediates_of_sequence(layers, layer, x[one], av[one], model_output[one], name).items():
            sums[stage] = sums[stage] + gram if stage in sums else gram
    return sums


def _intermediates_of_sequence(layers, layer, x, av, model_output, name) -> dict:
    block, following = layers[layer], layers[layer + 1]
    layout = layout_of(block)
    norm = lambda which, value: value if which is None else getattr(block, which)(value)
    y = block.input_layernorm(x)
    added = norm(layout.attention_out, block.self_attn.o_proj(av))
    o = added + x
    ln_o = getattr(block, layout.ffn_in)(o)
    x_next = norm(layout.ffn_out, block.mlp(ln_o)) + o
    _check_recomputed(x_next, model_output, layer, layout, name)
    return {
        "a": gram_sum(y),
        "d": gram_sum(added),
        "e": gram_sum(o),
        "f": gram_sum(ln_o),
        "g": gram_sum(x_next),
        "h": gram_sum(following.input_layernorm(x_next)),
    }


def _check_recomputed(x_next, model_output, layer: int, layout: Layout, name: str) -> None:
    """The check the paper's analysis rests on: X' recomputed from these pieces is the model's own X'."""
    tolerance = 1e-3 if x_next.dtype == torch.float32 else 3e-2
    scale = model_output.float().abs().max().item() or 1.0
    error = (x_next.float() - model_output.float()).abs().max().item()
    if not error <= tolerance * scale:
        formula = (
            "FFN(LN(AV W_O + X)) + AV W_O + X" if layout is PRE_NORM else "LN(FFN(LN(O))) + O with O = LN(AV W_O) + X"
        )
        raise ExtractionError(
            f"model {name!r}, layer {layer}: X' recomputed as {formula} differs from the "
            f"model's own output of the layer by {error:.3g} (scale {scale:.3g}); its decoder "
            f"layer is not the {layout.name} layout the intermediates assume"
        )
