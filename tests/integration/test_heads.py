"""Per-head maps (extraction.per_head): each query head's mean scores, their summary per head, the figure, the API.

Tiny random models built from their own transformers config classes (Llama with grouped-query attention, 6
query heads on 2 key heads; Gemma-3 with 4 on 2, a sliding window, q/k norms and its own scaling), loaded with
the recording attention, against transformers' eager attention: each head's pre-softmax logits, caught on the
way into its softmax (helpers.eager_softmax_inputs), averaged over the sequences, must be the recorded head
map, and the head maps' mean over the heads the head average of scores.parquet (another code path of the
recorder). A recorder that reads the wrong key head fails that comparison. analysis.heads on a one-head model
gives its layer's numbers of the summary and of claim 8d; a killed extraction resumes to the same head maps;
with per_head off the table has no rows and the results API names the setting; the shared tiny run has the
rule's table, figure and benchmark.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

from causalpos import results
from causalpos.analysis import heads as head_analysis
from causalpos.analysis.summary import nonrelativeness
from causalpos.models import extract as extraction
from causalpos.models.extract import ATTENTION_NAME, extract, extract_to_files
from causalpos.models.recorder import ScoreRecorder
from causalpos.catalogue.tables import ACTIVATION_TABLES, HEAD_SCORE_COLUMNS
from causalpos.catalogue import paths
from helpers import eager_softmax_inputs

SEQ, VOCAB, N, WINDOW = 14, 97, 7, 5
GEMMA_LAYERS = ["sliding_attention", "full_attention"]


def gemma_config(heads: int, kv_heads: int) -> Gemma3TextConfig:
    return Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=16,
        query_pre_attn_scalar=24,
        sliding_window=WINDOW,
        layer_types=GEMMA_LAYERS,
        max_position_embeddings=64,
        initializer_range=0.2,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    )


def llama_config(heads: int, kv_heads: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=8 * heads,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=64,
        initializer_range=0.2,
        tie_word_embeddings=False,
    )


# name -> (model class, config); the first two grouped-query, the last two one head
ARCHITECTURES = {
    "llama_gqa": (LlamaForCausalLM, lambda: llama_config(6, 2)),
    "gemma3_gqa": (Gemma3ForCausalLM, lambda: gemma_config(4, 2)),
    "llama_one_head": (LlamaForCausalLM, lambda: llama_config(1, 1)),
    "gemma3_one_head": (Gemma3ForCausalLM, lambda: gemma_config(1, 1)),
}


def save(name: str, folder) -> str:
    model_class, config = ARCHITECTURES[name]
    torch.manual_seed(5)
    model = model_class(config())
    with torch.no_grad():  # norm weights that matter (Gemma's start at 0, a scale of 1; Llama's at 1)
        for parameter_name, parameter in model.named_parameters():
            if "norm" in parameter_name:
                parameter.normal_(1.0 if model_class is LlamaForCausalLM else 0.0, 0.5)
    model.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> folder of every architecture, saved once."""
    return {name: save(name, tmp_path_factory.mktemp(name)) for name in ARCHITECTURES}


def load(folder, attention=ATTENTION_NAME):
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention, dtype=torch.float32).eval()


def tokens(n=N, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(n, SEQ))


def run(folder, ids=None, **settings):
    """extract() with per-head maps, no intermediates and no probe, 3 groups."""
    settings = {
        "batch_size": 3,
        "intermediates_layer": None,
        "probe_sequences": 0,
        "n_groups": 3,
        "per_head": True,
        **settings,
    }
    return extract(load(folder), tokens() if ids is None else ids, "tiny", "pretrained", **settings)


def head_maps(table: pd.DataFrame) -> np.ndarray:
    """head_scores rows as [layer, head, query, key]; inf where there is no row (NaN: a row without a score)."""
    lead = table["layer"].max() + 1, table["head"].max() + 1
    maps = np.full((*lead, SEQ, SEQ), np.inf)
    maps[table["layer"], table["head"], table["query_pos"], table["key_pos"]] = table["score_mean"]
    return maps


def score_map(table: pd.DataFrame, layer: int) -> np.ndarray:
    rows = table[table["layer"] == layer]
    matrix = np.full((SEQ, SEQ), np.inf)
    matrix[rows["query_pos"], rows["key_pos"]] = rows["score_mean"]
    return matrix


