#!/usr/bin/env bash
# Fresh machine to a working demo: install, then audit the embedded simulated cloud.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/nova-orphans demo "$@"
