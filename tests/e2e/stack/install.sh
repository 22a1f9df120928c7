#!/usr/bin/env bash
# Install what the end-to-end Nova stack needs: Debian packages (MariaDB, RabbitMQ, libvirt, QEMU)
# and two virtualenvs under $STACK_DIR (default: <repo>/.stack):
#   nova-venv:   nova, openstack-placement, openstacksdk, pymysql, gunicorn, libvirt-python
#   glance-venv: glance, pymysql, gunicorn
# Idempotent: packages and venvs already present are left alone (a marker file records a
# finished pip install).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
STACK_DIR=${STACK_DIR:-$REPO/.stack}
PYTHON=${PYTHON:-python3}
NOVA_PKGS=${NOVA_PKGS:-"nova openstack-placement openstacksdk pymysql gunicorn libvirt-python"}
GLANCE_PKGS=${GLANCE_PKGS:-"glance pymysql gunicorn"}
t0=$(date +%s)

apt_pkgs=(mariadb-server rabbitmq-server libvirt-daemon-system libvirt-daemon-driver-qemu
          libvirt-clients qemu-system-x86 qemu-utils libvirt-dev pkg-config python3-venv curl)
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # The packaged services must not start on their own: the stack runs private instances.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

mkvenv() {  # name, packages...
    local venv=$STACK_DIR/$1; shift
    if [ -f "$venv/.installed" ]; then echo "install: $venv already installed"; return 0; fi
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip setuptools wheel
    # shellcheck disable=SC2068
    "$venv/bin/pip" install -q $@
    touch "$venv/.installed"
    echo "install: $venv ready"
}

mkdir -p "$STACK_DIR"
mkvenv nova-venv $NOVA_PKGS > "$STACK_DIR/install-nova.log" 2>&1 &
p1=$!
mkvenv glance-venv $GLANCE_PKGS > "$STACK_DIR/install-glance.log" 2>&1 &
p2=$!
rc=0
wait "$p1" || { rc=1; echo "install: nova venv failed, see $STACK_DIR/install-nova.log" >&2; tail -20 "$STACK_DIR/install-nova.log" >&2; }
wait "$p2" || { rc=1; echo "install: glance venv failed, see $STACK_DIR/install-glance.log" >&2; tail -20 "$STACK_DIR/install-glance.log" >&2; }
cat "$STACK_DIR/install-nova.log" "$STACK_DIR/install-glance.log" | grep '^install:' || true
echo "install: done in $(( $(date +%s) - t0 )) s (rc=$rc)"
exit $rc
