#!/usr/bin/env bash
# Fresh machine to the full test suite: install everything, start the services the
# integration tests need (libvirtd + QEMU, MariaDB, RabbitMQ, the Nova control plane),
# run lint, types, layer contracts and every test, then stop the services.
#   scripts/test.sh           the full run (what CI runs)
#   scripts/test.sh --unit    no services: lint, types, layer contracts and tests/unit (minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
UNIT=0
[ "${1:-}" = "--unit" ] && UNIT=1 && shift

stop_services() {
    bash tests/e2e/stack/stack.sh stop || true
    bash .ci/services/libvirtd.sh stop || true
}

if [ "$UNIT" = 1 ]; then
    bash scripts/setup.sh
    .venv/bin/pip install -q -c constraints.txt -e '.[test]'
else
    bash scripts/setup.sh --test
    trap stop_services EXIT
    bash .ci/services/libvirtd.sh start
    bash tests/e2e/stack/stack.sh start
fi

.venv/bin/ruff check nova_orphans tests benchmarks deploy/kolla/kolla_start \
    deploy/kolla/healthcheck_nova_orphans
.venv/bin/ruff format --check nova_orphans tests benchmarks deploy/kolla/kolla_start \
    deploy/kolla/healthcheck_nova_orphans
.venv/bin/mypy
.venv/bin/lint-imports
# The Ansible collection, linted in place (its own .ansible-lint: production profile).
(cd deploy/ansible/ansible_collections/nova_orphans/fleet &&
    PATH="$OLDPWD/.venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$OLDPWD/deploy/ansible" ansible-lint -q)
# The documentation builds, warnings as errors (doc/source; the references come from the code).
.venv/bin/sphinx-build -W -q -b html doc/source doc/build/html
if [ "$UNIT" = 1 ]; then
    # NOTE: a unit test whose external tool (promtool, jq, systemd-analyze) is missing skips here.
    exec .venv/bin/pytest -ra tests/unit "$@"
fi
# Every integration test must run: a missing service is a failure here, not a skip.
NOVA_ORPHANS_REQUIRE_SERVICES=1 .venv/bin/pytest -ra "$@"
