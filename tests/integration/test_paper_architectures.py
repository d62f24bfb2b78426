"""The paper's three LLMs (Section 5.2), their architectures checked offline: Llama-3.1-8B, Phi-4, Qwen3-8B.

Their weights cannot be had here, so each architecture is built from its own transformers config class with
random weights, tiny (hidden 32-64, 2-3 layers) but with what the real model has: grouped-query attention
in all three, Llama-3.1's "llama3" RoPE scaling (given as its Hub config.json gives it, rope_theta and
rope_scaling; the original context made small so that the scaling changes the frequencies at the tested
length), Qwen3's q/k norms (random weights) and a head_dim that is not hidden / heads, Phi-3's (Phi-4's) fused
qkv_proj and gate_up_proj. Each is saved, loaded as the pipeline loads a pretrained model
(`load_for_extraction`, the recording attention) and put through `extract`, whose mean scores must be the
pre-softmax logits of transformers' own eager attention (caught on their way into its softmax), averaged over
heads and sequences, and whose probabilities (softmax of the recorded logits) must be eager's
`output_attentions`. The shapes of the real models are bench/shapes/{llama3.1_8b,phi4,qwen3_8b}.json.
"""

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from causalpos.models.extract import ATTENTION_NAME, ScoreRecorder, extract
from causalpos.models.pretrained import load_for_extraction
from helpers import ProbabilityRecorder, eager_softmax_inputs, mean_probabilities_eager

SEQ, VOCAB, N = 16, 97, 8
ORIGINAL_CONTEXT = 64  # Llama-3.1's original_max_position_embeddings (8192), scaled down with the model
LLAMA31_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": ORIGINAL_CONTEXT,
}

# (config class, model class, settings): the real models' features at a tiny width and depth
ARCHITECTURES = {
    "llama3.1": (
        LlamaConfig,
        LlamaForCausalLM,
        dict(
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            rope_theta=500000.0,
            rope_scaling=LLAMA31_SCALING,
            max_position_embeddings=8 * ORIGINAL_CONTEXT,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
        ),
    ),
    "qwen3": (
        Qwen3Config,
        Qwen3ForCausalLM,
        dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rope_theta=1000000.0,
            max_position_embeddings=256,
            rms_norm_eps=1e-6,
            use_sliding_window=False,
            tie_word_embeddings=False,
        ),
    ),
    "phi3": (
        Phi3Config,
        Phi3ForCausalLM,
        dict(  # Phi-4 is a Phi3ForCausalLM
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            rope_theta=250000.0,
            max_position_embeddings=256,
            original_max_position_embeddings=256,
            rms_norm_eps=1e-5,
            sliding_window=None,
            pad_token_id=None,
            bos_token_id=1,
            eos_token_id=2,
            tie_word_embeddings=False,
        ),
    ),
}


@pytest.fixture(scope="module", params=list(ARCHITECTURES))
def built(request, tmp_path_factory):
    """(architecture, folder) of a saved tiny random model."""
    config_class, model_class, settings = ARCHITECTURES[request.param]
    torch.manual_seed(7)
    # weights 10x the usual initialisation's: logits of order 1, in which RoPE, its scaling and the norms show
    model = model_class(config_class(vocab_size=VOCAB, initializer_range=0.2, **settings))
    with torch.no_grad():  # RMSNorm weights start at 1: give them (Qwen3's q/k norms among them) weights that matter
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(1.0, 0.5)
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder)
    return request.param, folder


def pipeline_model(folder):
    """The model as the pipeline loads it for extraction (fp32 on a CPU, the recording attention)."""
    model, _ = load_for_extraction(str(folder), "test", torch.device("cpu"), ATTENTION_NAME, with_tokenizer=False)
    return model


def eager_model(folder, attention="eager"):
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention, dtype=torch.float32).eval()


def tokens(n=N, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(n, SEQ))


def eager_logits(folder, ids, monkeypatch) -> list:
    return eager_softmax_inputs(eager_model(folder), ids, monkeypatch)


def table_matrix(scores, layer, column="score_mean"):
    rows = scores[scores.layer == layer]
    matrix = np.full((SEQ, SEQ), np.inf)  # inf: no row
    matrix[rows.query_pos, rows.key_pos] = rows[column]
    return matrix


