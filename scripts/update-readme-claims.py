"""Copy results/summary/claims.md (the ledger of the last run) into README.md, between its markers.

    python scripts/update-readme-claims.py            # after `snakemake --cores 8 all_figures`
"""
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- claims:start -->", "<!-- claims:end -->"

ledger = ROOT / "results" / "summary" / "claims.md"
if not ledger.is_file():
    sys.exit(f"{ledger} does not exist: run the workflow first")
readme = ROOT / "README.md"
text = readme.read_text()
if START not in text or END not in text:
    sys.exit(f"README.md lacks the markers {START} ... {END}")
body = ledger.read_text().strip()
readme.write_text(re.sub(f"{re.escape(START)}.*?{re.escape(END)}", lambda _: f"{START}\n{body}\n{END}", text,
                         flags=re.S))
shutil.copy2(ROOT / "results" / "figures" / "figL1_claims.png", ROOT / "docs" / "figures" / "figL1_claims.png")
print(f"README.md: ledger copied from {ledger}")
