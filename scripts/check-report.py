#!/usr/bin/env python3
"""Open a `snakemake --report` page in headless Chromium and read it as a reader does: every table of results
(category, subcategory), every row's view button, in every position of the table's toggle.

    python scripts/check-report.py report.html OUT_FOLDER [WIDTHxHEIGHT]

Needs `chromium` (apt-get install chromium) and the websocket-client package (pip install websocket-client),
neither a dependency of causalpos. Writes a screenshot of every result as it opened and of the rule graph to
OUT_FOLDER, and check.json. It checks

- text size: a PNG written by causalpos.figures.style.save_figure records the height of its smallest text in
  its own pixels (PNG tEXt PNG_TEXT_KEY, read here from the PNG in the report); a reader sees that times the
  width the image is shown at over its natural width, measured in the window after clicking the row's button
  (the table's column beside it is part of the window). Under MIN_TEXT_PX fails; a PNG without the entry (a
  figure from an older run) is "unknown", neither passing nor failing;
- every PNG whole in the window (its top and bottom visible: the report's viewer centres an image and a taller
  one loses its top), every PDF's and HTML page's data URL under Chromium's 2 MB limit (a larger one shows an
  empty panel, about:blank#blocked);
- PNG first: a table whose figures come as PDF and PNG has a format toggle, and each of its rows opens the PNG
  before the toggle is touched;
- the pages of fig_all_layers listed together per model, raw scores before diagonal-normalised (as the
  paper's Figures 11-13 before 14-16) and by layer (1-6, 7-12, 13-18);
- every result reachable from its table (two results with the same labels would hide one).

Exits 1 if any check fails, 2 if none fails but a PNG's text size is unknown, 0 otherwise. Steps:
docs/workflow.md#report.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass

from PIL import Image

from causalpos.figures.legibility import MIN_TEXT_PX, PNG_TEXT_KEY
from causalpos.catalogue.figures import ALL_LAYERS_FIGURE, ALL_LAYERS_PAGE

DATA_URL_LIMIT = 2 * 1024 * 1024  # Chromium blocks larger data: URLs in frames
PORT = 9333
VIEWS = {"image/png": "img", "image/svg+xml": "img", "image/jpeg": "img", "application/pdf": "pdf", "text/html": "html"}
KIND_ORDER = ("raw", "diagnorm")  # fig_all_layers' kinds in the order the report lists them
# a page of ALL_LAYERS_FIGURE in its model's folder, e.g. .../fig_all_layers_nope/raw_layers01-04.png
PAGE_RE = re.compile(
    rf"(?:^|/){re.escape(ALL_LAYERS_FIGURE)}_(?P<model>[^/]+)/"
    + re.escape(ALL_LAYERS_PAGE)
    .replace(r"\{kind\}", r"(?P<kind>[^/_]+)")
    .replace(r"\{layers\}", r"(?P<first>\d+)-(?P<last>\d+)")
    .replace(r"\{ext\}", r"(?P<ext>\w+)")
    + "$"
)

FIND_APP = """window.__app = (() => { const el = document.querySelector('#app');
    let f = el[Object.keys(el).find(k => k.startsWith('__reactContainer$'))].stateNode.current;
    while (f && !(f.stateNode && f.stateNode.setView)) f = f.child; return f.stateNode; })(); 1"""
# the table of results the navigation column shows (a Subcategory, an AbstractResults of Snakemake's report):
# its rows in the order shown, each with its results by toggle value, and the toggle's state
TABLE = """(() => { const el = document.querySelector('#app');
    const stack = [el[Object.keys(el).find(k => k.startsWith('__reactContainer$'))].stateNode.current];
    let table = null;
    while (stack.length && !table) { const f = stack.pop(); if (!f) continue;
        if (f.stateNode instanceof AbstractResults) table = f.stateNode;
        stack.push(f.sibling); stack.push(f.child); }
    if (!table) return null;
    const d = table.state.data;
    const toggles = Array.from(d.toggleLabels.entries());
    const state = toggles.map(([name]) => table.state.toggles.get(name));
    return {columns: d.entryLabels, toggles: toggles, state: state,
            domRows: document.querySelectorAll('nav table tbody tr').length,
            rows: d.entryLabelValues.map(labels => ({labels: labels,
                variants: Array.from(d.entries.get(labels.join(',')).entries()),
                opens: d.entries.get(labels.join(',')).get(state.join(','))}))}; })()"""
CLICK_ROW = """(() => { const tr = document.querySelectorAll('nav table tbody tr')[ROW];
    const a = tr && tr.querySelector('td:last-child a'); if (!a) return false; a.click(); return true; })()"""
CLICK_TOGGLE = """(() => { const input = document.getElementById(ID); if (!input) return false; input.click();
    return true; })()"""
IMAGE_BOX = """(() => { const img = Array.from(document.images).find(i => i.src === results[PATH].data_uri);
    if (!img || !img.complete || !img.naturalWidth) return null; const r = img.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width, height: r.height,
            naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight, innerWidth: innerWidth,
            innerHeight: innerHeight, nav: document.querySelector('nav').getBoundingClientRect().width}; })()"""


# ---------------------------------------------------------------- what is checked (no browser needed)


def data_uri_bytes(uri: str) -> bytes:
    """The bytes of a data: URL (base64 or percent-encoded)."""
    head, _, payload = uri.partition(",")
    return base64.b64decode(payload) if head.endswith(";base64") else urllib.parse.unquote_to_bytes(payload)


def png_text_px(data: bytes) -> float | None:
    """The smallest text of a PNG in its own pixels, from its tEXt entry PNG_TEXT_KEY; None without one."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            value = getattr(image, "text", {}).get(PNG_TEXT_KEY)
    except OSError:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def displayed_text_px(file_px: float | None, displayed_width: float, natural_width: float) -> float | None:
    """The smallest text a reader sees: its size in the file scaled as the image is (shown width / natural)."""
    if file_px is None or not natural_width:
        return None
    return file_px * displayed_width / natural_width


