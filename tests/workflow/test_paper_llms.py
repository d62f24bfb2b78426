"""Section 5.2 at the paper's size (issue 13, parts 2 and 3): the pretrained models' sequences, the convergence
of claim 8 with the number of sequences, and target paper_llms's plan and its run on the tiny config (in a copy
of the session's finished run, tests/conftest.py).
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from causalpos.analysis.claims.convergence import (
    FLIP_NOTE,
    convergence_frame,
    group_levels,
    note_flips,
    verdict_changes,
)
from causalpos.analysis.claims.ledger import build_ledger
from causalpos.corpus.sequences import TooFewSequences, llm_sequences, sequence_counts
from causalpos.corpus.tokens import train_bpe
from causalpos.tril import packed_pairs
from causalpos.catalogue import paths
from causalpos.workflow.config import load_config
from causalpos.workflow.settings import paper_llms_settings, pretrained_models
from helpers import ROOT, assert_convergence_is_the_ledger, copy_workflow, snakemake

# ---------------------------------------------------------------- the sequences


@pytest.fixture(scope="module")
def corpus():
    """Documents of two sources and both splits, long and short, and a byte-level tokenizer trained on them."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    rows = []
    for source, n_docs in (("news", 30), ("plays", 40)):
        for i in range(n_docs):
            length = int(rng.integers(20, 200))
            rows.append(
                (
                    f"{source}:{i:03d}",
                    source,
                    "heldout" if i % 3 == 0 else "train",
                    " ".join(rng.choice(words, size=length)),
                )
            )
    documents = pd.DataFrame(rows, columns=["doc_id", "source", "split", "text"])
    return documents, train_bpe(documents["text"], vocab_size=300)


def test_sequences_are_distinct_full_length_windows_of_held_out_documents_first(corpus):
    documents, tokenizer = corpus
    from causalpos.corpus.tokens import encode_texts

    tokens, table = llm_sequences(documents, tokenizer, 64, 30, seed=1, splits=["heldout", "train"], prefix=[7])
    assert tokens.shape == (30, 64) and (tokens[:, 0] == 7).all()
    assert len({row.tobytes() for row in tokens}) == 30  # distinct
    texts = dict(zip(documents["doc_id"], documents["text"]))
    for row, doc_id in zip(tokens, table["doc_id"]):  # each the first 64 tokens of its document (prefix counted)
        assert row.tolist() == ([7] + encode_texts(tokenizer, [texts[doc_id]])[0])[:64]
    splits = dict(zip(documents["doc_id"], documents["split"]))
    assert table["split"].tolist() == [splits[d] for d in table["doc_id"]]
    held = documents[documents["split"] == "heldout"]
    long_enough = sum(len(ids) + 1 >= 64 for ids in encode_texts(tokenizer, held["text"].tolist()))
    assert 0 < long_enough < 30
    assert (table["split"] == "heldout").sum() == long_enough  # every held-out document before any train one
    assert table["doc_id"].tolist() != sorted(table["doc_id"])  # shuffled: the first groups are a random subset
    counts = sequence_counts(table)
    assert sum(c["n"] for c in counts) == 30 and {c["split"] for c in counts} == {"heldout", "train"}


def test_held_out_only_refuses_too_few_naming_the_settings(corpus):
    documents, tokenizer = corpus
    with pytest.raises(
        TooFewSequences,
        match=r"extraction.paper_llms.n_sequences = 30: the documents of "
        r"extraction.paper_llms.splits = \['heldout'\] give only \d+ distinct sequences of "
        r"extraction.paper_llms.seq_len = 64 tokens",
    ):
        llm_sequences(documents, tokenizer, 64, 30, splits=["heldout"], setting="extraction.paper_llms", strict=True)


def test_a_repeated_opening_counts_once(corpus):
    documents, tokenizer = corpus
    twin = documents.iloc[[0]].assign(doc_id="news:twin", text=documents["text"].iloc[0] + " w1 w2")
    doubled = pd.concat([documents, twin], ignore_index=True)
    tokens, table = llm_sequences(doubled, tokenizer, 16, 1000, splits=["heldout", "train"])
    assert len({row.tobytes() for row in tokens}) == len(tokens)
    assert not {"news:000", "news:twin"} <= set(table["doc_id"])


# ---------------------------------------------------------------- convergence


