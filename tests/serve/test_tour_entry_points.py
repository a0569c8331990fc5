"""MCP's `codeloupe://tour`, HTTP's `/v1/tour` and `codeloupe tour --json` list the same entry points: MCP kept the 30 strongest and
counted the rest, `/v1/tour` returned every one. The cut is `Workspace.tour`'s, and the answer is built by one
serving function (`WarmWorkspace.tour`) for both; `/v1/tour` takes `entry_points` to list more and `limit` for
the names, and so does MCP's `codeloupe://tour{?entry_points,limit}`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client

from codeloupe.api import MAX_TOUR_ENTRY_POINTS, TOUR_ENTRY_POINTS
from codeloupe.cli import main as cli_main
from codeloupe_mcp.server import build_server
from codeloupe_serving.warm import WarmWorkspace

SCRIPTS = TOUR_ENTRY_POINTS + 5
ENTRY_POINTS = SCRIPTS + 2  # the served project's own two `__main__` guards too


def add_guard_scripts(project: Path) -> None:
    """Scripts with a `__main__` guard each, as a tree with no manifest has (the standard library)."""
    (project / "tools").mkdir()
    for i in range(SCRIPTS):
        (project / f"tools/script_{i:02}.py").write_text(
            f"def run_{i}():\n    return {i}\n\n\nif __name__ == '__main__':\n    run_{i}()\n")


async def test_mcp_http_and_the_cli_list_the_same_entry_points(project: Path, serve,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    add_guard_scripts(project)
    warm = WarmWorkspace(project)
    try:
        async with Client(build_server(warm)) as client:
            mcp = json.loads((await client.read_resource("codeloupe://tour")).contents[0].text)
            mcp_listed = json.loads((await client.read_resource(f"codeloupe://tour?entry_points={ENTRY_POINTS}"))
                                    .contents[0].text)
            mcp_named = json.loads((await client.read_resource("codeloupe://tour?limit=1&entry_points=2"))
                                   .contents[0].text)
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    finally:
        warm.close()
    base = serve([project])
    http = httpx.get(f"{base}/v1/tour").json()
    not_shown = ENTRY_POINTS - TOUR_ENTRY_POINTS
    assert len(mcp["entry_points"]) == TOUR_ENTRY_POINTS and mcp["entry_points_not_shown"] == not_shown
    assert http["entry_points"] == mcp["entry_points"] and http["entry_points_not_shown"] == not_shown
    assert http["stops"] == mcp["stops"]
    assert http == mcp  # every field alike, `notes` too
    assert cli_main(["tour", str(project), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == http  # `codeloupe tour --json` had no `notes`

    listed = httpx.get(f"{base}/v1/tour", params={"entry_points": ENTRY_POINTS}).json()
    assert mcp_listed == listed and "codeloupe://tour{?entry_points,limit}" in templates
    assert len(listed["entry_points"]) == ENTRY_POINTS and listed["entry_points_not_shown"] == 0
    assert listed["entry_points"][:TOUR_ENTRY_POINTS] == mcp["entry_points"]  # the strongest first, as cut
    named = httpx.get(f"{base}/v1/tour", params={"limit": 1, "entry_points": 2}).json()
    assert mcp_named == named and len(named["stops"]) == 1 and named["stops"] == http["stops"][:1]
    for out_of_bounds in (0, MAX_TOUR_ENTRY_POINTS + 1):
        refused = httpx.get(f"{base}/v1/tour", params={"entry_points": out_of_bounds})
        assert refused.status_code == 422, out_of_bounds