def text_verdict(px: float | None) -> str:
    """ "ok", "FAIL" (under MIN_TEXT_PX) or "unknown" (the PNG does not say)."""
    if px is None:
        return "unknown"
    return "ok" if px >= MIN_TEXT_PX else "FAIL"


@dataclass(frozen=True)
class Page:
    """A page of fig_all_layers: its model's folder, kind and layers (1-based, as in its file name)."""

    model: str
    kind: str
    first: int
    last: int

    def __str__(self) -> str:
        return f"{self.kind} {self.first}-{self.last}"


def all_layers_page(path: str) -> Page | None:
    found = PAGE_RE.search(path)
    return found and Page(found["model"], found["kind"], int(found["first"]), int(found["last"]))


def all_layers_order_problems(paths: list[str]) -> list[str]:
    """What is out of order among the pages of fig_all_layers in `paths`, the results a table's rows open, in
    the order the table lists them: each model's pages together, raw before diagonal-normalised (KIND_ORDER),
    each kind by layer."""
    pages = list(dict.fromkeys(page for path in paths if (page := all_layers_page(path))))  # a page per row
    models = [page.model for page in pages]
    first_seen = list(dict.fromkeys(models))
    problems = []
    if models != sorted(models, key=first_seen.index):
        problems.append(f"the pages of a model are not listed together: {', '.join(models)}")
    rank = {kind: n for n, kind in enumerate(KIND_ORDER)}
    for model in first_seen:
        listed = [page for page in pages if page.model == model]
        expected = sorted(listed, key=lambda page: (rank.get(page.kind, len(rank)), page.kind, page.first))
        if listed != expected:
            problems.append(
                f"{ALL_LAYERS_FIGURE}_{model} listed as {', '.join(map(str, listed))}; "
                f"expected {', '.join(map(str, expected))}"
            )
    return problems


def png_first_problems(table: dict, mimes: dict[str, str]) -> list[str]:
    """Where a table (TABLE's answer, as first shown) does not open PNGs first: a table with both PDFs and
    PNGs and no toggle lists each format as a row of its own; a row with a PNG must open it."""
    name = f"{table['category']} / {table['subcategory']}"
    paths = [path for row in table["rows"] for _, path in row["variants"]]
    kinds = {mimes.get(path) for path in paths}
    problems = []
    if {"image/png", "application/pdf"} <= kinds and not table["toggles"]:
        problems.append(f"{name}: no PDF/PNG toggle (a row per format)")
    for row in table["rows"]:
        variants = [path for _, path in row["variants"]]
        if any(mimes.get(path) == "image/png" for path in variants) and mimes.get(row["opens"]) != "image/png":
            problems.append(f"{name}: {' '.join(row['labels'])} opens {row['opens']}, not its PNG")
    return problems


# ---------------------------------------------------------------- the browser


