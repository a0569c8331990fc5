"""The docs set's code-mode questions with the names they were built from written back as plain words.

    python bench/devsets/docs_words.py [--pkgs /work/corpora/pkgs] [--sets /work/corpora/devsets]

`docs_pairs.py` removes from each ``short`` question the code spans that name the gold file's definitions (they
would hand over the answer), so no lane can match those names at all. A person asking about `FileStorage`
writes "file storage": this set takes the same paragraphs and sentences and writes each removed span as its
name's words (`name_words`), the way a hand-written question names what it asks about. Same trees
(SETS/trees/docs), same ids with ``-words-`` for ``-short-``, same gold; writes docswords.dev.json and
docswords.test.json beside docs.*.json (run `docs_pairs.py` first). Score it with `--corpora SETS/trees/docs`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from common import DEVSETS_DIR, source_files
from docs_pairs import definitions, paragraphs, short_query

from packages import DEFAULT_DIR, load_packages, repo_path

_NOTE = re.compile(r"from (?P<path>.+) lines (?P<first>\d+)-\d+ ")


def words_set(docs_set: dict, pkgs_dir: Path) -> dict:
    """`docs_set` (docs.SPLIT.json's content) with its short questions rebuilt, names as words."""
    packages = {p.id: p for p in load_packages()}
    corpora = []
    for corpus in docs_set["corpora"]:
        shorts = [q for q in corpus["queries"] if q["kind"] == "short"]
        if not shorts:
            continue
        files = dict(source_files(repo_path(packages[corpus["id"]], pkgs_dir), []))
        defined = definitions(files)
        queries = []
        for q in shorts:
            note = _NOTE.match(q["note"])
            path, first = (note.group("path"), int(note.group("first")) - 1) if note else ("", -1)
            paragraph = next((p for p in paragraphs(path, files[path]) if p.first == first), None) \
                if path in files else None
            rebuilt = short_query(paragraph, defined, names_as_words=True) if paragraph else None
            if rebuilt is None or rebuilt[1] != q["gold_files"][0]:
                # the package or docs_pairs.py changed since docs.SPLIT.json was built: say so, keep the rest
                print(f"{q['id']}: its paragraph no longer gives the question; left out", file=sys.stderr)
                continue
            queries.append({**q, "id": q["id"].replace("-short-", "-words-"), "query": rebuilt[0]})
        if queries:
            corpora.append({**corpus, "queries": queries})
    return {**docs_set, "corpora": corpora}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pkgs", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--sets", type=Path, default=DEVSETS_DIR)
    args = parser.parse_args(argv)
    for split in ("dev", "test"):
        built = words_set(json.loads((args.sets / f"docs.{split}.json").read_text()), args.pkgs)
        out = args.sets / f"docswords.{split}.json"
        out.write_text(json.dumps(built, indent=1) + "\n")
        print(f"{split}: {sum(len(c['queries']) for c in built['corpora'])} questions over "
              f"{len(built['corpora'])} packages -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
