#!/usr/bin/env bash
# Set up (first time) and run the whole test suite: real Ray head, real Serve, Qt offscreen.
set -uo pipefail
cd "$(dirname "$0")"
scripts/setup.sh || exit 1
export QT_QPA_PLATFORM=offscreen
export SERVE_CONSOLE_SETTINGS="${SERVE_CONSOLE_SETTINGS:-$(mktemp -d)/settings.ini}"
# The consoles the tests start record their sessions here, not in the user's folder.
export SERVE_CONSOLE_SESSIONS="${SERVE_CONSOLE_SESSIONS:-$(mktemp -d)}"
.venv/bin/python -m pytest "$@"
rc=$?
# pytest's 5 means "no tests collected": with a filter that selects nothing that is a
# mistake in the command, not a pass, so say it plainly and fail.
if [ $rc -eq 5 ]; then
  echo "test.sh: no tests were collected (pytest exit 5)" >&2
fi
exit $rc