def llm_tables(n_groups=8, per_group=3, size=10, layers=3, seed=0):
    """Scores and groups tables of one pretrained model: per-sequence scores with a non-relative pattern of
    varying strength by layer, summed by group as the extraction does."""
    rng = np.random.default_rng(seed)
    q, k = packed_pairs(size)
    scores, groups = [], []
    for layer in range(layers):
        pattern = -0.3 * (q - k) + (0.05 + 0.3 * layer) * np.log1p(k)
        per_sequence = pattern + rng.normal(0, 1.0, size=(n_groups * per_group, q.size))
        for g in range(n_groups):
            block = per_sequence[g * per_group : (g + 1) * per_group]
            groups.append(
                {
                    "model": "llm",
                    "kind": "pretrained",
                    "quantity": "scores",
                    "stage": "",
                    "layer": layer,
                    "group": g,
                    "n_sequences": per_group,
                    "seq_len": size,
                    "sums": block.sum(axis=0).astype(np.float32),
                }
            )
        mean = per_sequence.mean(axis=0)
        sem = per_sequence.std(axis=0, ddof=1) / np.sqrt(len(per_sequence))
        scores.append(
            pd.DataFrame(
                {
                    "model": "llm",
                    "kind": "pretrained",
                    "layer": layer,
                    "query_pos": q,
                    "key_pos": k,
                    "score_mean": mean,
                    "score_sem": sem,
                    "n_sequences": len(per_sequence),
                    "seq_len": size,
                }
            )
        )
    return pd.concat(scores, ignore_index=True), pd.DataFrame(groups)


def claim8_rows(ledger: pd.DataFrame) -> pd.DataFrame:
    rows = ledger[ledger["claim"] == 8][["claim_id", "layer", "value", "uncertainty", "verdict"]]
    return rows.sort_values(["claim_id", "layer"], na_position="first").reset_index(drop=True)


def test_group_levels_halve_down_to_the_minimum():
    assert group_levels(16, 4) == [4, 8, 16]
    assert group_levels(10, 4) == [5, 10]
    assert group_levels(3, 4) == [3]
    assert group_levels(125, 4) == [4, 8, 16, 32, 63, 125]


