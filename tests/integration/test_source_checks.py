"""Corpus files that cannot be read as what they claim to be (issue 28): refused before any job, naming
`data.sources[i]` and the file, and by the sampling when a file goes bad past the start the check reads.

Every test here fails on the code before these checks: garbage .jsonl and broken .parquet files were refused
with a bare pyarrow / codec message naming neither file nor setting (or only in the sampling job), and a .txt
file of binary data, latin-1 or UTF-16 was sampled as a document and a tokenizer trained on it.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pandas as pd
import pytest
import yaml

from causalpos.corpus.documents import check_sources, sample_documents
from causalpos.corpus.sources import TEXT_CHECK_BYTES
from causalpos.workflow.config import ConfigError, validate_config

ROOT = Path(__file__).resolve().parents[2]
GOOD_TEXT = "Ein Café in Zürich, naïve façade; 東京の天気は晴れです。 Plain words too.\n"


@pytest.fixture(scope="module")
def default_config():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


@pytest.fixture
def good_file(tmp_path):
    path = tmp_path / "good.txt"
    path.write_text(GOOD_TEXT, encoding="utf-8")
    return path


def with_sources(default_config, *sources) -> dict:
    config = copy.deepcopy(default_config)
    config["data"]["sources"] = list(sources)
    return config


def files_source(*paths, **settings) -> dict:
    return {"type": "files", "paths": [str(p) for p in paths], **settings}


def binary_txt_folder(folder: Path) -> Path:
    """20 files of random bytes, as `head -c 5000 /dev/urandom` would write them."""
    folder.mkdir()
    rng = random.Random(0)
    for number in range(20):
        (folder / f"{number:02d}.txt").write_bytes(rng.randbytes(5000))
    return folder


def refused(config) -> str:
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    return str(err.value)


# ---------------------------------------------------------------- refused before any job


def test_garbage_jsonl_is_refused(default_config, good_file, tmp_path):
    bad = tmp_path / "garbage.jsonl"
    bad.write_bytes(random.Random(0).randbytes(3000))
    message = refused(with_sources(default_config, files_source(good_file), files_source(bad)))
    assert message.startswith(f"data.sources[1].paths: {bad} line 1 is not UTF-8 (")
    assert "a .jsonl file holds one JSON object per line, in UTF-8" in message


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "Parquet file size is 0 bytes"),
        (b"plain text renamed to .parquet\n" * 10, "Parquet magic bytes not found"),
    ],
    ids=["empty", "text"],
)
def test_unreadable_parquet_is_refused(default_config, good_file, tmp_path, content, reason):
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(content)
    message = refused(with_sources(default_config, files_source(good_file), files_source(bad)))
    assert message.startswith(f"data.sources[1].paths: {bad} is not a readable Parquet file ({reason}")
    assert message.endswith(
        "give Parquet files (e.g. written by pandas DataFrame.to_parquet) with the text in a "
        "string column (text_column), or leave it out of the paths"
    )


def test_parquet_text_column_of_bytes_is_refused(default_config, tmp_path):
    bad = tmp_path / "bytes.parquet"
    pd.DataFrame({"text": [b"raw", b"bytes"]}).to_parquet(bad)
    assert refused(with_sources(default_config, files_source(bad))) == (
        f"data.sources[0].text_column: {bad} column 'text' holds binary, not strings; name a column of strings"
    )


def test_binary_txt_files_are_refused(default_config, good_file, tmp_path):
    folder = binary_txt_folder(tmp_path / "binary")
    message = refused(with_sources(default_config, files_source(good_file), files_source(folder)))
    assert message.startswith(f"data.sources[1].paths: {folder}/00.txt is not UTF-8 text (")
    assert "a .txt file must be UTF-8 text with at least 95% of its characters printable or whitespace" in message
    assert message.endswith(f"(19 more of its files are refused too, e.g. {folder}/01.txt)")


def test_latin1_txt_is_refused(default_config, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Café crème, naïve résumé à la française.\n".encode("latin-1"))
    message = refused(with_sources(default_config, files_source(bad)))
    assert message == (
        f"data.sources[0].paths: {bad} is not UTF-8 text (invalid continuation byte at byte 3); "
        f"a .txt file must be UTF-8 text with at least 95% of its characters printable or "
        f"whitespace; convert other encodings to UTF-8 (e.g. iconv -f latin1 -t utf-8 old.txt > "
        f"new.txt) and leave binary files out of the paths"
    )


def test_utf16_txt_is_refused_as_not_text(default_config, tmp_path):
    # valid UTF-8 (ASCII and NUL bytes), but half of it is control characters
    bad = tmp_path / "utf16.txt"
    bad.write_bytes(("Plain words in UTF-16. " * 50).encode("utf-16-le"))
    assert refused(with_sources(default_config, files_source(bad))).startswith(
        f"data.sources[0].paths: {bad} is not text: only 50.0% of the characters of its first 64 KiB are "
        f"printable or whitespace; a .txt file must be UTF-8 text"
    )


# ---------------------------------------------------------------- accepted


def test_utf8_text_with_accents_and_cjk_is_accepted(default_config, good_file):
    validate_config(with_sources(default_config, files_source(good_file)))
    docs = sample_documents([files_source(good_file)])
    assert list(docs["text"]) == [GOOD_TEXT]


def test_a_multibyte_character_cut_by_the_checked_start_is_accepted(tmp_path):
    text = "a" + "é" * TEXT_CHECK_BYTES  # the check's read ends in the middle of an 'é'
    path = tmp_path / "long.txt"
    path.write_text(text, encoding="utf-8")
    check_sources([files_source(path)])
    assert list(sample_documents([files_source(path)])["text"]) == [text]


# ---------------------------------------------------------------- refused by the sampling


@pytest.mark.parametrize(
    "tail, problem",
    [
        (random.Random(0).randbytes(5000), "is not UTF-8 text (invalid continuation byte at byte 73720)"),
        (b"\0" * 100_000, "is not text: only 42.4% of its characters are printable or whitespace"),
    ],
    ids=["random-bytes", "nul-bytes"],
)
def test_sampling_refuses_a_txt_file_that_turns_binary_past_the_checked_start(
    default_config, good_file, tmp_path, tail, problem
):
    late = tmp_path / "late.txt"
    late.write_bytes(b"ordinary text. " * 4096 + b"more text\n" * 1228 + tail)  # binary from byte 73,720 on
    source = files_source(good_file, late)
    validate_config(with_sources(default_config, source))  # the check reads the first 64 KiB of late.txt only
    with pytest.raises(ValueError) as err:
        sample_documents([source])
    assert str(err.value).startswith(f"data.sources[0].paths: {late} {problem}; a .txt file must be UTF-8 text")


def test_sampling_names_a_jsonl_line_that_is_not_utf8(default_config, tmp_path):
    bad = tmp_path / "late.jsonl"
    lines = [json.dumps({"text": f"document {n}"}).encode() for n in range(10)]
    lines[8] = b'{"text": "caf\xe9"}'  # latin-1, past the records the check parses
    bad.write_bytes(b"\n".join(lines) + b"\n")
    validate_config(with_sources(default_config, files_source(bad)))
    with pytest.raises(ValueError) as err:
        sample_documents([files_source(bad)])
    assert str(err.value).startswith(f"data.sources[0].paths: {bad} line 9 is not UTF-8 (")


# ---------------------------------------------------------------- the workflow


@pytest.mark.workflow
def test_snakemake_refuses_a_binary_txt_source_before_any_job(tmp_path):
    from helpers import copy_workflow, snakemake  # helpers imports torch: only this test needs it

    workdir = tmp_path / "w"
    workdir.mkdir()
    copy_workflow(workdir)
    folder = binary_txt_folder(tmp_path / "binary")
    config = yaml.safe_load((workdir / "config.yaml").read_text())  # the tiny config, with the binary source
    config["data"]["sources"] = [files_source(folder)]
    configfile = tmp_path / "binary.yaml"
    configfile.write_text(yaml.safe_dump(config, sort_keys=False))
    proc = snakemake(workdir, "-n", "--configfile", str(configfile), check=False)
    assert proc.returncode != 0
    assert f"data.sources[0].paths: {folder}/00.txt is not UTF-8 text (" in proc.stdout + proc.stderr
    assert not (workdir / "results").exists()
