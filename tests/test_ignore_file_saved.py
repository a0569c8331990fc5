"""Saving an ignore file re-decides which files belong in the index: the editor's save path walks the workspace
again, so newly ignored files leave the index and search, and files no longer ignored join them."""

from __future__ import annotations

from pathlib import Path


def test_a_saved_gitignore_or_codeloupeignore_takes_effect_at_once(tmp_path: Path, lexical_workspace) -> None:
    (tmp_path / "app.py").write_text("def handle_payment():\n    return 'payment handled'\n")
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "payment_stub.py").write_text("def payment_stub():\n    return 'payment stub'\n")
    ws = lexical_workspace(tmp_path)
    assert "generated/payment_stub.py" in [f.path for f in ws.search("payment").files]

    (tmp_path / ".gitignore").write_text("generated/\n")
    report = ws.update_files([tmp_path / ".gitignore"])
    assert report.files_deleted == 1
    assert [f.path for f in ws.search("payment").files] == ["app.py"]

    (tmp_path / ".gitignore").write_text("")
    (tmp_path / ".codeloupeignore").write_text("app.py\n")
    ws.update_files([tmp_path / ".gitignore", tmp_path / ".codeloupeignore"])
    assert [f.path for f in ws.search("payment").files] == ["generated/payment_stub.py"]

    # Any other file saved keeps the fast path: only that file is read.
    (tmp_path / "generated" / "payment_stub.py").write_text("def payment_stub():\n    return 'paid'\n")
    report = ws.update_files([tmp_path / "generated" / "payment_stub.py"])
    assert (report.files_seen, report.files_indexed) == (1, 1)
