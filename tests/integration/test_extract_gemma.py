"""Extraction from a Gemma-3 decoder: q/k norm, query_pre_attn_scalar, sliding windows, two RoPE bases, sandwich norms.

A tiny random Gemma3 (3 layers: sliding, full, sliding; window 4; RoPE bases 1e4 local
and 1e6 global) on sequences of 12 tokens, against transformers' own eager attention:
its pre-softmax logits (the input of its softmax, caught on the way) and its
output_attentions. The real Gemma-3-270M is checked once at the end when
CAUSALPOS_SLOW=1 (it converts the embedded GGUF: minutes on a small CPU).
"""

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig

from causalpos.models.extract import ATTENTION_NAME, ScoreRecorder, extract
from helpers import ProbabilityRecorder, eager_softmax_inputs, mean_probabilities_eager

WINDOW, SEQ, VOCAB = 4, 12, 97
LAYER_TYPES = ["sliding_attention", "full_attention", "sliding_attention"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    config = Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=24,
        sliding_window=WINDOW,
        layer_types=LAYER_TYPES,
        max_position_embeddings=64,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    )
    torch.manual_seed(3)
    model = Gemma3ForCausalLM(config)
    with torch.no_grad():  # Gemma's norms start at weight 0 (a scale of 1): give them weights that matter
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(0.0, 0.5)
    path = tmp_path_factory.mktemp("gemma3")
    model.save_pretrained(path)
    return path


def load(folder, attention=ATTENTION_NAME):
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention, dtype=torch.float32).eval()


def tokens(n=10, seq=SEQ, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(n, seq))


def eager_logits(folder, ids, monkeypatch) -> list:
    return eager_softmax_inputs(load(folder, "eager"), ids, monkeypatch)


def table_matrix(scores, layer, column="score_mean"):
    rows = scores[scores.layer == layer]
    matrix = np.full((SEQ, SEQ), np.inf)  # inf: no row at all
    matrix[rows.query_pos, rows.key_pos] = rows[column]
    return matrix


def test_the_tiny_model_has_what_gemma_has(folder):
    model = load(folder)
    attention = model.model.layers[0].self_attn
    assert hasattr(attention, "q_norm") and hasattr(attention, "k_norm")
    assert attention.scaling == 24**-0.5 != 16**-0.5
    assert [layer.self_attn.sliding_window for layer in model.model.layers] == [WINDOW, None, WINDOW]
    thetas = {kind: p["rope_theta"] for kind, p in model.config.rope_parameters.items()}
    assert thetas == {"sliding_attention": 1e4, "full_attention": 1e6}


def test_recording_leaves_the_output_of_a_sliding_window_model_unchanged(folder):
    """The windowed masks reach the recording attention (a custom attention gets no mask by default)."""
    ids = torch.from_numpy(tokens(3))
    with torch.no_grad():
        ours = load(folder)(input_ids=ids, causalpos_recorder=ScoreRecorder(3, SEQ, torch.device("cpu"))).logits
        eager = load(folder, "eager")(input_ids=ids).logits
        sdpa = load(folder, "sdpa")(input_ids=ids).logits
    torch.testing.assert_close(ours, sdpa, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours, eager, rtol=1e-4, atol=1e-4)


