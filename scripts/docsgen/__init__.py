"""Generated sections of the docs: a registry of named sections, each a function from the catalogues (and the
config schema) to text, written between its markers in one file.

A section is registered with `@section(name, page)`: `page` is a path relative to the repository root, and the
function returns the text that goes between the page's markers for `name` (no trailing newline). The markers
depend on the page's kind (MARKERS): `<!-- name:start -->` ... `<!-- name:end -->` in Markdown,
`# name:start` ... `# name:end` in YAML, `{#- name:start -#}` ... `{#- name:end -#}` in a Jinja-templated reST
caption. The lines of the markers stay as they are (a YAML marker keeps its indentation); everything between
them is the section's. scripts/generate-docs.py writes them (or `--check`s them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
MARKERS = {  # a page's suffix -> its markers' format
    ".md": ("<!-- {name}:start -->", "<!-- {name}:end -->"),
    ".yaml": ("# {name}:start", "# {name}:end"),
    ".rst": ("{{#- {name}:start -#}}", "{{#- {name}:end -#}}"),
}


@dataclass(frozen=True)
class Section:
    name: str
    page: str  # relative to the repository root
    render: Callable[[], str]

    @property
    def path(self) -> Path:
        return ROOT / self.page

    def markers(self) -> tuple[str, str]:
        start, end = MARKERS[self.path.suffix]
        return start.format(name=self.name), end.format(name=self.name)


SECTIONS: dict[str, Section] = {}


def section(name: str, page: str):
    """Register the decorated function as section `name` of `page`."""
    if Path(page).suffix not in MARKERS:
        raise ValueError(f"section {name!r}: no markers for {page} (known suffixes: {sorted(MARKERS)})")

    def register(render: Callable[[], str]) -> Callable[[], str]:
        if name in SECTIONS:
            raise ValueError(f"section {name!r} is registered twice")
        SECTIONS[name] = Section(name, page, render)
        return render

    return register


def replaced(text: str, sec: Section, body: str | None = None) -> str:
    """`text` with what is between `sec`'s markers replaced by its rendering (or `body`); ValueError unless
    each marker is there once, the start before the end."""
    start, end = sec.markers()
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(
            f"{sec.page} needs the markers {start} ... {end} once each, in that order (section {sec.name})"
        )
    after_start = text.index("\n", text.index(start)) + 1
    before_end = text.rindex("\n", 0, text.index(end)) + 1
    body = sec.render() if body is None else body
    return text[:after_start] + body + "\n" + text[before_end:]


def pages(names=None) -> dict[Path, str]:
    """Every page of the sections `names` (all by default) with those sections written: {path: new text}."""
    chosen = [SECTIONS[n] for n in (names or SECTIONS)]
    texts: dict[Path, str] = {}
    for sec in chosen:
        text = texts.get(sec.path)
        if text is None:
            text = sec.path.read_text(encoding="utf-8")
        texts[sec.path] = replaced(text, sec)
    return texts


def out_of_date(names=None) -> list[str]:
    """The sections (of `names`, all by default) whose text on their page is not what they render."""
    stale = []
    for name in names or SECTIONS:
        sec = SECTIONS[name]
        text = sec.path.read_text(encoding="utf-8")
        if replaced(text, sec) != text:
            stale.append(name)
    return stale


def section_text(name: str) -> str:
    """What is between the markers of section `name` on its page now."""
    sec = SECTIONS[name]
    text = sec.path.read_text(encoding="utf-8")
    start, end = sec.markers()
    after_start = text.index("\n", text.index(start)) + 1
    return text[after_start : text.rindex("\n", 0, text.index(end)) + 1]


def cell(text) -> str:
    """A Markdown table cell: a `|` escaped (once), a newline a space."""
    return re.sub(r"(?<!\\)\|", r"\\|", str(text).replace("\n", " "))


def row(cells) -> str:
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def table(header: list[str], rows: list[str]) -> list[str]:
    return [row(header), row(["---"] * len(header)), *rows]
