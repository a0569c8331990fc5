"""Values the command line's parsers state in their help, kept in a module that imports nothing: building the
parser (`codeloupe --help`, a mistyped command) must not import the engine (numpy, tree-sitter: about a second).
The engine's modules take them from here, so each has one definition."""

# Entry points a tour lists by default, strongest signal first: a tree with no manifest (the standard library)
# has hundreds of `__main__` guards, 34 KB of JSON before the names most files mention.
TOUR_ENTRY_POINTS = 30
# A tour's entry points on request (`tour --entry-points`, /v1/tour, MCP, the editors): more than the default when
# a client wants them, never an unbounded list (a generated tree can hold thousands of `__main__` guards, each
# about 150 bytes of JSON).
MAX_TOUR_ENTRY_POINTS = 500
# The names a tour lists by default and at most on request (`tour --limit`, `/v1/tour?limit=`, MCP's
# `codeloupe://tour?limit=`, the language server's `codeloupe/tour` `limit`).
TOUR_NAMES = 20
MAX_TOUR_NAMES = 50

# The kinds of a golden set's queries (`codeloupe eval --kinds`).
QUERY_KINDS = ("short", "symbol", "issue", "docs")
