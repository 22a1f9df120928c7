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
#   in the background from then on, each phase as soon as what it needs is up (its output is
#   printed when the isolated tests are done and it ended):
#     stack          libvirtd (.ci/services/libvirtd.sh start), the stack's venvs
#                    (tests/e2e/stack/install.sh), the stack (stack.sh start, which returns
#                    once every service answers)
#     serial-libvirtd  once libvirtd answers, while the stack installs and starts: pytest -m
#                    "serial and not nova and libvirtd", the tests of the real libvirtd and QEMU
#     serial-stack   once the stack is up and serial-libvirtd ended (its guests would be
#                    found on lvhost's libvirt): pytest -m "serial and nova", tests/e2e
#   ruff, format, mypy, contracts, ansible-lint, docs
#   serial-sshd  in the background too, niced as the isolated tests: pytest -m "serial and
#                not nova and not libvirtd", the tests that share only the loopback sshd
#                (tests/ansible)
#   isolated     pytest -m "not serial" under pytest-xdist, at a lower CPU priority (nice):
#                the tests that share nothing; the serial ones wait on real services, the
#                critical path
#   stop         on any exit: the stack and libvirtd
# tests/conftest.py marks serial every test of tests/e2e and tests/ansible and every one that
# uses the real libvirtd, the stack or the loopback sshd, and each serial test by what it
# shares (nova, libvirtd): the four sessions together run every test once.
# Every phase runs even when an earlier one failed (a serial one only once its services came
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
record() {  # name seconds exit-code|why-not-run [started-at]
    local outcome=ok
    case $3 in
        0) ;;
        *[!0-9]*) outcome="FAILED ($3)"; FAILED+=("$1") ;;
        *) outcome="FAILED (exit $3)"; FAILED+=("$1") ;;
    esac
    [ -n "${4:-}" ] && outcome="$outcome (started at $4 s)"
    SUMMARY+=("$(printf '%-16s %5s s  %s' "$1" "$2" "$outcome")")
    printf '=== %s: %s s, %s\n' "$1" "$2" "$outcome"
}
summary() {
    printf '\n=== phases (wall clock; stack and serial-* ran in the background)\n'
    printf '%s\n' "${SUMMARY[@]}"
    printf '%-16s %5s s\n' total "$(( $(date +%s) - T0 ))"
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
#: The background phases' outcomes, one line each: name seconds exit-code started-at(+s).
PHASES=.stack/test-phases
BACKGROUND=()
SERIAL="env NOVA_ORPHANS_REQUIRE_SERVICES=1 .venv/bin/pytest -ra -p no:cacheprovider"
# bg_phase NAME COMMAND...: run it with its output in .stack/test-NAME.log, append its outcome
# to $PHASES; returns its exit code.
bg_phase() {
    local name=$1 t rc=0
    shift
    t=$(date +%s)
    printf '=== %s: %s\n' "$name" "$*" >".stack/test-$name.log"
    "$@" >>".stack/test-$name.log" 2>&1 </dev/null || rc=$?
    printf '%s %s %s %s\n' "$name" "$(( $(date +%s) - t ))" "$rc" "$(( t - T0 ))" >>"$PHASES"
    return "$rc"
}
stack_up() {
    local t
    t=$(date +%s)
    bash .ci/services/libvirtd.sh start || return
    echo "stack: libvirtd answering in $(( $(date +%s) - t )) s"
    # The real libvirtd's tests while the stack's venvs install and the stack starts (its
    # lvhost is pre-registered: the guests they define meanwhile do not stop its nova-compute
    # from starting).
    # shellcheck disable=SC2086
    bg_phase serial-libvirtd $SERIAL -m "serial and not nova and libvirtd" "$@" &
    LIBVIRTD_TESTS=$!
    t=$(date +%s)
    bash tests/e2e/stack/install.sh || return
    echo "stack: venvs installed in $(( $(date +%s) - t )) s"
    t=$(date +%s)
    bash tests/e2e/stack/stack.sh start || return
    echo "stack: up in $(( $(date +%s) - t )) s"
}
# The background chain: its own process group (job control on), so that an early exit can end
# it whole; stack.sh's services run in sessions of their own and stop with stack.sh stop.
stack_chain() {
    local rc=0
    LIBVIRTD_TESTS=
    bg_phase stack stack_up "$@" || rc=$?
    if [ -n "$LIBVIRTD_TESTS" ]; then wait "$LIBVIRTD_TESTS" || true; fi
    [ "$rc" = 0 ] || return 0
    # Every integration test must run: a missing service is a failure here, not a skip.
    # shellcheck disable=SC2086
    bg_phase serial-stack $SERIAL -m "serial and nova" "$@" || true
}
stop_services() {
    local rc=$? t pid
    trap - EXIT
    for pid in "${BACKGROUND[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            echo "=== background phases: still running, ended" >&2
            kill -TERM -- "-$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            tail -n 50 .stack/test-*.log 2>/dev/null || true
        fi
    done
    t=$(date +%s)
    bash tests/e2e/stack/stack.sh stop || true
    bash .ci/services/libvirtd.sh stop || true
    SUMMARY+=("$(printf '%-16s %5s s' stop "$(( $(date +%s) - t ))")")
    summary
    exit "$rc"
}
trap 'exit 130' INT
trap 'exit 143' TERM

phase install bash scripts/setup.sh --test --no-stack
[ ${#FAILED[@]} = 0 ] || { summary; exit 1; }

mkdir -p .stack
rm -f "$PHASES" .stack/test-*.log
trap stop_services EXIT
set -m
stack_chain "$@" >.stack/test-chain.log 2>&1 </dev/null &
BACKGROUND+=($!)
set +m
printf '=== background: stack, then serial-libvirtd and serial-stack (pid %s)\n' "$!"

lint
# After ansible-lint (which may write into the collection's directory these tests build from).
set -m
# shellcheck disable=SC2086
bg_phase serial-sshd nice -n 10 $SERIAL -m "serial and not nova and not libvirtd" "$@" </dev/null &
BACKGROUND+=($!)
set +m
printf '=== background: serial-sshd (pid %s)\n' "$!"
# The tests that share nothing, in parallel while the serial ones wait on the services; at a
# lower priority, the serial ones are the longer path.
phase isolated env NOVA_ORPHANS_REQUIRE_SERVICES=1 nice -n 10 .venv/bin/pytest -ra -n "$WORKERS" -m "not serial" "$@"

t=$(date +%s)
for pid in "${BACKGROUND[@]}"; do wait "$pid" || true; done
BACKGROUND=()
echo "=== (waited $(( $(date +%s) - t )) s for the background phases after the isolated tests)"
# Their outputs and outcomes, in the order they started.
for name in serial-sshd stack serial-libvirtd serial-stack; do
    log=.stack/test-$name.log
    printf '\n=== %s output (%s)\n' "$name" "$log"
    cat "$log" 2>/dev/null || true
    # shellcheck disable=SC2034
    if read -r _ seconds rc at < <(grep "^$name " "$PHASES" 2>/dev/null); then
        record "$name" "$seconds" "$rc" "+$at"
    else
        record "$name" 0 "not run: its services did not come up"
    fi
done

if [ ${#FAILED[@]} -gt 0 ]; then
    echo "failed: ${FAILED[*]}" >&2
    exit 1
fi
