"""Activation extraction: the recorded scores against independent computations, and the guards.

Tiny SmolLM3 decoders (NoPE and RoPE, grouped-query attention) with random
weights, saved and loaded back the way the workflow loads trained models.
"""

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM

from causalpos.models.extract import ATTENTION_NAME, ExtractionError, ScoreRecorder, extract
from causalpos.models.model import build_model
from causalpos.models.probe import PENALTIES, StreamingProbe
from helpers import ProbabilityRecorder, mean_probabilities_eager

TINY = {
    "n_layers": 3,
    "hidden_size": 64,
    "n_heads": 4,
    "n_kv_heads": 2,
    "head_dim": 16,
    "intermediate_size": 96,
    "context": 64,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
}
VOCAB = 97


@pytest.fixture(scope="module", params=["nope", "rope"])
def saved(request, tmp_path_factory):
    torch.manual_seed(1)
    folder = tmp_path_factory.mktemp(request.param)
    build_model(TINY, VOCAB, rope=request.param == "rope").save_pretrained(folder)
    return request.param, folder


def load(folder, attention=ATTENTION_NAME):
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention).eval()


def tokens(n=12, seq=20, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(n, seq))


def test_recording_attention_leaves_the_model_output_unchanged(saved):
    _, folder = saved
    batch = torch.from_numpy(tokens(4, 16))
    with torch.no_grad():
        ours = load(folder)(input_ids=batch, causalpos_recorder=ScoreRecorder(3, 16, torch.device("cpu"))).logits
        sdpa = load(folder, "sdpa")(input_ids=batch).logits
    torch.testing.assert_close(ours, sdpa, rtol=1e-5, atol=1e-5)


def test_layer0_scores_equal_a_hand_computation_of_nope(saved):
    """NoPE layer 0: q = W_q LN(E x), k = W_k LN(E x), GQA repeats k; score = q.k / sqrt(d), head mean."""
    name, folder = saved
    if name != "nope":
        pytest.skip("the hand computation has no rotation")
    model = load(folder)
    ids = tokens()
    result = extract(model, ids, "nope", "trained", batch_size=5, intermediates_layer=None, probe_sequences=0)
    attn = model.model.layers[0].self_attn
    with torch.no_grad():
        y = model.model.layers[0].input_layernorm(model.model.embed_tokens(torch.from_numpy(ids)))
        q = (
            attn.q_norm(attn.q_proj(y).view(12, 20, 4, 16))
            if hasattr(attn, "q_norm")
            else attn.q_proj(y).view(12, 20, 4, 16)
        )
        k = attn.k_proj(y).view(12, 20, 2, 16).repeat_interleave(2, dim=2)
        expected = torch.einsum("bqhd,bkhd->bhqk", q, k).mean(dim=(0, 1)).numpy() / 4.0
    layer0 = result.scores[result.scores["layer"] == 0]
    got = np.full((20, 20), np.nan)
    got[layer0["query_pos"], layer0["key_pos"]] = layer0["score_mean"]
    lower = np.tril(np.ones((20, 20), dtype=bool))
    np.testing.assert_allclose(got[lower], expected[lower], rtol=1e-5, atol=1e-6)


def test_recorded_probabilities_equal_eager_output_attentions(saved):
    """Every layer: softmax of the recorded scores (masked) = transformers' eager probabilities."""
    _, folder = saved
    ids = tokens(10, 18)
    recorder = ProbabilityRecorder(3, 18, torch.device("cpu"))
    with torch.no_grad():
        for start in range(0, 10, 4):
            load_once = saved_model_cache(folder)
            load_once(input_ids=torch.from_numpy(ids[start : start + 4]), causalpos_recorder=recorder)
        eager = mean_probabilities_eager(load(folder, "eager"), ids, batch_size=3)
    np.testing.assert_allclose((recorder.prob_total / recorder.n_sequences).numpy(), eager, atol=1e-6)


_CACHE = {}


