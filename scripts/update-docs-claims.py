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
from causalpos.catalogue import paths
from causalpos.catalogue.claims import ledger_pages
from causalpos.catalogue.figures import MASK_CONTROLS_FIGURE, claims_dir, claims_page

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
figures = [Path(claims_page(claims_dir(str(RESULTS)), page, "png")) for page in ledger_pages()]
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
for stale in (
    set(docs_figures.glob("*.png")) - {docs_figures / p.name for p in figures} - {docs_figures / "claims12.png"}
):
    stale.unlink()
for figure in figures:
    shutil.copy2(figure, docs_figures / figure.name)
print(
    f"{PAGE.relative_to(ROOT)}: ledger copied from {ledger}; {len(figures)} pages to {docs_figures.relative_to(ROOT)}"
)

# issue 43's targets, where they ran: target mask_controls's table, figure, claim 12's ledger and its page
# (docs/tables/mask_controls, docs/figures), and target window_control's window test (docs/tables/window_control)
results = str(RESULTS)
TARGETS = {
    "mask_controls": [
        (paths.table_file("mask_controls", results), "mask_controls.parquet"),
        (paths.table_file("claims", paths.controls_root(results)), "claims.parquet"),
    ],
    "window_control": [(paths.table_file("window_test", paths.windows_root(results)), "window_test.parquet")],
}
for target, files in TARGETS.items():
    if all(Path(source).is_file() for source, _ in files):
        (ROOT / "docs" / "tables" / target).mkdir(parents=True, exist_ok=True)
        for source, name in files:
            shutil.copy2(source, ROOT / "docs" / "tables" / target / name)
        print(f"docs/tables/{target}: {', '.join(name for _, name in files)} from target {target}'s run")
page12 = Path(claims_page(claims_dir(paths.controls_root(results)), "12", "png"))
figure = Path(paths.figure_files(MASK_CONTROLS_FIGURE, ["png"], results)[0])
if page12.is_file() and figure.is_file():
    shutil.copy2(page12, docs_figures / page12.name)
    shutil.copy2(figure, ROOT / "docs" / "figures" / figure.name)
    print(f"docs/figures: {figure.name}, {docs_figures.name}/{page12.name}")
