#!/usr/bin/env bash
# Fresh machine to the full test suite: install everything, start the services the
# integration tests need (libvirtd + QEMU, MariaDB, RabbitMQ, the Nova control plane),
# run lint, types, layer contracts and every test, then stop the services.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test

stop_services() {
    bash tests/e2e/stack/stack.sh stop || true
    bash .ci/services/libvirtd.sh stop || true
}
trap stop_services EXIT

bash .ci/services/libvirtd.sh start
bash tests/e2e/stack/stack.sh start

.venv/bin/ruff check nova_orphans tests benchmarks
.venv/bin/ruff format --check nova_orphans tests benchmarks
.venv/bin/mypy
.venv/bin/lint-imports
# The documentation builds, warnings as errors (doc/source; the references come from the code).
.venv/bin/sphinx-build -W -q -b html doc/source doc/build/html
# Every integration test must run: a missing service is a failure here, not a skip.
NOVA_ORPHANS_REQUIRE_SERVICES=1 .venv/bin/pytest -ra "$@"
