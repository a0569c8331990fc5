"""Property-based requests generated from the served OpenAPI schema (hypothesis-jsonschema values): whatever a
client sends, valid by the schema or not, the answer is never a server error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema


def resolve(node: Any, schema: dict) -> Any:
    """The schema with every local `$ref` replaced by what it points at (the request models are not recursive)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target: Any = schema
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            return resolve(target, schema)
        return {key: resolve(value, schema) for key, value in node.items()}
    if isinstance(node, list):
        return [resolve(item, schema) for item in node]
    return node


def operations(schema: dict) -> list[tuple[str, str, dict]]:
    """(method, path, JSON schema of its query parameters or body) for every operation."""
    found = []
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            if "requestBody" in op:
                body = op["requestBody"]["content"]["application/json"]["schema"]
                found.append((method, path, resolve(body, schema)))
                continue
            params = [p for p in op.get("parameters", []) if p["in"] == "query"]
            found.append((method, path, {
                "type": "object", "additionalProperties": False,
                "properties": {p["name"]: resolve(p["schema"], schema) for p in params},
                "required": [p["name"] for p in params if p.get("required")]}))
    return found


def objects(schema: dict) -> st.SearchStrategy[dict]:
    """Objects valid by `schema`: each property's values from hypothesis-jsonschema, the object assembled here
    (its object strategy does not run on the Hypothesis this project pins)."""
    properties = {name: from_schema(sub) for name, sub in schema.get("properties", {}).items()}
    required = set(schema.get("required", []))
    return st.fixed_dictionaries({k: v for k, v in properties.items() if k in required},
                                 optional={k: v for k, v in properties.items() if k not in required})


def query_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_generated_requests_never_get_a_server_error(project: Path, serve) -> None:
    base = serve([project])
    schema = httpx.get(f"{base}/openapi.json").json()
    ops = operations(schema)
    assert len(ops) >= 10
    junk_names = sorted({name for _, _, s in ops for name in s.get("properties", {})} | {"zzz"})
    client = httpx.Client(base_url=base, timeout=60)

    @settings(max_examples=300, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        method, path, op_schema = data.draw(st.sampled_from(ops), label="operation")
        if data.draw(st.booleans(), label="follow the schema"):
            values = data.draw(objects(op_schema), label="values")
        else:  # anything at all: wrong types, unknown names, odd text
            values = data.draw(st.dictionaries(st.sampled_from(junk_names), st.one_of(
                st.text(max_size=60), st.integers(), st.booleans(), st.floats(allow_nan=True))), label="junk")
        if method == "post":  # sent as Python writes it: NaN and Infinity included (httpx would refuse them)
            answer = client.post(path, content=json.dumps(values), headers={"content-type": "application/json"})
        else:
            params = {k: query_value(v) for k, v in values.items() if v is not None}
            answer = client.get(path, params=params)
        assert answer.status_code < 500, (method, path, values, answer.text[:500])

    try:
        check()
    finally:
        client.close()


def test_the_http_reference_is_generated_from_the_current_schema() -> None:
    import subprocess
    import sys

    from serve_project import REPO, subprocess_env

    check = subprocess.run([sys.executable, str(REPO / "scripts/http_docs.py"), "--check"], env=subprocess_env(),
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
