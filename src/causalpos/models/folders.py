"""Whether the folders a config names hold what transformers loads from them, checked before any job.

`tokenizer_problem(folder)`: tokenizer.name's folder (and the tokenizer inside a pretrained model's folder);
`model_folder_problem(folder)`: a pretrained model's `path:` (extraction.pretrained.models.NAME);
`source_problem(key, value, kind)`: a config's value, a folder (a model's `path:`) or a folder or Hugging Face id
(tokenizer.name, a model's `name:`). Each returns what is wrong in words (None: nothing), naming the folder and
what it must hold.

Presence only, from the files' names: whether the files inside are whole (a truncated safetensors file, a
tokenizer.json that is not JSON) is checked when they are loaded (causalpos.models.model_files). Plain Python:
it runs while Snakemake parses the workflow, so no torch, no transformers; huggingface_hub only for a Hub id
when the hub is off (HF_HUB_OFFLINE), to look in its cache. With the hub on, a Hub id is left to the job, which
downloads it (config/paper.yaml's models and tokenizer).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

FAST_TOKENIZER = "tokenizer.json"  # the tokenizers library's file: all AutoTokenizer needs
# a SentencePiece model (read with the packages sentencepiece and protobuf) or a tiktoken one (tiktoken)
MODEL_FILES = ("tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "tiktoken.model")
VOCABULARIES = (("vocab.json", "merges.txt"), ("vocab.txt",))  # a slow tokenizer's files: BPE, WordPiece
CLASS_FILES = ("tokenizer_config.json", "config.json")  # name the class that reads a slow tokenizer's files
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")

TOKENIZER_FOLDER = (
    "a tokenizer folder (what tokenizer.save_pretrained writes) holds tokenizer.json, or a "
    "SentencePiece or tiktoken model (tokenizer.model), or vocabulary files (vocab.json and "
    "merges.txt, or vocab.txt) with tokenizer_config.json or config.json naming the tokenizer's class"
)
MODEL_FOLDER = (
    f"a model folder holds what save_pretrained of the model and of its tokenizer write: config.json, the "
    f"weights ({', '.join(WEIGHTS[:-1])} or {WEIGHTS[-1]}, with the shards an index names) and the "
    f"tokenizer (tokenizer.json, tokenizer.model, or vocabulary files with tokenizer_config.json or "
    f"config.json)"
)
# a Hugging Face repo id: [namespace/]name of letters, digits, - _ . neither starting nor ending with - or .
# (huggingface_hub's validate_repo_id, which also refuses -- and .. and a name ending in .git)
PART = r"[\w](?:[\w.-]{0,94}[\w])?"
REPO_ID = re.compile(rf"^(?:{PART}/)?{PART}$")
TRUE = ("1", "ON", "YES", "TRUE")  # huggingface_hub's truthy environment values


def tokenizer_problem(folder) -> str | None:
    """What keeps transformers' AutoTokenizer from loading `folder` (an existing path), or None."""
    folder = Path(folder)
    if not folder.is_dir():
        return f"{folder} is a file, not a folder; {TOKENIZER_FOLDER}"
    names = _names(folder)
    gap = _tokenizer_gap(names)
    return None if gap is None else f"folder {folder} lacks {gap}: {_holds(names)}; {TOKENIZER_FOLDER}"


def model_folder_problem(folder) -> str | None:
    """What keeps the extraction from loading a pretrained model and its tokenizer from `folder`, or None."""
    folder = Path(folder)
    if not folder.exists():
        return f"folder {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is a file, not a folder; {MODEL_FOLDER}"
    names = _names(folder)
    lacks = [] if "config.json" in names else ["config.json"]
    if not any(name in names for name in WEIGHTS):
        lacks.append("the weights")
    lacks += _missing_shards(folder, names)
    tokenizer = _tokenizer_gap(names)
    if tokenizer is not None:
        lacks.append(tokenizer)
    if not lacks:
        return None
    listed = lacks[0] if len(lacks) == 1 else f"{', '.join(lacks[:-1])} and {lacks[-1]}"
    return f"folder {folder} lacks {listed}: {_holds(names)}; {MODEL_FOLDER}"