LOWER = np.tril(np.ones((SEQ, SEQ), dtype=bool))


def head_errors(maps: np.ndarray, logits: list) -> list[float]:
    """Per layer, the largest difference between the recorded head maps and eager's mean logits over the pairs
    the layer's mask shows (eager puts a very negative number at the pairs it hides)."""
    errors = []
    for layer, caught in enumerate(logits):
        seen = LOWER & (caught > -1e30).all(dim=(0, 1)).numpy()
        errors.append(float(np.abs(maps[layer][:, seen] - caught.mean(dim=0).numpy()[:, seen]).max()))
    return errors


# ---------------------------------------------------------------- (a), (b): the recorded maps


@pytest.mark.parametrize("name", ["llama_gqa", "gemma3_gqa"])
def test_head_maps_are_each_heads_eager_logits_and_average_to_the_head_average(saved, name, monkeypatch):
    ids = tokens()
    logits = eager_softmax_inputs(load(saved[name], "eager"), ids, monkeypatch)  # [sequences, heads, S, S]
    result = run(saved[name], ids)
    table = result.head_scores
    assert list(table.columns) == HEAD_SCORE_COLUMNS
    assert set(table["n_sequences"]) == {N} and set(table["seq_len"]) == {SEQ} and set(table["kind"]) == {"pretrained"}
    maps = head_maps(table)
    heads = logits[0].shape[1]
    assert maps.shape == (len(logits), heads, SEQ, SEQ)
    assert np.isinf(maps[..., ~LOWER]).all() and np.isfinite(maps[..., LOWER]).sum() > 0  # no row above the diagonal
    assert max(head_errors(maps, logits)) < 1e-5
    for layer, caught in enumerate(logits):
        seen = LOWER & (caught > -1e30).all(dim=(0, 1)).numpy()
        assert np.isnan(maps[layer][:, LOWER & ~seen]).all()  # the window's hidden pairs: a row, no score
        # another code path: the recorder's head average (query heads summed within their key head's group)
        average = score_map(result.scores, layer)
        np.testing.assert_allclose(maps[layer].mean(axis=0)[seen], average[seen], rtol=1e-6, atol=1e-6)
        # teeth: every two heads differ (by far more than the tolerance), so a head read with the wrong key
        # head, or two heads swapped, cannot pass
        mean = caught.mean(dim=0).numpy()[:, seen]
        gaps = [np.abs(mean[a] - mean[b]).max() for a in range(heads) for b in range(a + 1, heads)]
        assert min(gaps) > 0.05
    if name == "gemma3_gqa":  # the sliding layer hides keys WINDOW or more back, the full one none
        assert np.isnan(maps[0][:, SEQ - 1, 0]).all() and np.isfinite(maps[1][:, SEQ - 1, 0]).all()


def test_a_recorder_that_reads_the_wrong_key_head_fails_the_comparison(saved, monkeypatch):
    """The planted mistake: each query head given the other group's key head (the key heads reversed)."""
    ids = tokens()
    logits = eager_softmax_inputs(load(saved["llama_gqa"], "eager"), ids, monkeypatch)
    right = ScoreRecorder._record_heads

    def wrong(self, layer, query, key, scaling):
        right(self, layer, query, key.flip(1), scaling)

    monkeypatch.setattr(ScoreRecorder, "_record_heads", wrong)
    result = run(saved["llama_gqa"], ids)
    assert min(head_errors(head_maps(result.head_scores), logits)) > 0.05
    # the head average's path is untouched by the per-head one
    for layer, caught in enumerate(logits):
        np.testing.assert_allclose(
            score_map(result.scores, layer)[LOWER], caught.mean(dim=(0, 1)).numpy()[LOWER], rtol=1e-5, atol=1e-5
        )


def test_the_head_average_is_the_same_with_and_without_per_head(saved):
    """Per-head recording adds work beside the head average and changes none of its numbers (bit for bit)."""
    ids = tokens()
    on, off = run(saved["gemma3_gqa"], ids), run(saved["gemma3_gqa"], ids, per_head=False)
    pd.testing.assert_frame_equal(on.scores, off.scores, check_exact=True)
    pd.testing.assert_frame_equal(on.groups, off.groups, check_exact=True)
    assert len(off.head_scores) == 0 and list(off.head_scores.columns) == HEAD_SCORE_COLUMNS


