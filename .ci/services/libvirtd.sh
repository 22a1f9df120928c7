#!/usr/bin/env bash
# Start or stop a private libvirtd + virtlogd for the integration tests (QEMU/TCG, no KVM needed).
# Idempotent: "start" does nothing when qemu:///system already answers; "stop" only stops what
# this script started (PIDs recorded under $STATE).
set -euo pipefail
STATE=${NOVA_ORPHANS_STATE:-/var/tmp/nova-orphans-ci}
mkdir -p "$STATE"
answers() { timeout 5 virsh -c qemu:///system version >/dev/null 2>&1; }

start() {
    if answers; then echo "libvirtd: already answering"; return 0; fi
    grep -q '^user = "root"' /etc/libvirt/qemu.conf 2>/dev/null ||
        printf 'user = "root"\ngroup = "root"\n' >> /etc/libvirt/qemu.conf
    mkdir -p /run/libvirt
    if ! pgrep -x virtlogd >/dev/null; then
        virtlogd --daemon --pid-file "$STATE/virtlogd.pid"
    fi
    libvirtd --daemon --pid-file "$STATE/libvirtd.pid"
    for _ in $(seq 1 60); do answers && { echo "libvirtd: up"; return 0; }; sleep 0.5; done
    echo "libvirtd: did not answer within 30 s" >&2; return 1
}

stop() {
    # Destroy the guests the tests left behind (they are all ours on a CI machine).
    for dom in $(timeout 10 virsh -c qemu:///system list --name 2>/dev/null || true); do
        timeout 10 virsh -c qemu:///system destroy "$dom" >/dev/null 2>&1 || true
    done
    for name in libvirtd virtlogd; do
        if [ -s "$STATE/$name.pid" ]; then
            kill "$(cat "$STATE/$name.pid")" 2>/dev/null || true
            rm -f "$STATE/$name.pid"
        fi
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
