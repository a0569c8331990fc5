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


async def test_a_trusted_strategy_whose_module_fails_leaves_python_to_its_grammar_and_is_said_once(
        tmp_path: Path) -> None:
    from codeloupe.cli import main

    repo = tmp_path / "repo"
    billing = repo / "billing.py"
    billing.parent.mkdir(parents=True)
    billing.write_text("def refund_invoice(invoice_id):\n    return 'zanzibar-refund'\n")
    strategy = repo / ".codeloupe" / "strategies" / "py.py"  # EXTENSIONS is a literal: it loads without running
    strategy.parent.mkdir(parents=True)
    strategy.write_text('EXTENSIONS = (".py",)\nTABLE = 1 / 0\n\n\ndef chunk(text, lines):\n    return [(1, len(lines))]\n')
    assert main(["trust", "--strategy", str(strategy)]) == 0
    client = await start_server([repo], options={"trusted": True})

    def said() -> list[str]:
        return [m.message for m in client.messages if m.type == lsp.MessageType.Warning and str(strategy) in m.message]

    try:
        await client.wait_ready()
        found = await client.search_until("zanzibar refund invoice", lambda r: bool(r["core"]), "billing.py")
        hit = found["core"][0]  # chunked by the Python grammar, not by the strategy (nor into line windows)
        assert hit["symbols"] == ["refund_invoice"] and hit["chunks"][0]["kind"] != "block"
        await client.wait_until(said, "the strategy's load warning")
        billing.write_text(billing.read_text() + "\n\ndef void_invoice(invoice_id):\n    return 'zanzibar-void'\n")
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=billing.as_uri())))
        await client.search_until("zanzibar void invoice", lambda r: "void_invoice" in r["core"][0]["symbols"],
                                  "the saved file")
        [warning] = said()  # once, though every .py file indexed since failed the same way
        assert "failed to load (ZeroDivisionError: division by zero)" in warning
    finally:
        await stop_server(client)