# ---------------------------------------------------------------- (c): the summary per head


@pytest.mark.parametrize("name", ["llama_one_head", "gemma3_one_head"])
def test_a_one_head_models_head_metrics_are_its_layers(saved, name):
    """analysis.heads on the one head = the summary's index_no_sink (square-rooted) and claim 8d's value, layer
    by layer (Gemma's sliding layer: over the pairs its window shows)."""
    from causalpos.catalogue.claims import merge_thresholds
    from causalpos.analysis.claims.model_claims import claim8
    from causalpos.analysis.claims.replicates import LedgerInputs

    result = run(saved[name], tokens(12, seed=1), n_groups=4)
    frame = head_analysis.heads_frame(result.head_scores)
    assert list(frame.columns) == head_analysis.HEADS_COLUMNS
    assert set(frame["head"]) == {0} and len(frame) == 2 * 2  # two layers, two metrics
    by_metric = {metric: rows.set_index("layer")["value"] for metric, rows in frame.groupby("metric")}
    summary = nonrelativeness(result.scores).set_index("layer")
    np.testing.assert_allclose(by_metric["nonrelative_amplitude"], np.sqrt(summary["index_no_sink"]), rtol=1e-5)
    ledger = pd.DataFrame(
        claim8(LedgerInputs(None, None, result.scores, None, result.groups, 20, 0), merge_thresholds(None))
    )
    emphasis = ledger[ledger["claim_id"] == "8d"].set_index("layer")["value"]
    np.testing.assert_allclose(by_metric["first_keys_emphasis"], emphasis.sort_index(), rtol=1e-5, atol=1e-7)
    assert (by_metric["nonrelative_amplitude"] > 0.05).all() and (by_metric["first_keys_emphasis"].abs() > 1e-4).all()
    assert set(frame["seq_len"]) == {SEQ} and set(frame["n_sequences"]) == {12}


def test_heads_of_a_layer_are_measured_each_on_its_own(saved):
    """Each head's numbers are those of its map alone: a layer's heads as one-head tables, measured apart."""
    table = run(saved["gemma3_gqa"]).head_scores
    together = head_analysis.heads_frame(table)
    apart = pd.concat(
        [head_analysis.heads_frame(rows.assign(head=0)).assign(head=head) for head, rows in table.groupby("head")],
        ignore_index=True,
    )
    keys = ["model", "layer", "head", "metric"]
    both = together.merge(apart, on=keys, suffixes=("", "_apart"), validate="one_to_one")
    assert len(both) == len(together) == 2 * 4 * 2
    np.testing.assert_allclose(both["value"], both["value_apart"], rtol=1e-12)
    assert together.groupby(["metric", "layer"])["value"].nunique().min() == 4  # heads differ


# ---------------------------------------------------------------- (d), (e): files, the setting, a restart


def files(folder, model="tiny"):
    return {table: paths.activation_table(model, table, str(folder)) for table in ACTIVATION_TABLES}


def test_per_head_off_writes_an_empty_table_that_the_api_and_the_summary_name(saved, tmp_path):
    from causalpos.figures.render import render_figure
    from causalpos.workflow.job import Job, run_job

    res = tmp_path / "results"
    extract_to_files(
        load(saved["llama_gqa"]),
        tokens(),
        "tiny",
        "pretrained",
        files(res),
        batch_size=3,
        intermediates_layer=None,
        probe_sequences=0,
        n_groups=2,
    )  # per_head off: the default
    empty = pd.read_parquet(files(res)["head_scores"])
    assert len(empty) == 0 and list(empty.columns) == HEAD_SCORE_COLUMNS + ["table"]
    with pytest.raises(ValueError, match=r"extraction\.per_head: false.*snakemake --cores 2 .*head_scores\.parquet"):
        results.scores("tiny", str(res), per_head=True)
    assert results.scores("tiny", str(res)).shape == (2, SEQ, SEQ)  # the head average is there
    output = tmp_path / "heads.parquet"
    run_job(Job("heads", input={"head_scores": [str(files(res)["head_scores"])]}, output={"table": str(output)}))
    frame = pd.read_parquet(output)
    assert len(frame) == 0 and list(frame.columns) == head_analysis.HEADS_COLUMNS
    figure = tmp_path / "figH1_heads.png"
    render_figure("figH1_heads", {"heads": frame}, {"formats": ["png"], "dpi": 40}, [figure])
    assert figure.stat().st_size > 1000
    with pytest.raises(ValueError, match="head_scores"):
        extract_to_files(
            load(saved["llama_gqa"]),
            tokens(),
            "tiny",
            "pretrained",
            {t: p for t, p in files(tmp_path / "other").items() if t != "head_scores"},
            per_head=True,
        )


