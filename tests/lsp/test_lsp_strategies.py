"""The real server over stdio on a repository that ships a chunk strategy: the file is never imported (not even
in a folder the editor trusts, since editor trust covers settings, not code), and the user is told why."""

from __future__ import annotations

from pathlib import Path

from lsp_helpers import start_server, stop_server
from lsprotocol import types as lsp


async def test_a_shipped_strategy_file_is_not_run_and_the_user_is_warned(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    repo = tmp_path / "repo"
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('x')\nEXTENSIONS = ('.zog',)\n")
    (repo / "a.zog").write_text("rule a\n")
    client = await start_server([repo], options={"trusted": True})
    try:
        await client.wait_ready()
        await client.request("codeloupe/search", {"query": "rule"})
        warnings = [m.message for m in client.messages if m.type == lsp.MessageType.Warning]
        assert any("not loading the chunk strategy" in w and str(strategy) in w for w in warnings), warnings
    finally:
        await stop_server(client)
    assert not marker.exists()