def test_convergence_at_all_groups_is_the_ledger(tmp_path):
    scores, groups = llm_tables()
    frame = convergence_frame(scores, groups, n_bootstrap=50, seed=3)
    assert sorted(frame["n_sequences"].unique()) == [12, 24]  # 4 and 8 groups of 3
    assert set(frame["claim_id"]) == {"8a", "8b", "8c", "8d"}
    full = frame[frame["n_sequences"] == 24].drop(columns="n_sequences")
    ledger = claim8_rows(build_ledger(None, None, scores, None, groups, n_bootstrap=50, seed=3))
    mine = (
        full[["claim_id", "layer", "value", "uncertainty", "verdict"]]
        .sort_values(["claim_id", "layer"], na_position="first")
        .reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(mine, ledger, check_dtype=False)


def test_convergence_on_the_first_groups_is_the_ledger_of_those_sequences_alone():
    """Independently: a scores table made by hand from the first 4 groups' sums, and those groups only."""
    scores, groups = llm_tables()
    frame = convergence_frame(scores, groups, n_bootstrap=50, seed=3)
    first = groups[groups["group"] < 4]
    by_hand = []
    for layer, rows in first.groupby("layer"):
        mean = np.sum(np.stack(rows["sums"].to_list()).astype(np.float64), axis=0) / rows["n_sequences"].sum()
        q, k = packed_pairs(10)
        by_hand.append(
            pd.DataFrame(
                {
                    "model": "llm",
                    "kind": "pretrained",
                    "layer": layer,
                    "query_pos": q,
                    "key_pos": k,
                    "score_mean": mean,
                    "score_sem": np.nan,
                    "seq_len": 10,
                }
            )
        )
    ledger = claim8_rows(build_ledger(None, None, pd.concat(by_hand), None, first, n_bootstrap=50, seed=3))
    mine = (
        frame[frame["n_sequences"] == 12][["claim_id", "layer", "value", "uncertainty", "verdict"]]
        .sort_values(["claim_id", "layer"], na_position="first")
        .reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(mine, ledger, check_dtype=False, rtol=1e-9)
    assert not np.allclose(
        mine["value"], claim8_rows(build_ledger(None, None, scores, None, groups, n_bootstrap=50, seed=3))["value"]
    )  # fewer sequences: other values


def test_the_convergence_figure_is_a_row_per_model_and_fits_the_report():
    from causalpos.figures.convergence import plot_convergence
    from causalpos.figures.style import MAX_ASPECT

    scores, groups = llm_tables()
    frame = convergence_frame(scores, groups, n_bootstrap=20, seed=3)
    two = pd.concat([frame, frame.assign(model="llm2")])
    fig = plot_convergence(two)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert [t.split(",")[0] for t in titles] == ["8a", "8b", "8c", "8d"] * 2  # columns are claims
    assert all("llm2" in t for t in titles[4:]) and not any("llm2" in t for t in titles[:4])  # rows are models
    width, height = fig.get_size_inches()
    assert height / width <= MAX_ASPECT


def test_a_verdict_that_changes_with_n_is_noted_in_the_ledger():
    convergence = pd.DataFrame(
        {
            "model": "llm",
            "claim_id": ["8a"] * 4 + ["8b"] * 2,
            "layer": pd.array([0, 0, 1, 1, None, None], "Int64"),
            "n_sequences": [16, 64, 16, 64, 16, 64],
            "verdict": ["inconclusive", "supported", "supported", "supported", "not supported", "supported"],
        }
    )
    assert set(verdict_changes(convergence)) == {("8a", "llm", 0), ("8b", "llm", -1)}
    ledger = pd.DataFrame(
        {
            "claim_id": ["8a", "8a", "8b", "7a"],
            "model": ["llm", "llm", "llm", "nope"],
            "layer": pd.array([0, 1, None, 0], "Int64"),
            "note": ["a", "b", "", "d"],
        }
    )
    noted = note_flips(ledger, convergence)
    assert noted["note"].tolist() == [
        f"a; {FLIP_NOTE}: N = 16 inconclusive, 64 supported",
        "b",
        f"{FLIP_NOTE}: N = 16 not supported, 64 supported",
        "d",
    ]


# ---------------------------------------------------------------- the plan


def test_paper_llms_settings_are_the_papers_for_every_configured_model():
    config = load_config(ROOT / "config.yaml", devices=False)
    assert pretrained_models(config)
    for model in pretrained_models(config):
        settings = paper_llms_settings(config, model)
        assert (settings["seq_len"], settings["n_sequences"], settings["kind"]) == (1024, 1000, "pretrained")
        assert settings["splits"] == ["heldout", "train"] and settings["setting"] == "extraction.paper_llms"


@pytest.mark.workflow
def test_dry_run_plans_one_paper_size_extraction_per_model_under_its_own_folder(tmp_path):
    workdir = copy_workflow(tmp_path)
    shutil.copy2(ROOT / "config.yaml", workdir / "config.yaml")
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    out = snakemake(workdir, "-n", "paper_llms").stdout
    jobs = re.findall(r"^rule (\w+):\n((?:    .*\n)*)", out, flags=re.M)
    paper = paths.paper_llms_dir()
    extractions = [body for rule, body in jobs if rule == "extract"]
    models = sorted(re.search(r"wildcards: results=\S+, model=(\S+)", body).group(1) for body in extractions)
    assert models == sorted(config["extraction"]["pretrained"]["models"])
    for rule, body in jobs:
        if rule in ("extract", "claims", "figure", "model_figure", "convergence", "summary"):  # all in its folder
            assert re.search(rf"wildcards: results={paper}\b", body), (rule, body)
            written = re.search(r"output: (.*)", body).group(1).split(", ")
            assert all(path.startswith(f"{paper}/") for path in written), (rule, written)
            assert re.search(r"log: (.*)", body).group(1).startswith(f"{paper}/logs/")


# over 20 s (~45 s): target paper_llms in full on a copy (an LLM's extraction at its own size, figures, ledger)
@pytest.mark.workflow
def test_paper_llms_writes_its_own_folder_only(finished_copy):
    """Target paper_llms on the test config's small extraction.paper_llms: its tables, figures, claim 8's rows and the
    convergence table under results/paper_llms, its logs there too, and nothing of the default run changed."""
    from causalpos.io import read_metadata

    def files():
        return {
            p: p.stat().st_mtime_ns for p in finished_copy.rglob("*") if p.is_file() and ".snakemake" not in p.parts
        }

    before = files()
    snakemake(finished_copy, "paper_llms")
    after = files()
    paper = finished_copy / "results" / "paper_llms"
    changed = [p for p in after if before.get(p) != after[p]]
    assert changed and [p for p in changed if paper not in p.parents] == []
    config = yaml.safe_load((finished_copy / "config.yaml").read_text())
    settings, models = config["extraction"]["paper_llms"], list(config["extraction"]["pretrained"]["models"])
    for model in models:
        scores = paper / "activations" / model / "scores.parquet"
        sizes = pd.read_parquet(scores, columns=["seq_len", "n_sequences"])
        assert set(sizes["seq_len"]) == {settings["seq_len"]} and set(sizes["n_sequences"]) == {settings["n_sequences"]}
        sequences = read_metadata(scores)["sequences"]
        assert sum(c["n"] for c in sequences["counts"]) == len(set(sequences["doc_ids"])) == settings["n_sequences"]
        assert {c["split"] for c in sequences["counts"]} <= set(settings["splits"])
        pages = list((paper / "figures" / f"fig_all_layers_{model}").glob("*.png"))
        assert pages and all(page.stat().st_size > 1000 for page in pages)
    ledger = pd.read_parquet(paper / "summary" / "claims.parquet")
    assert set(ledger["claim"]) == {8} and set(ledger["model"]) == set(models)
    convergence = pd.read_parquet(paper / "summary" / "convergence.parquet")
    per_group = settings["n_sequences"] // settings["bootstrap_groups"]
    assert sorted(convergence["n_sequences"].unique()) == [4 * per_group, 8 * per_group]  # 4 and 8 of 8 groups
    assert_convergence_is_the_ledger(convergence, ledger, same_family=len(models) == 1)  # one family: one model
    for figure in ("fig05_llms", "figM1_nonrelativeness", "figL1_claims/claims8-9", "figL2_convergence"):
        assert (paper / "figures" / f"{figure}.png").stat().st_size > 1000
    pages = sorted(p.name for p in (paper / "figures" / "figL1_claims").iterdir() if not p.name.startswith("."))
    assert pages == ["claims8-9.pdf", "claims8-9.png"]  # claim 8's page alone (and Snakemake's timestamp)
