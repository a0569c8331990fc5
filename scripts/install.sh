#!/usr/bin/env bash
# Everything the suite and the golden gate need, installed into the repo from a fresh clone: .venv at the
# versions constraints.txt pins (regenerate it with scripts/lock.sh when dependencies change), the VS Code
# client's node_modules from its lock file, and Debian's chromium for the page-rendering tests (when root).
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
