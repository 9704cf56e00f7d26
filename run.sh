#!/usr/bin/env bash
# Set up (first time) and launch serve-console. Arguments go to serve-console, e.g.
#   ./run.sh                       # local cluster, empty
#   ./run.sh --demo batched        # deploy the batched demo and put load on it
#   ./run.sh --address http://head:8265
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
scripts/qt-system-libs.sh
exec .venv/bin/serve-console "$@"
