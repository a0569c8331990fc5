"""What the MCP server and the HTTP API serve alike: warm workspaces (opened once, refreshed before each call,
answering with notes while their first index runs) and the wait for a first index. It stands on
`codeloupe.api` only, like the servers above it."""
