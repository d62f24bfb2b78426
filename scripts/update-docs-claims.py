"""Copy results/summary/claims.md (the ledger of the last run) into docs/claims.md, between its markers.

    python scripts/update-docs-claims.py [RESULTS]  # after `snakemake --cores 8 all_figures` (RESULTS: its results
                                                    # folder, default ./results)

Also copies the pages of the ledger's figure, results/figures/figL1_claims/claims*.png (one per part of the paper,
catalogue.claims.PAGES), to docs/figures/figL1_claims/, where docs/claims.md and docs/figures.md show
them; the ledger itself and the convergence table, results/summary/{claims,convergence}.parquet, to
docs/tables/default_run/ (tests/docs/test_quoted_numbers.py reads both); and the
ledger's counts by kind (analysis.claims.ledger.headline of that table) into README.md between its markers, where
tests/docs checks them against the table. The findings written around them are prose: check them against the new
ledger.
"""
import re
import shutil
import sys
from pathlib import Path

import pandas as pd

from causalpos.analysis.claims.ledger import headline
from causalpos.catalogue.claims import PAGES
from causalpos.catalogue.figures import claims_dir, claims_page

ROOT = Path(__file__).resolve().parents[1]

PAGE = ROOT / "docs" / "claims.md"
START, END = "<!-- claims:start -->", "<!-- claims:end -->"
README, HEADLINE = ROOT / "README.md", ("<!-- headline:start -->", "<!-- headline:end -->")
TABLE = ROOT / "docs" / "tables" / "default_run" / "claims.parquet"
CONVERGENCE = TABLE.with_name("convergence.parquet")
RESULTS = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT / "results"


def between(text: str, markers: tuple[str, str], body: str, where: Path) -> str:
    start, end = markers
    if start not in text or end not in text:
        sys.exit(f"{where} lacks the markers {start} ... {end}")
    return re.sub(f"{re.escape(start)}.*?{re.escape(end)}", lambda _: f"{start}\n{body}\n{end}", text, flags=re.S)


ledger = RESULTS / "summary" / "claims.md"
if not ledger.is_file():
    sys.exit(f"{ledger} does not exist: run the workflow first")
figures = [Path(claims_page(claims_dir(str(RESULTS)), page, "png")) for page in PAGES]
missing = [str(p) for p in figures if not p.is_file()]
if missing:
    sys.exit(f"{', '.join(missing)} missing: run the workflow first")
PAGE.write_text(between(PAGE.read_text(), (START, END), ledger.read_text().strip(), PAGE))
TABLE.parent.mkdir(parents=True, exist_ok=True)
shutil.copy2(ledger.with_suffix(".parquet"), TABLE)
shutil.copy2(ledger.with_name("convergence.parquet"), CONVERGENCE)
README.write_text(between(README.read_text(), HEADLINE, headline(pd.read_parquet(TABLE)), README))
docs_figures = ROOT / "docs" / "figures" / Path(claims_dir()).name
docs_figures.mkdir(exist_ok=True)
for stale in set(docs_figures.glob("*.png")) - {docs_figures / p.name for p in figures}:
    stale.unlink()
for figure in figures:
    shutil.copy2(figure, docs_figures / figure.name)
print(f"{PAGE.relative_to(ROOT)}: ledger copied from {ledger}; {len(figures)} pages to "
      f"{docs_figures.relative_to(ROOT)}")