def test_scores_are_eager_attentions_own_logits_and_nan_where_the_window_hides_them(folder, monkeypatch):
    ids = tokens(10)
    logits = eager_logits(folder, ids, monkeypatch)
    result = extract(
        load(folder), ids, "gemma", "pretrained", batch_size=4, intermediates_layer=None, probe_sequences=0, n_groups=3
    )
    lower = np.tril(np.ones((SEQ, SEQ), dtype=bool))
    for layer, caught in enumerate(logits):
        hidden = lower & (caught[0, 0].numpy() < -1e30)  # what eager's mask hides in the causal triangle
        offset = np.subtract.outer(np.arange(SEQ), np.arange(SEQ))
        assert (
            (hidden == (lower & (offset >= WINDOW))).all()
            if LAYER_TYPES[layer] == "sliding_attention"
            else not hidden.any()
        )
        head_means = caught.mean(dim=1).numpy()  # [sequences, S, S]
        mean, sem = table_matrix(result.scores, layer), table_matrix(result.scores, layer, "score_sem")
        shown = lower & ~hidden
        np.testing.assert_allclose(mean[shown], head_means.mean(0)[shown], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(sem[shown], (head_means.std(0, ddof=1) / np.sqrt(10))[shown], rtol=1e-4, atol=1e-7)
        assert np.isnan(mean[hidden]).all() and np.isnan(sem[hidden]).all()
        assert np.isnan(table_matrix(result.scores, layer, "score_diagnorm")[hidden]).all()
        sums = result.groups[(result.groups.quantity == "scores") & (result.groups.layer == layer)]["sums"]
        packed_hidden = hidden[np.nonzero(lower)]
        for group_sums in sums:
            assert np.isnan(group_sums[packed_hidden]).all() and not np.isnan(group_sums[~packed_hidden]).any()


def test_diagonal_normalisation_skips_the_pairs_the_window_hides(folder):
    result = extract(
        load(folder), tokens(6), "gemma", "pretrained", batch_size=3, intermediates_layer=None, probe_sequences=0
    )
    scores = result.scores.assign(offset=result.scores.query_pos - result.scores.key_pos)
    for (layer, offset), band in scores.groupby(["layer", "offset"]):
        if LAYER_TYPES[layer] == "sliding_attention" and offset >= WINDOW:
            assert band.score_mean.isna().all() and band.score_diagnorm.isna().all()
        else:
            expected = band.score_mean - band.score_mean.mean()
            np.testing.assert_allclose(band.score_diagnorm, expected, atol=1e-12)


def test_recorded_probabilities_equal_eager_output_attentions(folder):
    ids = tokens(7)
    recorder = ProbabilityRecorder(3, SEQ, torch.device("cpu"))
    model = load(folder)
    with torch.no_grad():
        for start in range(0, 7, 3):
            model.model(input_ids=torch.from_numpy(ids[start : start + 3]), causalpos_recorder=recorder)
        eager = mean_probabilities_eager(load(folder, "eager"), ids, batch_size=2)
    np.testing.assert_allclose((recorder.prob_total / recorder.n_sequences).numpy(), eager, atol=1e-6)


def test_intermediates_follow_gemmas_sandwich_norms(folder):
    """(g) is the model's own output of the layer and (h) the next layer's input norm of it, from
    output_hidden_states; (e) - (d) Grams rebuild the input's: Gram(O - added) = Gram(X)."""
    ids = tokens(8)
    model = load(folder)
    result = extract(model, ids, "gemma", "pretrained", batch_size=3, intermediates_layer=1, probe_sequences=0)
    with torch.no_grad():
        states = model.model(input_ids=torch.from_numpy(ids), output_hidden_states=True).hidden_states
        after = states[2]  # output of layer 1
        gram = lambda x: torch.einsum("bqh,bkh->qk", x.double(), x.double()).numpy() / len(ids)
        expected = {
            "g": gram(after),
            "h": gram(model.model.layers[2].input_layernorm(after)),
            "a": gram(model.model.layers[1].input_layernorm(states[1])),
        }
    inter = result.intermediates
    lower = np.tril(np.ones((SEQ, SEQ), dtype=bool))
    for stage, matrix in expected.items():
        got = inter[inter.stage == stage].sort_values(["query_pos", "key_pos"])["value"].to_numpy()
        np.testing.assert_allclose(got, matrix[lower], rtol=1e-4, atol=1e-4 * np.abs(matrix).max())
    assert set(inter.loc[inter.stage == "b", "value"].isna()) == {False}  # layer 1 is global: no hidden pair
    assert inter.loc[inter.stage == "i", "value"].isna().sum() == sum(range(1, SEQ - WINDOW + 1))


@pytest.mark.skipif(os.environ.get("CAUSALPOS_SLOW") != "1", reason="set CAUSALPOS_SLOW=1: converts Gemma-3-270M")
def test_real_gemma3_270m_scores_equal_eager_logits(tmp_path_factory, monkeypatch):
    """The embedded Gemma-3-270M: layers 0 (local), 5 (global), 6 (local), window 512. Its conversion by the
    workflow (results/pretrained/gemma3_270m) if there is one, else converted here from its chunks."""
    from causalpos.models.pretrained import convert_gguf

    folder = Path(__file__).resolve().parents[2] / "results" / "pretrained" / "gemma3_270m"
    if not (folder / "model.safetensors").exists():
        folder = tmp_path_factory.mktemp("gemma3_270m") / "model"
        convert_gguf({"gguf": "gemma3-270m"}, folder, "test")
    model = load(folder, "eager")
    ids = np.random.default_rng(0).integers(0, 1000, size=(1, 600))  # past the window of 512
    caught = []
    softmax = torch.nn.functional.softmax
    monkeypatch.setattr(
        torch.nn.functional, "softmax", lambda x, *a, **k: caught.append(x.double()) or softmax(x, *a, **k)
    )
    with torch.no_grad():
        model.model(input_ids=torch.from_numpy(ids), use_cache=False)
    monkeypatch.undo()
    result = extract(
        load(folder), ids, "gemma3_270m", "pretrained", batch_size=1, intermediates_layer=0, probe_sequences=0
    )
    lower = np.tril(np.ones((600, 600), dtype=bool))
    for layer in (0, 5, 6):
        rows = result.scores[result.scores.layer == layer]
        got = np.full((600, 600), np.inf)
        got[rows.query_pos, rows.key_pos] = rows.score_mean
        logits = caught[layer][0].mean(dim=0).numpy()
        shown = lower & (caught[layer][0, 0].numpy() > -1e30)
        assert (lower & ~shown).sum() == (0 if layer == 5 else sum(range(1, 600 - 512 + 1)))
        np.testing.assert_allclose(got[shown], logits[shown], rtol=1e-4, atol=1e-4)
        assert np.isnan(got[lower & ~shown]).all()
