"""codeloupe for coding agents: an MCP server over the warm engine (`codeloupe mcp`, and `/mcp` under
`codeloupe serve`). It stands on `codeloupe.api` only, like the language server."""