def source_problem(key: str, value: str, kind: str, hub: bool = True) -> str | None:
    """The config error of `key` = `value`, a folder of a tokenizer (`kind` "tokenizer") or of a model ("model"),
    or with `hub` a Hugging Face id too; None where it is fine, or where only the job can tell (a Hub id while the
    hub is on). A folder is found as transformers finds it: relative to the working folder, ~ not expanded."""
    check = tokenizer_problem if kind == "tokenizer" else model_folder_problem
    if not value.strip():
        return f"{key}: an empty name; give a {kind} folder" + (", a Hugging Face id" if hub else "")
    if value.startswith("~"):
        return (
            f"{key}: {value} starts with ~, which transformers does not expand (it takes the name for a Hugging "
            f"Face id); write the folder's full path, {Path(value).expanduser()}"
        )
    path = Path(value)
    if path.exists():
        problem = check(path)
        return None if problem is None else f"{key}: {problem}"
    if not hub:
        return f"{key}: folder {value} does not exist"
    if looks_like_path(value):
        return (
            f"{key}: folder {value} does not exist (a local path, not a Hugging Face id); give a {kind} folder, "
            f"a Hugging Face id (org/name)" + (" or null to train a byte-level BPE" if kind == "tokenizer" else "")
        )
    if not hub_offline():
        return None
    from huggingface_hub import constants

    snapshot = cached_snapshot(value, CLASS_FILES + (FAST_TOKENIZER,))
    if snapshot is None:
        return (
            f"{key} = {value!r}: no such folder here, and HF_HUB_OFFLINE is set while the local Hugging Face "
            f"cache ({constants.HF_HUB_CACHE}) has no copy of it; download it where the hub is reachable "
            f"(hf download {value}) or give a folder"
        )
    problem = check(snapshot)
    if problem is None:
        return None
    return f"{key} = {value!r} (HF_HUB_OFFLINE is set: its copy in the local Hugging Face cache): {problem}"


def looks_like_path(value: str) -> bool:
    """A name meant as a local folder: absolute, ./ ../ ~, a folder's name inside an existing folder, more than
    one slash, or not a Hugging Face id at all (spaces, ...). `org/name` with no folder `org` here is a Hub id."""
    if value.startswith(("/", "./", "../", "~", ".\\")) or value in (".", "..") or "\\" in value:
        return True
    if not REPO_ID.match(value) or "--" in value or ".." in value or value.endswith(".git"):
        return True
    return "/" in value and Path(value).parent.is_dir()


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or transformers' TRANSFORMERS_OFFLINE) is set, read now as huggingface_hub reads it."""
    return (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or "").upper() in TRUE


def cached_snapshot(repo_id: str, files) -> Path | None:
    """The folder of `repo_id`'s main revision in the local Hugging Face cache that holds one of `files`."""
    from huggingface_hub import try_to_load_from_cache

    for name in files:
        try:
            found = try_to_load_from_cache(repo_id, name)
        except ValueError:  # an id huggingface_hub refuses (HFValidationError): not in its cache either
            return None
        if isinstance(found, str):
            return Path(found).parent
    return None


def _names(folder: Path) -> set[str]:
    return {entry.name for entry in os.scandir(folder)}


def _holds(names: set[str]) -> str:
    shown = sorted(names)
    if not shown:
        return "it is empty"
    if len(shown) == 1:
        return f"it holds only {shown[0]}"
    if len(shown) > 6:
        return f"it holds {', '.join(shown[:5])} and {len(shown) - 5} more"
    return f"it holds {', '.join(shown[:-1])} and {shown[-1]}"


def _tokenizer_gap(names: set[str]) -> str | None:
    """What a folder with these files lacks for AutoTokenizer, in a few words (None: nothing). tokenizer.json
    alone loads; a SentencePiece / tiktoken model needs the packages that convert it; a slow tokenizer's
    vocabulary files need tokenizer_config.json or config.json to say which class reads them."""
    if FAST_TOKENIZER in names:
        return None
    model = next((name for name in MODEL_FILES if name in names), None)
    if model is not None:
        if _importable("tiktoken") or (_importable("sentencepiece") and _importable("google.protobuf")):
            return None
        return (
            f"a tokenizer it can read here: its {model} needs the packages sentencepiece and protobuf (or "
            f"tiktoken), not installed (pip install sentencepiece protobuf; or save the tokenizer with its "
            f"tokenizer.json)"
        )
    vocabulary = next((files for files in VOCABULARIES if set(files) <= names), None)
    if vocabulary is None:
        return "a tokenizer"
    if any(name in names for name in CLASS_FILES):
        return None
    return f"tokenizer_config.json or config.json to name the class of the tokenizer in {' and '.join(vocabulary)}"


def _missing_shards(folder: Path, names: set[str]) -> list[str]:
    """The shards an index names (model.safetensors.index.json, pytorch_model.bin.index.json) that are not in the
    folder. An index that cannot be read is left to the load (model_files names a damaged one)."""
    missing = []
    for index in WEIGHTS[1::2]:
        if index not in names:
            continue
        try:
            shards = json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"].values()
            absent = sorted(shard for shard in {str(shard) for shard in shards} if not (folder / shard).is_file())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if absent:
            more = f" and {len(absent) - 3} more" if len(absent) > 3 else ""
            what = "the shard" if len(absent) == 1 else "the shards"
            missing.append(f"{what} {', '.join(absent[:3])}{more} that {index} names")
    return missing


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing
        return False
