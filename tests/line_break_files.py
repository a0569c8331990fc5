"""Files with every kind of line break before their definitions, and the editor's rule for lines (shared by
the CLI's and the language server's tests)."""

from __future__ import annotations

import re
from pathlib import Path

# A body long enough that a small chunk budget (`--chunk-budget 100`) gives each definition chunks of its own.
BODY = "return value_of_the_definition_standing_here + another_name_to_count + a_third_name"
# A GNU-style page break on a line of its own, U+2028 inside a string, CRLF lines and a lone CR line.
PYTHON = ("import os\n\n\x0c\n"
          f"def first_helper():\n    {BODY}\n\n"
          "x = 'a\u2028b'\n\n"
          f"def after_separator():\n    {BODY}\r\n\r\n"
          f"def after_crlf():\r\n    {BODY}\n\r"
          f"def after_lone_cr():\n    {BODY}\n")
# U+2028 in a string literal, a form feed, U+2029 then a lone CR, and CRLF lines.
JAVASCRIPT = (f"const s = 'a\u2028b';\n\x0c\nfunction jsAfterBreaks() {{\n  {BODY};\n}}\n\u2029\r"
              f"function jsAfterPara() {{\r\n  {BODY};\r\n}}\n")
FILES = {"mod.py": PYTHON, "app.js": JAVASCRIPT}
DEFINITIONS = {"first_helper": ("mod.py", 4), "after_separator": ("mod.py", 9), "after_crlf": ("mod.py", 12),
               "after_lone_cr": ("mod.py", 15), "jsAfterBreaks": ("app.js", 3), "jsAfterPara": ("app.js", 7)}


def editor_lines(text: str) -> list[str]:
    """The lines an editor shows, breaks kept: the LSP specification's rule, written out on its own."""
    return re.findall("[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+", text)


def write_files(root: Path, files: dict[str, str] = FILES) -> Path:
    """`files` under `root`, byte for byte (no newline translation)."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode("utf-8"))
    return root
