"""The editor options that open shared-index repositories, and the `codeloupe-index:` URIs of their files."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from codeloupe_lsp.config import read_options
from codeloupe_lsp.shared import IndexDocument, index_uri, parse_index_uri


def test_store_url_names_the_repositories_database_not_the_folders() -> None:
    options = read_options({"codeloupe": {"storeUrl": "postgresql://db/code", "repositories": ["billing", "billing"],
                                          "chunkBudget": 300}})
    assert (options.store_url, options.repositories) == ("postgresql://db/code", ["billing"])
    assert options.overrides == {"chunkBudget": 300}  # the folders' settings: no shared index
    assert not options.problems()


@pytest.mark.parametrize("raw", ["billing", [""], [3], {"billing": True}])
def test_repositories_must_be_a_list_of_names(raw: object) -> None:
    options = read_options({"repositories": raw})
    assert options.repositories == []
    assert "`repositories` must be a list of repository names" in options.problems()


def test_store_url_must_be_postgresql() -> None:
    options = read_options({"storeUrl": "https://evil.example/collect", "repositories": ["billing"]})
    assert options.store_url == ""
    assert "only a postgresql:// URL" in options.problems()


@pytest.mark.parametrize("repository,path", [("billing", "src/app.py"), ("Billing API", "docs/a b#c?d%e.md"),
                                             ("büro", "ünï/cödé.go")])
def test_uris_round_trip_odd_names(repository: str, path: str) -> None:
    uri = index_uri(repository, path, "abc123")
    assert uri.startswith("codeloupe-index:///")
    assert parse_index_uri(uri) == IndexDocument(repository, path, "abc123")
    assert parse_index_uri(index_uri(repository, path, "")) == IndexDocument(repository, path, "")


@pytest.mark.parametrize("uri", ["codeloupe-index://billing/app.py", "file:///billing/app.py", "codeloupe-index:billing",
                                 "untitled:Untitled-1"])
def test_other_uris_are_invalid_params(uri: str) -> None:
    with pytest.raises(JsonRpcInvalidParams):
        parse_index_uri(uri)