def test_head_maps_through_the_results_api_the_summary_runner_and_the_figure(saved, tmp_path):
    res = tmp_path / "results"
    model = load(saved["llama_gqa"])
    extract_to_files(
        model,
        tokens(),
        "tiny",
        "pretrained",
        files(res),
        batch_size=3,
        intermediates_layer=None,
        probe_sequences=0,
        n_groups=2,
        per_head=True,
    )
    maps = results.scores("tiny", str(res), per_head=True)
    assert maps.shape == (2, 6, SEQ, SEQ) and np.isnan(maps[..., ~LOWER]).all()
    np.testing.assert_allclose(maps.mean(axis=1)[:, LOWER], results.scores("tiny", str(res))[:, LOWER], atol=1e-6)
    from causalpos.figures.render import render_figure
    from causalpos.workflow.job import Job, run_job

    output = tmp_path / "heads.parquet"
    run_job(Job("heads", input={"head_scores": [str(files(res)["head_scores"])]}, output={"table": str(output)}))
    frame = pd.read_parquet(output)
    pd.testing.assert_frame_equal(
        frame, head_analysis.heads_frame(pd.read_parquet(files(res)["head_scores"])), check_dtype=False
    )
    assert len(frame) == 2 * 6 * 2 and frame["value"].notna().all()
    figure = tmp_path / "figH1_heads.png"
    render_figure("figH1_heads", {"heads": frame}, {"formats": ["png"], "dpi": 40}, [figure])
    assert figure.stat().st_size > 5000


class Killed(RuntimeError):
    pass


def test_a_killed_extraction_resumes_to_the_same_head_maps(saved, tmp_path, monkeypatch):
    """9 sequences in batches of 2 (5 batches, 3 groups: batches 0-1, 2-3, 4); killed in batch 3, after batch 2
    added its sums, it restarts at batch 2 from the state saved after group 0 and writes the head maps of an
    uninterrupted run, bit for bit."""
    model, ids = load(saved["gemma3_gqa"]), tokens(9)
    settings = dict(batch_size=2, intermediates_layer=None, probe_sequences=0, n_groups=3, per_head=True)
    extract_to_files(model, ids, "tiny", "pretrained", files(tmp_path / "whole"), **settings)
    run_batch = extraction.ExtractionRun.run_batch

    def dying(self):
        if self.next_batch == 3:
            raise Killed
        return run_batch(self)

    monkeypatch.setattr(extraction.ExtractionRun, "run_batch", dying)
    state = tmp_path / "state"
    with pytest.raises(Killed):
        extract_to_files(
            model, ids, "tiny", "pretrained", files(tmp_path / "resumed"), state_dir=state, code="v1", **settings
        )
    saved_state = torch.load(state / "state.pt", weights_only=False)
    assert saved_state["head_total"].shape == (2, 4, SEQ * (SEQ + 1) // 2) and saved_state["next_batch"] == 2
    assert saved_state["n_sequences"] == 4
    ran = []
    monkeypatch.setattr(
        extraction.ExtractionRun, "run_batch", lambda self: ran.append(self.next_batch) or run_batch(self)
    )
    extract_to_files(
        model, ids, "tiny", "pretrained", files(tmp_path / "resumed"), state_dir=state, code="v1", **settings
    )
    assert ran == [2, 3, 4] and not state.exists()
    for table in ("head_scores", "scores"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(files(tmp_path / "resumed")[table]),
            pd.read_parquet(files(tmp_path / "whole")[table]),
            check_exact=True,
        )


# ---------------------------------------------------------------- (f): the workflow