class Tab:
    def __init__(self, url: str):
        import websocket  # websocket-client: not a dependency of causalpos

        tabs = json.load(urllib.request.urlopen(url))
        target = next(t for t in tabs if t["type"] == "page")
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=120, suppress_origin=True)
        self.count = 0

    def call(self, method: str, **params):
        self.count += 1
        self.ws.send(json.dumps({"id": self.count, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.count:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg.get("result", {})

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float = 30.0, step: float = 0.1):
        """The value of `expression` once it is truthy, or its last value after `timeout` seconds."""
        end = time.monotonic() + timeout
        while True:
            value = self.js(expression)
            if value or time.monotonic() > end:
                return value
            time.sleep(step)

    def shot(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))


def open_table(tab: Tab, category: str, subcategory: str) -> dict | None:
    """Show a table as a reader gets to it (menu, category, subcategory): a fresh table, its toggle as it
    starts."""
    tab.js("window.__app.setView({navbarMode: 'menu'}); 1")
    tab.wait("!document.querySelector('nav table')", timeout=5)
    tab.js(f"window.__app.showCategory({json.dumps(category)}); 1")
    if tab.wait("window.__app.state.navbarMode", timeout=5) == "category":
        tab.js(
            f"window.__app.setView({{navbarMode: 'subcategory', category: {json.dumps(category)}, "
            f"subcategory: {json.dumps(subcategory)}}}); 1"
        )
    tab.wait("!!document.querySelector('nav table tbody tr')", timeout=10)
    return tab.js(TABLE)


def view(tab: Tab, row: int, path: str, mime: str) -> dict:
    """Click a row's view button and measure what opens."""
    tab.js(CLICK_ROW.replace("ROW", str(row)))
    opened = tab.wait(f"window.__app.state.resultPath === {json.dumps(path)}", timeout=10)
    box = None
    if VIEWS[mime] == "img":
        box = tab.wait(IMAGE_BOX.replace("PATH", json.dumps(path)), timeout=30)
        time.sleep(0.2)  # the highlighted row can widen the column beside the image: measure once it settled
        box = tab.js(IMAGE_BOX.replace("PATH", json.dumps(path)))
    else:
        time.sleep(2.0)  # the PDF viewer or the page in its frame, for the screenshot
    return {"opened": bool(opened), "box": box}


def main(report: str, out: str, size: str = "1280x800") -> int:
    width, height = (int(x) for x in size.split("x"))
    os.makedirs(out, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="check-report-")
    browser = subprocess.Popen(
        [
            "chromium",
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--remote-debugging-port={PORT}",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                tab = Tab(f"http://127.0.0.1:{PORT}/json")
                break
            except OSError:
                time.sleep(0.3)
        tab.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        tab.call("Page.enable")
        tab.call("Page.navigate", url="file://" + os.path.abspath(report))
        # a report of many MB takes a while to parse
        tab.wait(
            "document.readyState === 'complete' && !!document.querySelector('#app') && typeof results !== 'undefined'",
            timeout=120,
            step=1,
        )
        time.sleep(2)
        tab.js(FIND_APP)
        meta = {
            path: {"mime": mime, "bytes": length}
            for path, mime, length in tab.js(
                "Object.entries(results).map(([p, r]) => [p, r.mime_type, r.data_uri.length])"
            )
        }
        mimes = {path: m["mime"] for path, m in meta.items()}
        categories = tab.js("Object.fromEntries(Object.entries(categories).map(([c, s]) => [c, Object.keys(s)]))")
        file_px: dict[str, float | None] = {}
        rows, tables, problems, shots = [], [], [], 0
        for category in sorted(categories, key=str.casefold):
            for subcategory in sorted(categories[category], key=str.casefold):
                table = open_table(tab, category, subcategory)
                if table is None:
                    problems.append(f"{category} / {subcategory}: no table of results")
                    continue
                table.update(category=category, subcategory=subcategory)
                tables.append(table)
                if table["domRows"] != len(table["rows"]):
                    problems.append(
                        f"{category} / {subcategory}: {table['domRows']} rows shown, {len(table['rows'])} in the table"
                    )
                problems += png_first_problems(table, mimes)
                problems += all_layers_order_problems([row["opens"] for row in table["rows"]])
                # every position of the toggle (if any), the one it starts in first
                positions = [None]
                if table["toggles"]:
                    ((name, values),) = table["toggles"]
                    positions += [(name, value) for value in values if value != table["state"][0]]
                for position in positions:
                    if position is not None:
                        table = open_table(tab, category, subcategory)
                        tab.js(CLICK_TOGGLE.replace("ID", json.dumps(f"toggle-{position[0]}-{position[1]}")))
                        table = tab.js(TABLE)
                        table.update(category=category, subcategory=subcategory)
                    for n, row in enumerate(table["rows"]):
                        path = row["opens"]
                        if path is None or mimes.get(path) not in VIEWS:
                            continue
                        seen = view(tab, n, path, mimes[path])
                        shots += 1
                        tab.shot(f"{out}/{shots:03d}_{path.replace('/', '_')}.png")
                        rows.append(
                            measure(
                                tab,
                                path,
                                meta[path],
                                seen,
                                file_px,
                                table=f"{category} / {subcategory}",
                                toggle=position,
                                first=position is None,
                            )
                        )
        # each result once in the summary: as the reader first opens it
        by_path: dict[str, dict] = {}
        for row in rows:
            by_path.setdefault(row["path"], row)
        unreached = sorted(p for p in meta if mimes[p] in VIEWS and p not in by_path)
        problems += [f"{path}: no row of its table opens it" for path in unreached]
        print(f"{'':4} {'view':4} {'MB':>5} {'text px':>7}  result (shown at width / natural width)")
        for path in sorted(by_path):
            row = by_path[path]
            text = "-" if row["text"] == "-" else ("unknown" if row["text_px"] is None else f"{row['text_px']:7.1f}")
            shown = f"{row['box']['width']:.0f} / {row['box']['naturalWidth']}" if row["box"] else ""
            print(
                f"{'ok' if row['ok'] else 'FAIL':4} {row['view']:4} {row['bytes'] / 1e6:5.2f} {text:>7}  "
                f"{path} {shown} {'; '.join(row['why'])}"
            )
        failed = sorted({row["path"] for row in rows if not row["ok"]})
        unknown = sorted(path for path, row in by_path.items() if row["text"] == "unknown")
        tab.js("window.__app.setView({content: 'rulegraph', navbarMode: 'menu'}); 1")
        tab.wait("!!document.querySelector('#rulegraph canvas, #rulegraph svg')", timeout=30, step=0.5)
        time.sleep(1)
        tab.shot(f"{out}/rulegraph.png")
        with open(f"{out}/check.json", "w") as f:
            json.dump(
                {
                    "window": [width, height],
                    "min_text_px": MIN_TEXT_PX,
                    "results": rows,
                    "tables": tables,
                    "problems": problems,
                    "failed": failed,
                    "unknown": unknown,
                },
                f,
                indent=1,
            )
        for problem in problems:
            print("FAIL", problem)
        print(
            f"{len(by_path) - len(failed)} of {len(by_path)} results pass in a {size} window "
            f"(text >= {MIN_TEXT_PX:g} px where known, PNGs whole, data URLs < 2 MB); "
            f"failed: {failed or 'none'}; text size unknown: {len(unknown)}; "
            f"table problems: {len(problems)}"
        )
        if failed or problems:
            return 1
        return 2 if unknown else 0
    finally:
        browser.terminate()
        browser.wait()


def measure(tab: Tab, path: str, meta: dict, seen: dict, file_px: dict, **where) -> dict:
    """One result as opened: whole in the window, its data URL's size, its smallest text as shown."""
    mime, box, why = meta["mime"], seen["box"], []
    row = {
        "path": path,
        "view": VIEWS[mime],
        "mime": mime,
        "bytes": meta["bytes"],
        "box": box,
        **where,
        "text": "-",
        "text_px": None,
        "file_text_px": None,
    }
    if not seen["opened"]:
        why.append("its button did not open it")
    if VIEWS[mime] == "img":
        if box is None:
            why.append("not shown")
        elif box["top"] < -0.5 or box["bottom"] > box["innerHeight"] + 0.5 or box["right"] > box["innerWidth"] + 0.5:
            why.append(f"not whole in the window (top {box['top']:.0f}, bottom {box['bottom']:.0f})")
        if path not in file_px:
            file_px[path] = png_text_px(data_uri_bytes(tab.js(f"results[{json.dumps(path)}].data_uri")))
        row["file_text_px"] = file_px[path]
        if box is not None:
            row["text_px"] = displayed_text_px(file_px[path], box["width"], box["naturalWidth"])
        row["text"] = text_verdict(row["text_px"])
        if row["text"] == "FAIL":
            why.append(f"smallest text {row['text_px']:.1f} px < {MIN_TEXT_PX:g}")
    elif meta["bytes"] >= DATA_URL_LIMIT:
        why.append(f"data URL {meta['bytes'] / 1e6:.2f} MB, over Chromium's 2 MB")
    row["why"], row["ok"] = why, not why
    return row


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
