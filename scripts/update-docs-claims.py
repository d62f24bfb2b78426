"""Copy results/summary/claims.md (the ledger of the last run) into docs/claims.md, between its markers.

    python scripts/update-docs-claims.py            # after `snakemake --cores 8 all_figures`

Also copies the pages of the ledger's figure, results/figures/figL1_claims/claims*.png (one per part of the paper,
catalogue.claims.PAGES), to docs/figures/figL1_claims/, where docs/claims.md and docs/figures.md show
them. The counts and findings written around the table in docs/claims.md and README.md are prose: check them
against the new ledger.
"""
import re
import shutil
import sys
from pathlib import Path

from causalpos.catalogue.claims import PAGES
from causalpos.catalogue.figures import claims_page
from causalpos.catalogue.paths import claims_dir

ROOT = Path(__file__).resolve().parents[1]

PAGE = ROOT / "docs" / "claims.md"
START, END = "<!-- claims:start -->", "<!-- claims:end -->"

ledger = ROOT / "results" / "summary" / "claims.md"
if not ledger.is_file():
    sys.exit(f"{ledger} does not exist: run the workflow first")
figures = [Path(claims_page(ROOT / claims_dir(), page, "png")) for page in PAGES]
missing = [str(p.relative_to(ROOT)) for p in figures if not p.is_file()]
if missing:
    sys.exit(f"{', '.join(missing)} missing: run the workflow first")
text = PAGE.read_text()
if START not in text or END not in text:
    sys.exit(f"{PAGE} lacks the markers {START} ... {END}")
body = ledger.read_text().strip()
PAGE.write_text(re.sub(f"{re.escape(START)}.*?{re.escape(END)}", lambda _: f"{START}\n{body}\n{END}", text,
                       flags=re.S))
docs_figures = ROOT / "docs" / "figures" / Path(claims_dir()).name
docs_figures.mkdir(exist_ok=True)
for stale in set(docs_figures.glob("*.png")) - {docs_figures / p.name for p in figures}:
    stale.unlink()
for figure in figures:
    shutil.copy2(figure, docs_figures / figure.name)
print(f"{PAGE.relative_to(ROOT)}: ledger copied from {ledger}; {len(figures)} pages to "
      f"{docs_figures.relative_to(ROOT)}")
