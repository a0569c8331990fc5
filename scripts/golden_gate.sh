#!/usr/bin/env bash
# The golden gate: fetch the four public corpora with the team's script, run the public golden set through
# the engine as a user gets it (lexical and symbol lanes plus the shipped MiniLM model), print the table, and
# fail when R@1 drops below 0.88 or bundle recall below 1.00. .ci/run calls it after the test suite; it uses
# the .venv scripts/test.sh made. Corpora and index live under .golden/ (ignored), so reruns skip the fetch.
#   CODELOUPE_SHARED   the team's shared/ folder (default ../shared, where CI puts it)
#   GOLDEN_CORPORA     corpora already fetched elsewhere (default .golden/corpora)
#   CODELOUPE_PYTHON   the interpreter with codeloupe installed (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."

SHARED=${CODELOUPE_SHARED:-../shared}
CORPORA=${GOLDEN_CORPORA:-.golden/corpora}
MIN_R1=0.88
MIN_BUNDLE_RECALL=1.0

started=$SECONDS
bash "$SHARED/golden/fetch_corpora.sh" "$SHARED/golden/public.json" "$CORPORA"
fetched=$SECONDS
"${CODELOUPE_PYTHON:-.venv/bin/python}" -m codeloupe eval "$SHARED/golden/public.json" --corpora "$CORPORA" --cache-dir .golden/cache \
  --min-r1 "$MIN_R1" --min-bundle-recall "$MIN_BUNDLE_RECALL"
echo "golden gate passed: fetch $((fetched - started))s, eval $((SECONDS - fetched))s"
