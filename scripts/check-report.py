#!/usr/bin/env python3
"""Open a `snakemake --report` page in headless Chromium and view every result as its button does.

    python scripts/check-report.py report.html OUT_FOLDER [WIDTHxHEIGHT]

Needs `chromium` (apt-get install chromium) and the websocket-client package (pip install websocket-client),
neither a dependency of causalpos. Writes a screenshot of every result and of the rule graph to OUT_FOLDER
and check.json; exits 1 unless every PNG is whole inside the window (its top and bottom visible, as a
reader cannot scroll the report's viewer) and every PDF's data URL is under Chromium's 2 MB limit
(a larger one shows an empty panel, about:blank#blocked). Steps: docs/workflow.md#report.
"""

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket

DATA_URL_LIMIT = 2 * 1024 * 1024  # Chromium blocks larger data: URLs in frames
PORT = 9333
FIND_APP = """window.__app = (() => { const el = document.querySelector('#app');
    let f = el[Object.keys(el).find(k => k.startsWith('__reactContainer$'))].stateNode.current;
    while (f && !(f.stateNode && f.stateNode.setView)) f = f.child; return f.stateNode; })(); 1"""
IMAGE_BOX = """(() => { const img = Array.from(document.images).find(i => i.src === results[PATH].data_uri);
    if (!img) return null; const r = img.getBoundingClientRect();
    return [Math.round(r.top), Math.round(r.bottom), img.naturalWidth, img.naturalHeight, innerHeight]; })()"""


class Page:
    def __init__(self, url: str):
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

    def shot(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))


def main(report: str, out: str, size: str = "1280x800") -> int:
    width, height = (int(x) for x in size.split("x"))
    os.makedirs(out, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="check-report-")
    browser = subprocess.Popen(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
                                f"--remote-debugging-port={PORT}", f"--user-data-dir={profile}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                page = Page(f"http://127.0.0.1:{PORT}/json")
                break
            except OSError:
                time.sleep(0.3)
        page.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        page.call("Page.enable")
        page.call("Page.navigate", url="file://" + os.path.abspath(report))
        for _ in range(120):  # a report of many MB takes a while to parse
            if page.js("document.readyState === 'complete' && !!document.querySelector('#app')"
                       " && typeof results !== 'undefined'"):
                break
            time.sleep(1)
        time.sleep(2)
        page.js(FIND_APP)
        entries = page.js("Object.entries(results).map(([p, r]) => [p, r.mime_type, r.data_uri.length])")
        rows, failed = [], []
        views = {"image/png": "img", "image/svg+xml": "img", "application/pdf": "pdf", "text/html": "html"}
        for i, (path, mime, uri_len) in enumerate(sorted(entries)):
            view = views.get(mime)
            if view is None:
                continue
            page.js(f"window.__app.setView({{content: '{view}', contentPath: results[{json.dumps(path)}].data_uri, "
                    f"resultPath: {json.dumps(path)}}}); 1")
            time.sleep(1.0 if view == "img" else 2.5)
            page.shot(f"{out}/{i:02d}_{path.replace('/', '_')}.png")
            if view == "img":
                box = page.js(IMAGE_BOX.replace("PATH", json.dumps(path)))
                ok = box is not None and box[0] >= 0 and box[1] <= box[4] and box[2] > 0
            else:
                box, ok = None, uri_len < DATA_URL_LIMIT
            rows.append({"path": path, "view": view, "data_url_bytes": uri_len, "image_box": box, "ok": ok})
            print("ok  " if ok else "FAIL", view, f"{uri_len / 1e6:5.2f} MB", path, box or "")
            if not ok:
                failed.append(path)
        page.js("window.__app.setView({content: 'rulegraph', navbarMode: 'category'}); 1")
        for _ in range(60):  # vega draws the graph asynchronously: wait for its canvas or svg
            if page.js("!!document.querySelector('#rulegraph canvas, #rulegraph svg')"):
                break
            time.sleep(0.5)
        time.sleep(1)
        page.shot(f"{out}/rulegraph.png")
        with open(f"{out}/check.json", "w") as f:
            json.dump({"window": [width, height], "results": rows, "failed": failed}, f, indent=1)
        print(f"{len(rows) - len(failed)} of {len(rows)} results whole in a {size} window; failed: {failed}")
        return 1 if failed else 0
    finally:
        browser.terminate()
        browser.wait()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
