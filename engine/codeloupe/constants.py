"""Values the command line's parsers state in their help, kept in a module that imports nothing: building the
parser (`codeloupe --help`, a mistyped command) must not import the engine (numpy, tree-sitter: about a second).
The engine's modules take them from here, so each has one definition."""

# Entry points a tour lists by default, strongest signal first: a tree with no manifest (the standard library)
# has hundreds of `__main__` guards, 34 KB of JSON before the names most files mention.
TOUR_ENTRY_POINTS = 30

# The kinds of a golden set's queries (`codeloupe eval --kinds`).
QUERY_KINDS = ("short", "symbol", "issue", "docs")
