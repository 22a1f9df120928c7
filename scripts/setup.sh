#!/usr/bin/env bash
# Install what nova-orphans needs into ./.venv (as root on Debian: system packages via apt-get).
#   scripts/setup.sh          the tool itself (libvirt client library and headers, Python deps)
#   scripts/setup.sh --test   plus the test tools and the services the integration tests run:
#                             libvirtd + QEMU, and (via tests/e2e/stack/install.sh) MariaDB,
#                             RabbitMQ and a Nova control plane from PyPI; and the docs tools
#                             (the `docs` extra: Sphinx, myst-parser, sphinx-argparse).
#   scripts/setup.sh --test --no-stack
#                             the same but the stack's own venvs (tests/e2e/stack/install.sh),
#                             which scripts/test.sh installs in the background.
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_TESTS=0
WITH_STACK=1
[ "${1:-}" = "--test" ] && WITH_TESTS=1
[ "${2:-}" = "--no-stack" ] && WITH_STACK=0

apt_install() {
    local missing=()
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

apt_install pkg-config libvirt-dev gcc python3-dev python3-venv
if [ "$WITH_TESTS" = 1 ]; then
    apt_install libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 \
        qemu-utils
fi
if [ "$WITH_TESTS" = 1 ]; then
    # systemd-analyze verifies the unit; promtool (Debian's prometheus) tests the alert rules;
    # Debian's node_exporter reads the agent's metrics textfile; jq runs the README's JSON example;
    # the Ansible tests reach their inventory hosts through a private sshd on loopback
    # (openssh-server; the tests start and stop it themselves).
    apt_install systemd prometheus prometheus-node-exporter jq openssh-server openssh-client
fi

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
if [ "$WITH_TESTS" = 1 ]; then
    .venv/bin/pip install -q -c constraints.txt -e '.[test,docs]'
    [ "$WITH_STACK" = 0 ] || bash tests/e2e/stack/install.sh
else
    .venv/bin/pip install -q -c constraints.txt -e .
fi
