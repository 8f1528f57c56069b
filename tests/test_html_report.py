"""`moesim design --out report.html`: one self-contained file that a real headless Chromium
renders with every figure decoded (an <img> with naturalWidth > 0, an inline <svg> with a size).

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it). Without it this test fails
rather than skip, unless MOESIM_NO_BROWSER=1 says the browser is knowingly absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from moesim.cli import main

DATA = Path(__file__).parent / "data" / "design"

PROBE = """<script>window.addEventListener('load', () => {
  const q = (sel) => [...document.querySelectorAll(sel)];
  const imgs = [...document.images].map(i => i.complete ? i.naturalWidth : -1);
  const svgs = q('svg').map(s => Math.round(s.getBoundingClientRect().width));
  const external = q('[src],[href]').map(e => e.getAttribute('src') || e.getAttribute('href'))
    .filter(u => !u.startsWith('data:') && !u.startsWith('#'));
  document.body.setAttribute('data-probe', JSON.stringify({imgs, svgs, external}));
});</script>"""


def browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    if os.environ.get("MOESIM_NO_BROWSER") == "1":
        pytest.skip("MOESIM_NO_BROWSER=1: no headless browser here")
    pytest.fail("no chromium: apt-get install chromium (or set MOESIM_NO_BROWSER=1)")


def render(page: Path, tmp: Path) -> dict:
    """Load ``page`` (plus a probe script) in headless Chromium; what the probe saw."""
    probed = tmp / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    found = re.search(r"data-probe=\"([^\"]*)\"", dom)
    assert found, dom[:500]
    return json.loads(found.group(1).replace("&quot;", '"'))


def test_design_html_report_renders_in_chromium(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = CliRunner().invoke(main, [  # a small design: a 4-layer Mixtral on 64 H100
        "design", "--model", str(DATA / "mixtral-4l.json"), "--gpus", "64", "--gpu", "H100",
        "--global-batch", "256", "--simulate-min", "2", "--simulate-max", "2", "--max-tp", "1",
        "--max-cp", "1", "-j", "1", "--quiet", "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert (tmp_path / "report.json").exists() and "<h2>candidates" in text
    assert "layout comparison" in text.lower() and "<pre>" in text  # figures and the report
    seen = render(out, tmp_path)
    assert seen["imgs"] and all(w > 0 for w in seen["imgs"]), seen
    assert seen["svgs"] and all(w > 0 for w in seen["svgs"]), seen
    assert seen["external"] == []  # nothing to fetch: readable offline
