"""Copy results/summary/claims.md (the ledger of the last run) into docs/claims.md, between its markers.

    python scripts/update-docs-claims.py            # after `snakemake --cores 8 all_figures`

Also copies the ledger's figure, results/figures/figL1_claims.png, to docs/figures/. The counts and findings
written around the table in docs/claims.md and README.md are prose: check them against the new ledger.
"""
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "claims.md"
START, END = "<!-- claims:start -->", "<!-- claims:end -->"

ledger = ROOT / "results" / "summary" / "claims.md"
if not ledger.is_file():
    sys.exit(f"{ledger} does not exist: run the workflow first")
text = PAGE.read_text()
if START not in text or END not in text:
    sys.exit(f"{PAGE} lacks the markers {START} ... {END}")
body = ledger.read_text().strip()
PAGE.write_text(re.sub(f"{re.escape(START)}.*?{re.escape(END)}", lambda _: f"{START}\n{body}\n{END}", text,
                       flags=re.S))
shutil.copy2(ROOT / "results" / "figures" / "figL1_claims.png", ROOT / "docs" / "figures" / "figL1_claims.png")
print(f"{PAGE.relative_to(ROOT)}: ledger copied from {ledger}")