def saved_model_cache(folder):
    if folder not in _CACHE:
        _CACHE[folder] = load(folder)
    return _CACHE[folder]


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_a_constant_score_has_a_standard_error_of_zero_and_a_large_mean_does_not_cancel_its_spread(device):
    """Issue 41's audit: Gemma's pair (0, 0), the same in every sequence, read SEMs of 5.7e-5 to 3.0e-4 from
    E[x^2] - mean^2 in float32. Here, in batches of uneven size, queries and keys on a grid of 1/64 so every
    float32 score is exact (near 1,000, in steps of 1/128): the first position's query and key are the same in
    every sequence, the others' queries vary by a few 1/64. The recorder's standard errors against float64 numpy
    on the same scores: only the accumulation can differ. On CUDA too where there is one (bench/README.md)."""
    generator = torch.Generator().manual_seed(0)
    heads, seq, dim, sizes = 2, 4, 8, [3, 1, 5, 4]
    base_q = (
        torch.randint(8, 16, (heads, seq, dim), generator=generator)
        + torch.randint(0, 64, (heads, seq, dim), generator=generator) / 64
    )
    base_k = torch.randint(8, 16, (heads, seq, dim), generator=generator).float()
    recorder = ScoreRecorder(1, seq, torch.device(device))
    every = []
    for size in sizes:
        q = base_q.expand(size, -1, -1, -1).clone()
        k = base_k.expand(size, -1, -1, -1).clone()
        q[:, :, 1:] += torch.randint(-4, 5, (size, heads, seq - 1, dim), generator=generator) / 64
        recorder.record_scores(0, q.to(device), k.to(device), scaling=1.0)
        every.append((q.double() @ k.double().transpose(-1, -2)).mean(dim=1))  # [size, seq, seq], head mean
    scores = torch.cat(every).numpy()[:, *np.tril_indices(seq)]  # [sequences, packed pairs]
    mean, sem = recorder.mean_and_sem()
    assert scores[:, 0].min() > 500 and np.ptp(scores[:, 0]) == 0 and scores[0, 0] % 1 != 0
    assert sem[0, 0] == 0.0
    expected = scores.std(axis=0, ddof=1) / np.sqrt(len(scores))
    assert expected[1:].min() > 1e-3
    np.testing.assert_allclose(sem[0, 1:], expected[1:], rtol=1e-9)
    np.testing.assert_allclose(mean[0], scores.mean(axis=0), rtol=1e-12)


def test_scores_table_standard_errors_and_diagonal_normalisation(saved):
    name, folder = saved
    ids = tokens(16, 12)
    result = extract(load(folder), ids, name, "trained", batch_size=5, intermediates_layer=0, probe_sequences=0)
    scores = result.scores
    assert (scores["key_pos"] <= scores["query_pos"]).all()
    assert len(scores) == 3 * 12 * 13 // 2 and set(scores["n_sequences"]) == {16}
    # batch size does not change the numbers
    again = extract(load(folder), ids, name, "trained", batch_size=16, intermediates_layer=0, probe_sequences=0)
    np.testing.assert_allclose(again.scores["score_mean"], scores["score_mean"], rtol=1e-5, atol=1e-6)
    # the standard error is that of the per-sequence head means, checked against one-sequence runs
    singles = [
        extract(load(folder), ids[i : i + 1], name, "trained", intermediates_layer=None, probe_sequences=0)
        .scores["score_mean"]
        .to_numpy()
        for i in range(16)
    ]
    np.testing.assert_allclose(scores["score_sem"], np.std(singles, axis=0, ddof=1) / 4, rtol=1e-4, atol=1e-7)
    # each diagonal of the normalised scores has mean zero
    for _, band in scores.assign(offset=scores.query_pos - scores.key_pos).groupby(["layer", "offset"]):
        assert abs(band["score_diagnorm"].mean()) < 1e-9


def test_intermediates_cover_nine_stages_and_b_i_are_the_scores(saved):
    name, folder = saved
    result = extract(load(folder), tokens(), name, "trained", batch_size=5, intermediates_layer=1, probe_sequences=0)
    inter = result.intermediates
    assert sorted(inter["stage"].unique()) == list("abcdefghi")
    assert set(inter.loc[inter.stage.isin(list("abcdefg")), "layer"]) == {1}
    assert set(inter.loc[inter.stage.isin(["h", "i"]), "layer"]) == {2}
    for stage, layer in (("b", 1), ("i", 2)):
        scores = result.scores[result.scores.layer == layer]["score_mean"].to_numpy()
        np.testing.assert_allclose(inter[inter.stage == stage]["value"].to_numpy(), scores)
    # Gram matrices of normalised rows: (a) and (f) diagonals are the mean squared norms, positive
    for stage in "adefgh":
        diag = inter[(inter.stage == stage) & (inter.query_pos == inter.key_pos)]["value"]
        assert (diag > 0).all()


