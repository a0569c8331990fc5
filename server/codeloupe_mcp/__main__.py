"""`python -m codeloupe_mcp [PATH]`: the same as `codeloupe mcp [PATH]`."""

import sys

from codeloupe.cli import main

if __name__ == "__main__":
    sys.exit(main(["mcp", *sys.argv[1:]]))
