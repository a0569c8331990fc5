"""Which files are tests, by their path: one rule for the ranking's file kinds (`search.file_kind`), the graph (a
route between code does not detour through tests; code before tests when a name is defined in both), the entry
points and the tour (a test is neither)."""

from __future__ import annotations

import re

_TEST_PATH = re.compile(
    r"(^|/)(tests?|specs?|__tests__|testing|fixtures?|testdata|e2e)(/|$)|(^|/)test_[^/]*$|_test\.[a-z]+$"
    r"|\.(test|spec)\.[a-z]+$|_spec\.rb$|(^|/)conftest\.py$"
)


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path.lower()))
