"""Write the generated sections of the docs from the catalogues (causalpos.catalogue) and the config schema.

    python scripts/generate-docs.py                 # write every section
    python scripts/generate-docs.py --check         # exit 1 naming each section that is out of date
    python scripts/generate-docs.py [--check] NAME  # only the sections named

A section is a function from the catalogues to text, registered by name with docsgen.section(name, page) and
written between the page's markers for that name (docsgen's docstring). The sections: each table's columns in
docs/results.md (columns-<table>), the figure list of docs/figures.md (figures), the key tables and the
thresholds of docs/configuration.md (config, thresholds), the thresholds' bounds in the config schema
(thresholds-schema), where each claim is measured in docs/claims.md (claims-code), and the report's caption
files (figure-captions, caption-<figure>). scripts/update-docs-claims.py copies a finished run's ledger, which no
catalogue holds.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docsgen  # noqa: E402
from docsgen import ROOT, SECTIONS  # noqa: E402,F401
from docsgen import catalogue_pages, config_page, report_captions, workflow_page  # noqa: E402,F401  (they register the sections)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    names = [a for a in argv if a != "--check"]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        print(f"unknown section(s) {unknown}; known: {sorted(SECTIONS)}", file=sys.stderr)
        return 2
    if check:
        stale = docsgen.out_of_date(names or None)
        for name in stale:
            print(f"{SECTIONS[name].page}: section {name} is out of date: run python scripts/generate-docs.py")
        return 1 if stale else 0
    for path, text in docsgen.pages(names or None).items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"{path.relative_to(ROOT)}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
