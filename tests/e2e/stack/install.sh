#!/usr/bin/env bash
# Install what the end-to-end Nova stack needs: Debian packages (MariaDB, RabbitMQ, libvirt, QEMU)
# and one virtualenv per service under $STACK_DIR (default: <repo>/.stack), installed in parallel
# (each keeps its own pins apart):
#   nova-venv:     nova, openstack-placement, openstacksdk, pymysql, gunicorn, libvirt-python
#   glance-venv:   glance, pymysql, gunicorn
#   keystone-venv: keystone, pymysql, gunicorn
#   neutron-venv:  neutron, pymysql, gunicorn, and the stack's ML2 driver (neutron_stack_driver/)
#   cinder-venv:   cinder, pymysql, gunicorn, fixtures
# Idempotent: packages and venvs already present are left alone (a marker file records a
# finished pip install and its package list; a venv whose list grew gets the new packages).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
STACK_DIR=${STACK_DIR:-$REPO/.stack}
PYTHON=${PYTHON:-python3}
NOVA_PKGS=${NOVA_PKGS:-"nova openstack-placement openstacksdk pymysql gunicorn libvirt-python"}
GLANCE_PKGS=${GLANCE_PKGS:-"glance pymysql gunicorn"}
KEYSTONE_PKGS=${KEYSTONE_PKGS:-"keystone pymysql gunicorn"}
NEUTRON_PKGS=${NEUTRON_PKGS:-"neutron pymysql gunicorn"}
# fixtures: cinder.tests.fake_driver (the stack's volume backend) imports it.
CINDER_PKGS=${CINDER_PKGS:-"cinder pymysql gunicorn fixtures"}
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
    if [ -f "$venv/.installed" ]; then
        if [ "$(cat "$venv/.installed")" = "$*" ]; then
            echo "install: $venv already installed"; return 0
        fi
    else
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv"
        "$venv/bin/pip" install -q --upgrade pip setuptools wheel
    fi
    # shellcheck disable=SC2068
    "$venv/bin/pip" install -q $@
    echo "$*" >"$venv/.installed"
    echo "install: $venv ready"
}

mkdir -p "$STACK_DIR"
declare -A pids
for name in nova glance keystone neutron cinder; do
    pkgs_var=${name^^}_PKGS
    mkvenv "$name-venv" ${!pkgs_var} >"$STACK_DIR/install-$name.log" 2>&1 &
    pids[$name]=$!
done
rc=0
for name in nova glance keystone neutron cinder; do
    if ! wait "${pids[$name]}"; then
        rc=1
        echo "install: $name venv failed, see $STACK_DIR/install-$name.log" >&2
        tail -20 "$STACK_DIR/install-$name.log" >&2
    fi
    grep '^install:' "$STACK_DIR/install-$name.log" || true
done
# The stack's ML2 mechanism driver (an entry point, so a distribution of its own), installed
# again whenever its source changed. Built from a copy: pip would leave build files here.
driver_src=$HERE/neutron_stack_driver
installed=$("$STACK_DIR/neutron-venv/bin/python" -c \
    'import neutron_stack_driver; print(neutron_stack_driver.__file__)' 2>/dev/null || true)
if [ $rc = 0 ] && ! { [ -n "$installed" ] && cmp -s "$installed" "$driver_src/neutron_stack_driver.py"; }; then
    tmp=$(mktemp -d)
    cp -r "$driver_src" "$tmp/"
    "$STACK_DIR/neutron-venv/bin/pip" install -q --no-deps --force-reinstall "$tmp/neutron_stack_driver" \
        >>"$STACK_DIR/install-neutron.log" 2>&1 || { rc=1; echo "install: neutron_stack_driver failed" >&2; }
    rm -rf "$tmp"
    echo "install: neutron_stack_driver installed"
fi
echo "install: done in $(( $(date +%s) - t0 )) s (rc=$rc)"
exit $rc
