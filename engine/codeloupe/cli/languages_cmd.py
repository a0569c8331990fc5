"""`codeloupe languages`: the grammars this build can parse (asked of tree-sitter-language-pack)."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("languages", help="list the languages this build can parse")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.chunk import available_languages, is_doc_language

    languages = available_languages()
    if args.json:
        print(json.dumps(languages))
        return 0
    print(f"{len(languages)} grammars (documents: markdown, rst, asciidoc and text are chunked as prose):")
    print(", ".join(name for name in languages if not is_doc_language(name)))
    return 0
