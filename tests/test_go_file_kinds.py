"""A Go convention among the file kinds: a package's `doc.go` holds only its documentation comment, which
describes the implementation in its own words, so a question about how something works gets the implementation
first, and the package comment is still in the bundle (rule 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe.api import Workspace
from codeloupe.search import file_kind

TREE = {
    "doc.go": """\
        /*
        Package validator validates struct fields by their tags: a struct level validation runs after the
        field tags, so a struct level validation can compare fields; register a struct level validation for a
        type and it reports its errors beside the field errors.
        */
        package validator
        """,
    "struct_level.go": """\
        package validator

        // RegisterStructValidation registers a struct level validation for the types given.
        func (v *Validate) RegisterStructValidation(fn StructLevelFunc, types ...interface{}) {
            for _, t := range types {
                v.structLevelFuncs[reflect.TypeOf(t)] = fn
            }
        }
        """,
}


@pytest.mark.parametrize(("path", "language", "kind"), [
    ("examples/struct-level/main.go", "go", "example"), ("_examples/struct-level/main.go", "go", "example"),
    ("doc.go", "go", "example"), ("mock/doc.go", "go", "example"),
    ("_internal/parse.go", "go", ""), ("doc_test.go", "go", "test"), ("godoc.go", "go", ""),
    ("document.go", "go", ""), ("doc.py", "python", ""),
])
def test_what_counts_as_go_documentation_code(path: str, language: str, kind: str) -> None:
    assert file_kind(path, language) == kind


def test_a_question_gets_the_implementation_before_the_package_comment(
        make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(make_tree(TREE))
    # Before, the package comment came first.
    for question in ("how does struct level validation work", "how does a struct level validation compare fields"):
        paths = [h.path for h in ws.search(question).files]
        assert paths[0] == "struct_level.go", question
        assert "doc.go" in paths, question  # demoted, never dropped