def test_the_tiny_model_has_the_real_models_features(built):
    architecture, folder = built
    model = pipeline_model(folder)
    config, layers = model.config, model.model.layers
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    assert config.num_key_value_heads < config.num_attention_heads  # grouped-query attention
    for layer in layers:
        attention = layer.self_attn
        if architecture == "phi3":
            assert not any(hasattr(attention, p) for p in ("q_proj", "k_proj", "v_proj"))
            heads = config.num_attention_heads + 2 * config.num_key_value_heads
            assert attention.qkv_proj.out_features == heads * head_dim  # fused q, k, v
            assert (
                not hasattr(layer.mlp, "gate_proj")
                and layer.mlp.gate_up_proj.out_features == 2 * config.intermediate_size
            )
        else:
            assert attention.k_proj.out_features == config.num_key_value_heads * head_dim
    if architecture == "qwen3":
        assert head_dim == 16 != config.hidden_size // config.num_attention_heads
        for layer in layers:
            for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm):
                assert norm.weight.shape == (head_dim,) and norm.weight.std() > 0.1  # loaded, not the ones of init
    if architecture == "llama3.1":
        assert config.rope_parameters["rope_type"] == "llama3" and config.rope_parameters["factor"] == 8.0
        inv_freq = model.model.rotary_emb.inv_freq.double()
        default = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        wavelength = 2 * np.pi / default
        short, long = wavelength < ORIGINAL_CONTEXT / 4, wavelength > ORIGINAL_CONTEXT
        assert short.any() and long.any() and (~short & ~long).any()  # all three of llama3's bands
        torch.testing.assert_close(inv_freq[short], default[short], rtol=1e-6, atol=0)
        torch.testing.assert_close(inv_freq[long], default[long] / 8, rtol=1e-6, atol=0)
        # the scaling moves the rotation angles within the tested length by far more than a rounding error
        assert ((default - inv_freq) * (SEQ - 1)).abs().max() > 1.0


def test_recording_leaves_the_output_unchanged_and_sees_the_grouped_keys(built):
    _, folder = built
    ids = torch.from_numpy(tokens(3))
    shapes = []

    class ShapeRecorder(ScoreRecorder):
        def record_scores(self, layer, query, key, scaling, attention_mask=None):
            shapes.append((query.shape[1], key.shape[1]))
            super().record_scores(layer, query, key, scaling, attention_mask)

    model = pipeline_model(folder)
    with torch.no_grad():
        ours = model(
            input_ids=ids, causalpos_recorder=ShapeRecorder(len(model.model.layers), SEQ, torch.device("cpu"))
        ).logits
        eager = eager_model(folder)(input_ids=ids).logits
        sdpa = eager_model(folder, "sdpa")(input_ids=ids).logits
    torch.testing.assert_close(ours, sdpa, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours, eager, rtol=1e-4, atol=1e-4)
    config = model.config
    assert shapes == [(config.num_attention_heads, config.num_key_value_heads)] * config.num_hidden_layers


def test_scores_are_eager_attentions_own_logits(built, monkeypatch):
    _, folder = built
    ids = tokens()
    logits = eager_logits(folder, ids, monkeypatch)
    # the paper config's settings: intermediates of layer 0 and 1 (their layout check runs on every batch)
    result = extract(
        pipeline_model(folder),
        ids,
        "tiny",
        "pretrained",
        batch_size=3,
        intermediates_layer=0,
        probe_sequences=0,
        n_groups=2,
    )
    lower = np.tril(np.ones((SEQ, SEQ), dtype=bool))
    assert sorted(result.scores.layer.unique()) == list(range(len(logits)))
    for layer, caught in enumerate(logits):
        assert (caught[:, :, lower] > -1e30).all()  # no pair of the causal triangle is hidden
        head_means = caught.mean(dim=1).numpy()  # [sequences, S, S]
        mean, sem = table_matrix(result.scores, layer), table_matrix(result.scores, layer, "score_sem")
        assert np.isinf(mean[~lower]).all()  # no row above the diagonal
        np.testing.assert_allclose(mean[lower], head_means.mean(0)[lower], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(sem[lower], (head_means.std(0, ddof=1) / np.sqrt(N))[lower], rtol=1e-4, atol=1e-7)
        assert head_means[:, lower].std() > 0.1  # logits that differ from pair to pair: a test with teeth
    assert set(result.intermediates.stage) >= {"a", "b", "c", "d", "e", "f", "g", "h", "i"}


def test_recorded_probabilities_equal_eager_output_attentions(built):
    _, folder = built
    ids = tokens(7, seed=1)
    model = pipeline_model(folder)
    recorder = ProbabilityRecorder(len(model.model.layers), SEQ, torch.device("cpu"))
    with torch.no_grad():
        for start in range(0, 7, 3):
            model.model(input_ids=torch.from_numpy(ids[start : start + 3]), causalpos_recorder=recorder)
        eager = mean_probabilities_eager(eager_model(folder), ids, batch_size=2)
    np.testing.assert_allclose((recorder.prob_total / recorder.n_sequences).numpy(), eager, atol=1e-6)
