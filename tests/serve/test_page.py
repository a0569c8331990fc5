"""The search page in headless Chromium against a real index: it renders a real query's bundle."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=10000",
         *args], capture_output=True, text=True, timeout=120, check=True)


def test_the_page_renders_the_bundle_of_a_real_query(project: Path, serve, tmp_path: Path) -> None:
    # scripts/test.sh installs Debian's chromium; without it this fails rather than passing unchecked.
    assert CHROMIUM, "needs Debian chromium (apt-get install -y chromium; scripts/test.sh does this as root)"
    base = serve([project])
    url = f"{base}/?q=how+are+bearer+tokens+checked+against+the+session+store"
    dom = chromium(tmp_path / "profile", "--dump-dom", url).stdout
    core = dom[dom.index('id="core"'):dom.index('id="related"')]
    assert 'id="core" hidden' not in dom  # the CORE section is shown
    assert "1. app/" in core and "TokenChecker" in core
    assert '<span class="kw">def</span>' in core  # code is highlighted
    assert '<span class="ln">12</span>' in core  # with its real line numbers
    assert "lanes: " in dom and 'href="/graph"' in dom

    shot = tmp_path / "page.png"
    chromium(tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1100,900", url)
    image = shot.read_bytes()
    assert image.startswith(b"\x89PNG") and len(image) > 20_000  # a blank page compresses to a few KB


def test_the_page_sends_the_token_from_its_url_fragment(project: Path, serve, tmp_path: Path) -> None:
    from codeloupe_web.guard import GuardConfig

    assert CHROMIUM, "needs Debian chromium (apt-get install -y chromium; scripts/test.sh does this as root)"
    token = "t0ken-" + "x" * 40
    base = serve([project], guard=GuardConfig(token=token))
    dom = chromium(tmp_path / "profile", "--dump-dom", f"{base}/?q=escape+html#token={token}").stdout
    assert "1. app/render.py" in dom and "escape_html" in dom
    refused = chromium(tmp_path / "profile2", "--dump-dom", f"{base}/?q=escape+html").stdout
    assert "1. app/render.py" not in refused and "bearer token is required" in refused
