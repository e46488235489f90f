"""Make docs/report.png: the HTML report of the bundled small CNN validated with a plugin whose
LeakyRelu mapping drops ``alpha``, so the page shows a first divergence.

Run from the checkout: ``.venv/bin/python scripts/report_screenshot.py`` (needs playwright and
Debian's chromium, as the browser test does).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = '''
import opbridge as ob

@ob.mapping(ob.Framework.ONNX, "LeakyRelu", since_opset=6, override=True)
def leaky_without_alpha(node, g):
    return g.op("LeakyRelu", [g.input(0)])   # alpha dropped: the IR default (0.01) is used
'''
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(out: Path = ROOT / "docs" / "report.png") -> None:
    from playwright.sync_api import sync_playwright

    from opbridge.examples import write_small_cnn_onnx

    with tempfile.TemporaryDirectory() as tmp:
        model = write_small_cnn_onnx(Path(tmp) / "small_cnn.onnx", seed=0)
        plugin = Path(tmp) / "leaky_without_alpha.py"
        plugin.write_text(PLUGIN)
        page_path = Path(tmp) / "report.html"
        subprocess.run([sys.executable, "-m", "opbridge", "validate", Path(model).name, "--plugin",
                        plugin.name, "--html", page_path.name], cwd=tmp, check=False, capture_output=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(page_path.as_uri())
            page.screenshot(path=str(out), full_page=True)
            browser.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
