#!/usr/bin/env bash
# Fresh machine to the full test suite: install everything, start the services the
# integration tests need (libvirtd + QEMU, MariaDB, RabbitMQ, the OpenStack control plane),
# run lint, types, layer contracts, the docs and every test, then stop the services.
#   scripts/test.sh           the full run (what CI runs)
#   scripts/test.sh --unit    no services: lint, types, layer contracts and tests/unit (minutes)
# Arguments after those go to pytest (both sessions of the full run).
#
# The full run, phase by phase (docs/testing.md has their times):
#   install      scripts/setup.sh --test --no-stack: system packages and .venv
#   stack        in the background from then on: the stack's venvs (tests/e2e/stack/install.sh),
#                libvirtd (.ci/services/libvirtd.sh start), the stack (stack.sh start, which
#                returns once every service answers); its output is printed when it ends
#   ruff, format, mypy, contracts, ansible-lint, docs
#   isolated     pytest -m "not serial" under pytest-xdist: the tests that share nothing
#   serial       once the stack is up: pytest -m serial, one session (tests/conftest.py marks
#                serial every test of tests/e2e and tests/ansible and every one that uses the
#                real libvirtd, the stack or the loopback sshd); the two sessions together
#                run every test once
#   stop         on any exit: the stack and libvirtd
# Every phase runs even when an earlier one failed (the serial one only on a stack that came
# up); the run fails when any did, a pytest session that ran no test (exit 5) included, and
# under NOVA_ORPHANS_REQUIRE_SERVICES=1 a skipped test fails its session.
set -euo pipefail
cd "$(dirname "$0")/.."
UNIT=0
[ "${1:-}" = "--unit" ] && UNIT=1 && shift
# pytest-xdist's workers for the isolated tests: one more than the cores (many of them
# wait on a subprocess or a timeout).
WORKERS=${NOVA_ORPHANS_TEST_WORKERS:-$(( $(nproc) + 1 ))}
LINTED="nova_orphans tests benchmarks deploy/kolla/kolla_start deploy/kolla/healthcheck_nova_orphans"

T0=$(date +%s)
SUMMARY=()
FAILED=()
# phase NAME COMMAND...: run it, print and record its duration and outcome; never exits.
phase() {
    local name=$1 t rc=0
    shift
    t=$(date +%s)
    printf '\n=== %s: %s\n' "$name" "$*"
    "$@" || rc=$?
    record "$name" "$(( $(date +%s) - t ))" "$rc"
}
record() {  # name seconds exit-code|why-not-run
    local outcome=ok
    case $3 in
        0) ;;
        *[!0-9]*) outcome="FAILED ($3)"; FAILED+=("$1") ;;
        *) outcome="FAILED (exit $3)"; FAILED+=("$1") ;;
    esac
    SUMMARY+=("$(printf '%-13s %5s s  %s' "$1" "$2" "$outcome")")
    printf '=== %s: %s s, %s\n' "$1" "$2" "$outcome"
}
summary() {
    printf '\n=== phases (wall clock; stack ran in the background)\n'
    printf '%s\n' "${SUMMARY[@]}"
    printf '%-13s %5s s\n' total "$(( $(date +%s) - T0 ))"
}

lint() {
    # shellcheck disable=SC2086
    phase ruff .venv/bin/ruff check $LINTED
    # shellcheck disable=SC2086
    phase format .venv/bin/ruff format --check $LINTED
    phase mypy .venv/bin/mypy
    phase contracts .venv/bin/lint-imports
    # The Ansible collection, linted in place (its own .ansible-lint: production profile).
    phase ansible-lint bash -c 'cd deploy/ansible/ansible_collections/nova_orphans/fleet &&
        PATH="$OLDPWD/.venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$OLDPWD/deploy/ansible" ansible-lint -q'
    # The documentation builds, warnings as errors (docs; the references come from the code).
    phase docs .venv/bin/sphinx-build -W -q -b html docs docs/_build/html
}

if [ "$UNIT" = 1 ]; then
    bash scripts/setup.sh
    .venv/bin/pip install -q -c constraints.txt -e '.[test]'
    lint
    # NOTE: a unit test whose external tool (promtool, jq, systemd-analyze) is missing skips here.
    phase unit .venv/bin/pytest -ra -n "$WORKERS" tests/unit "$@"
    summary
    [ ${#FAILED[@]} = 0 ] || { echo "failed: ${FAILED[*]}" >&2; exit 1; }
    exit 0
fi

# ---------------------------------------------------------------------------- full run
STACK_LOG=.stack/test-stack.log
STACK_PID=
STACK_T0=
# The background phase: its own process group (job control on), so that an early exit can end
# it whole; stack.sh's services run in sessions of their own and stop with stack.sh stop.
stack_phase() {
    local t
    t=$(date +%s)
    bash tests/e2e/stack/install.sh || return
    echo "stack: venvs installed in $(( $(date +%s) - t )) s"
    t=$(date +%s)
    bash .ci/services/libvirtd.sh start || return
    echo "stack: libvirtd answering in $(( $(date +%s) - t )) s"
    t=$(date +%s)
    bash tests/e2e/stack/stack.sh start || return
    echo "stack: up in $(( $(date +%s) - t )) s"
}
stop_services() {
    local rc=$? t
    trap - EXIT
    if [ -n "$STACK_PID" ] && kill -0 "$STACK_PID" 2>/dev/null; then
        echo "=== stack: still starting, ended" >&2
        kill -TERM -- "-$STACK_PID" 2>/dev/null || true
        wait "$STACK_PID" 2>/dev/null || true
        cat "$STACK_LOG" 2>/dev/null || true
    fi
    t=$(date +%s)
    bash tests/e2e/stack/stack.sh stop || true
    bash .ci/services/libvirtd.sh stop || true
    SUMMARY+=("$(printf '%-13s %5s s' stop "$(( $(date +%s) - t ))")")
    summary
    exit "$rc"
}
trap 'exit 130' INT
trap 'exit 143' TERM

phase install bash scripts/setup.sh --test --no-stack
[ ${#FAILED[@]} = 0 ] || { summary; exit 1; }

mkdir -p .stack
trap stop_services EXIT
STACK_T0=$(date +%s)
set -m
stack_phase >"$STACK_LOG" 2>&1 </dev/null &
STACK_PID=$!
set +m
printf '=== stack: started in the background (pid %s, output in %s)\n' "$STACK_PID" "$STACK_LOG"

lint
# The tests that share nothing, in parallel while the stack starts.
phase isolated env NOVA_ORPHANS_REQUIRE_SERVICES=1 .venv/bin/pytest -ra -n "$WORKERS" -m "not serial" "$@"

t=$(date +%s)
rc=0
wait "$STACK_PID" || rc=$?
STACK_PID=
printf '\n=== stack output (%s)\n' "$STACK_LOG"
cat "$STACK_LOG"
record stack "$(( $(date +%s) - STACK_T0 ))" "$rc"
echo "=== (waited $(( $(date +%s) - t )) s for it after the isolated tests)"

if [ "$rc" = 0 ]; then
    # Every integration test must run: a missing service is a failure here, not a skip.
    phase serial env NOVA_ORPHANS_REQUIRE_SERVICES=1 .venv/bin/pytest -ra -m serial "$@"
else
    record serial 0 "not run: the stack did not come up"
fi

if [ ${#FAILED[@]} -gt 0 ]; then
    echo "failed: ${FAILED[*]}" >&2
    exit 1
fi