def test_group_sums_are_the_sums_of_separate_runs_on_each_group(saved):
    """groups: contiguous runs of whole batches; each group's sums equal n x the means of a run on its sequences alone."""
    name, folder = saved
    ids = tokens(17, 12)
    result = extract(
        load(folder), ids, name, "trained", batch_size=3, intermediates_layer=0, probe_sequences=0, n_groups=4
    )
    groups = result.groups
    assert sorted(groups["group"].unique()) == [0, 1, 2, 3]
    scores = groups[groups.quantity == "scores"]
    inter = groups[groups.quantity == "intermediate"]
    assert sorted(inter["stage"].unique()) == list("abcdefghi") and set(inter["layer"]) == {0}
    sizes = scores.groupby("group")["n_sequences"].first()
    assert sizes.sum() == 17 and (sizes % 3 == 0).sum() >= 3  # whole batches of 3 (the last batch has 2)
    start = 0
    for group, n in sizes.items():
        alone = extract(
            load(folder),
            ids[start : start + n],
            name,
            "trained",
            batch_size=3,
            intermediates_layer=0,
            probe_sequences=0,
        )
        start += n
        for layer in range(3):
            sums = scores[(scores.group == group) & (scores.layer == layer)]["sums"].iloc[0]
            want = alone.scores[alone.scores.layer == layer]["score_mean"].to_numpy()
            np.testing.assert_allclose(np.asarray(sums) / n, want, rtol=1e-5, atol=1e-6)
        for stage in "acfi":
            sums = inter[(inter.group == group) & (inter.stage == stage)]["sums"].iloc[0]
            want = alone.intermediates[alone.intermediates.stage == stage]["value"].to_numpy()
            np.testing.assert_allclose(np.asarray(sums) / n, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # all groups together: the scores table
    total = np.sum(np.stack(scores[scores.layer == 1]["sums"].to_list()), axis=0) / 17
    np.testing.assert_allclose(total, result.scores[result.scores.layer == 1]["score_mean"], rtol=1e-5, atol=1e-6)
    # fewer batches than groups: one group per batch; no groups at all is refused
    few = extract(load(folder), ids[:6], name, "trained", batch_size=3, intermediates_layer=None, probe_sequences=0)
    assert sorted(few.groups["group"].unique()) == [0, 1]
    with pytest.raises(ExtractionError, match="bootstrap_groups"):
        extract(load(folder), ids[:6], name, "trained", probe_sequences=0, n_groups=0)


def test_a_layer_that_is_not_prenorm_fails_loudly(saved):
    """A layer whose output is not FFN(LN(O)) + O (here: rescaled by a forward hook) is refused."""
    name, folder = saved
    model = load(folder)
    model.model.layers[0].register_forward_hook(lambda module, args, output: output * 1.5)
    with pytest.raises(ExtractionError, match="differs from the model's own output"):
        extract(model, tokens(4, 10), name, "trained", intermediates_layer=0, probe_sequences=0)


def test_bad_requests_name_the_setting(saved):
    name, folder = saved
    model = load(folder)
    with pytest.raises(ExtractionError, match="exceeds model .* context"):
        extract(model, tokens(2, 80), name, "trained", probe_sequences=0)
    with pytest.raises(ExtractionError, match="extraction.intermediates_layer = 2 is out of range"):
        extract(model, tokens(2, 10), name, "trained", intermediates_layer=2, probe_sequences=0)
    with pytest.raises(ExtractionError, match="attn_implementation"):
        extract(load(folder, "sdpa"), tokens(2, 10), name, "trained", probe_sequences=0)


def fit_position_probe(features: np.ndarray, positions: np.ndarray, sequence: np.ndarray, penalties=PENALTIES) -> dict:
    """The streaming probe on rows in memory: `features` [rows, features], their `positions` and `sequence` ids."""
    ids = np.unique(sequence)
    probe = StreamingProbe(1, features.shape[1], len(ids), penalties)
    for index, sequence_id in enumerate(ids):
        rows = sequence == sequence_id
        probe.add_sequence(index, [features[rows]], positions[rows])
    return probe.results()[0]


def test_position_probe_finds_position_when_it_is_there():
    rng = np.random.default_rng(0)
    seq, pos = np.repeat(np.arange(40), 20), np.tile(np.arange(20), 40)
    informative = np.c_[pos + rng.normal(0, 0.5, len(pos)), rng.normal(size=(len(pos), 7))]
    blind = rng.normal(size=(len(pos), 8))
    good, bad = fit_position_probe(informative, pos, seq), fit_position_probe(blind, pos, seq)
    assert good["mae"] < 0.2 * good["mae_baseline"]
    assert bad["mae"] > 0.8 * bad["mae_baseline"]


def test_probe_runs_on_every_hidden_state(saved):
    name, folder = saved
    result = extract(
        load(folder), tokens(20, 16), name, "trained", batch_size=8, intermediates_layer=None, probe_sequences=20
    )
    assert list(result.probe["layer"]) == [0, 1, 2, 3]
    assert (result.probe["mae_baseline"] > 0).all()
    assert isinstance(result.probe, pd.DataFrame)


def test_a_model_without_llama_layers_is_refused():
    from transformers import GPT2Config, GPT2LMHeadModel

    from causalpos.models.decoder import layer_modules

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(ExtractionError, match="model 'gpt2' \\(GPT2LMHeadModel\\) has no decoder layers"):
        layer_modules(gpt2, "gpt2")


def test_failed_extraction_leaves_no_table(saved, tmp_path):
    """Snippets longer than the model's context: the stage stops before writing anything."""
    from causalpos.workflow.job import Job, run_job

    name, folder = saved
    np.save(tmp_path / "snippets.npy", tokens(4, 80))
    outputs = {t: tmp_path / "out" / f"{t}.parquet" for t in ("scores", "intermediates", "probe", "groups")}
    settings = {
        "kind": "trained",
        "batch_size": 2,
        "intermediates_layer": 0,
        "probe_sequences": 0,
        "probe_positions": 8,
        "bootstrap_groups": 4,
    }
    with pytest.raises(ExtractionError, match="sequence length 80 exceeds"):
        run_job(
            Job(
                "extract",
                input={"tokens": str(tmp_path / "snippets.npy")},
                output={t: str(path) for t, path in outputs.items()},
                wildcards={"model": name},
                params={"settings": settings, "location": str(folder), "device": "cpu", "seed": 0, "state": None},
            )
        )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
