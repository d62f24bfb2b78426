"""What each output held when its job wrote it: a record beside it, checked by whoever reads it.

Every job's outputs get a record, `.<name>.sha256` beside the file or folder (workflow.job writes it when the job
has succeeded): the rule that wrote it, the job's inputs, and for each file (each file under a directory output)
its size, mtime and SHA-256. Checking a file against its record:
- a size that differs, or a file of the record missing, is damage (a truncation), seen without reading;
- a different mtime with the same size is read and hashed (a touch is no damage; the record takes the new mtime);
- `full=True` hashes every file: a flipped bit keeps the size, and disk corruption keeps the mtime too.
A file without a record (made before records existed, or by hand) is not checked, nor is a link: Snakemake's
between-workflow cache (--cache) puts a link to its copy in place of an output without running the job, so the
record beside it may be an earlier job's.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

SUFFIX = ".sha256"
CHUNK = 1 << 22


def record_path(path) -> Path:
    """Where the record of output `path` (a file or a folder) lives: a hidden file beside it."""
    path = Path(path)
    return path.parent / f".{path.name}{SUFFIX}"


def sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def files_of(path) -> dict[str, Path]:
    """The files an output consists of, by their path inside it: {"": path} for a file, every file (links
    followed) under a folder."""
    path = Path(path)
    if not path.is_dir():
        return {"": path}
    found = {}
    for root, dirs, names in os.walk(path, followlinks=True):
        dirs.sort()
        for name in sorted(names):
            full = Path(root, name)
            found[full.relative_to(path).as_posix()] = full
    return found


def _entry(file: Path) -> dict:
    stat = file.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256(file)}


def write_record(path, rule: str, inputs) -> Path:
    """Record what output `path` holds now, written by `rule` from `inputs`; return the record's path."""
    record = {
        "rule": rule,
        "inputs": [str(item) for item in inputs],
        "files": {name: _entry(file) for name, file in files_of(path).items()},
    }
    return _save(path, record)


def _save(path, record: dict) -> Path:
    """Write the record of `path` whole or not at all (a reader never sees half of it)."""
    target = record_path(path)
    temporary = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record, indent=1))
    os.replace(temporary, target)
    return target


def read_record(path) -> dict | None:
    """The record of output `path`, or None where there is none (or it cannot be read: it then checks nothing)."""
    try:
        record = json.loads(record_path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("files"), dict) else None


def forget(path) -> None:
    """Remove the record of `path` (its job is about to write it again)."""
    record_path(path).unlink(missing_ok=True)


def damage(path, record: dict | None = None, full: bool = False) -> str | None:
    """How output `path` differs from its record (None: it does not, or there is no record). A missing output is
    reported as "missing"; a file whose mtime moved but whose content is the record's gets the new mtime recorded."""
    record = read_record(path) if record is None else record
    if record is None:
        return None
    if not os.path.lexists(path):
        return "missing"
    if os.path.islink(path):  # from Snakemake's between-workflow cache (--cache), not from the job the record names
        return None
    files = files_of(path)
    refreshed = False
    for name, entry in record["files"].items():
        file = files.get(name)
        shown = f"its file {name}" if name else "it"
        if file is None:
            return f"{shown} is missing"
        stat = file.stat()
        if stat.st_size != entry.get("size"):
            return f"{shown} has {stat.st_size:,} bytes where {entry.get('size'):,} were written"
        if full or stat.st_mtime_ns != entry.get("mtime_ns"):
            if sha256(file) != entry.get("sha256"):
                whose = f"the content of its file {name}" if name else "its content"
                return f"{whose} is not what rule {record.get('rule')} wrote (SHA-256 differs)"
            if stat.st_mtime_ns != entry.get("mtime_ns"):
                entry["mtime_ns"], refreshed = stat.st_mtime_ns, True
    if refreshed:  # touched, not changed: hash it no more
        _save(path, record)
    return None
