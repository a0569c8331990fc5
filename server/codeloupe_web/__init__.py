"""codeloupe over HTTP: one ASGI app (`codeloupe serve`) holding warm workspaces, with a JSON API, the MCP
streamable-HTTP endpoint, and a small search page. It stands on `codeloupe.api` only, like the language
server."""
