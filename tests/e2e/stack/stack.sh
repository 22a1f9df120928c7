#!/usr/bin/env bash
# A real, private Nova control plane for the end-to-end tests.
#
#   stack.sh start            start everything, wait until it is really ready (idempotent)
#   stack.sh stop             stop everything this script started (by recorded PID)
#   stack.sh status           exit 0 when the stack is up and answering, 1 otherwise
#   stack.sh svc-stop NAME    stop one service (e.g. compute-lvhost)
#   stack.sh svc-start NAME   start one service again and wait until it is ready
#
# Pieces: MariaDB and RabbitMQ (private instances on 127.0.0.1, data under $STATE), a Neutron
# stub (:9696), placement-api (:8778), glance-api (:9292), nova-api (:8774; gunicorn, test-only
# token filter: "X-Auth-Token: user:project"), a second nova-api on the same databases with
# [api] max_limit = 2 (:8785), nova-conductor, nova-scheduler, and three
# computes: host1 and host2 (fake driver) and lvhost (real libvirt driver on qemu:///system).
# A second cell, cell2, has its own MariaDB instance (127.0.0.1:13307, so that it can be stopped
# alone: "svc-stop mariadb-cell2"), its own RabbitMQ vhost, nova-conductor-cell2 and compute
# host3 (fake driver).
# Run install.sh first. The private libvirtd must be running for lvhost
# (.ci/services/libvirtd.sh start).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
STACK_DIR=${STACK_DIR:-$REPO/.stack}
STATE=${STACK_STATE:-$STACK_DIR/state}
NV=$STACK_DIR/nova-venv
GV=$STACK_DIR/glance-venv
KV=$STACK_DIR/keystone-venv
NEV=$STACK_DIR/neutron-venv
CV=$STACK_DIR/cinder-venv
KEYSTONE=http://127.0.0.1:5000
# Passwords of the stack's Keystone users (a private test stack on 127.0.0.1).
ADMIN_PASSWORD=stack-admin
SERVICE_PASSWORD=stack-service
# nova-api enforces the policy file nova-orphans ships (the least-privilege setup): a copy
# taken at start, in $ETC.
NOVA_POLICY=$REPO/nova_orphans/data/nova-policy.yaml
ETC=$STATE/etc
# The stack's own Python pieces the services load (fake_auth.py, wsgi_app.py, compute.py): a copy
# taken at start.
LIB=$STATE/lib
LOG=$STATE/log
RUN=$STATE/run
MYSQL_PORT=${STACK_MYSQL_PORT:-13306}
RABBIT_PORT=${STACK_RABBIT_PORT:-5673}
RABBIT_NODE=${STACK_RABBIT_NODE:-rabbit-nova-e2e@localhost}
MYSQL_SOCK=$STATE/mysql.sock
DB="mysql+pymysql://stack:stack@127.0.0.1:$MYSQL_PORT"
MYSQL2_PORT=${STACK_MYSQL2_PORT:-13307}
MYSQL2_SOCK=$STATE/mysql-cell2.sock
DB2="mysql+pymysql://stack:stack@127.0.0.1:$MYSQL2_PORT"
CELL2_TRANSPORT="rabbit://guest:guest@127.0.0.1:$RABBIT_PORT/cell2"
TOKEN=admin:admin
COMPUTES="host1 host2 lvhost"
CELL2_COMPUTES="host3"
# Domains the lvhost compute creates are named like this, so stop/start can clean them up
# without touching other guests on qemu:///system.
NAME_PREFIX=e2e-stack-
LIBVIRT_URI=qemu:///system
RABBITMQCTL=/usr/lib/rabbitmq/bin/rabbitmqctl
export PATH="$STATE/bin:$NV/bin:$PATH"

log() { printf '%s stack: %s\n' "$(date +%T)" "$*"; }
die() { printf 'stack: ERROR: %s\n' "$*" >&2; exit 1; }
since() { echo $(( $(date +%s) - $1 )); }
ccurl() { curl -s --max-time 5 --connect-timeout 2 "$@"; }
sql() { mariadb --no-defaults --socket="${2:-$MYSQL_SOCK}" -uroot -N -B -e "$1" 2>/dev/null; }
rabbitctl() {
    RABBITMQ_NODENAME=$RABBIT_NODE timeout 30 "$RABBITMQCTL" -n "$RABBIT_NODE" "$@"
}

# ---------------------------------------------------------------------------- processes
pidfile() { echo "$RUN/$1.pid"; }
alive() {  # name
    local f; f=$(pidfile "$1")
    [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}
# daemon NAME CMD...: run CMD in its own session (so its children die with it), log to
# $LOG/NAME.log, record its PID. Never waited on.
close_inherited_fds() {
    local fd
    for fd in $(ls /proc/$BASHPID/fd); do
        [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
    done
    return 0
}
daemon() {
    local name=$1; shift
    if alive "$name"; then return 0; fi
    # NOTE: a daemon must inherit no descriptor but stdio: one holding a lock file (stack.lock,
    # or a test session's lock when the stack is started under flock) would keep it forever.
    (close_inherited_fds; exec setsid "$@" >>"$LOG/$name.log" 2>&1 </dev/null) &
    echo $! >"$(pidfile "$name")"
}
signal_svc() {  # signal name: signal the service's process group (it runs in its own session)
    local f pid; f=$(pidfile "$2")
    [ -s "$f" ] || return 0
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null || return 0
    kill "-$1" -- "-$pid" 2>/dev/null || kill "-$1" "$pid" 2>/dev/null || true
}
# kill_svcs NAME...: TERM them all at once, wait up to 10 s, then KILL what is left.
kill_svcs() {
    local s left
    for s in "$@"; do signal_svc TERM "$s"; done
    for _ in $(seq 1 50); do
        left=0
        for s in "$@"; do alive "$s" && left=1; done
        [ "$left" = 0 ] && break
        sleep 0.2
    done
    for s in "$@"; do
        alive "$s" && signal_svc KILL "$s"
        rm -f "$(pidfile "$s")"
    done
}
waitfor() {  # description timeout_s command...
    local what=$1 tmo=$2; shift 2
    local end=$(( $(date +%s) + tmo ))
    until "$@"; do
        if [ "$(date +%s)" -ge "$end" ]; then
            # CI keeps only what was printed: show the service's own last words (the log of
            # the description's first word: "nova-conductor consumer" -> nova-conductor.log).
            local name=${what%% *}
            [ -f "$LOG/$name.log" ] && tail -n 20 "$LOG/$name.log" | sed "s/^/stack: $name.log: /" >&2
            die "$what not ready within ${tmo}s (logs: $LOG)"
        fi
        sleep 0.3
    done
}
http_ok() {
    local code; code=$(ccurl -o /dev/null -w '%{http_code}' "$@" || true)
    [ "${code:-0}" -ge 200 ] 2>/dev/null && [ "$code" -lt 400 ]
}

# ---------------------------------------------------------------------------- config
service_auth() {  # keystoneauth password options of the stack's one service user, nova
    printf '%s\n' "auth_type = password" "auth_url = $KEYSTONE/v3" "username = nova" \
        "password = $SERVICE_PASSWORD" "user_domain_name = Default" "project_name = service" \
        "project_domain_name = Default"
}
write_configs() {
    mkdir -p "$ETC" "$LOG" "$RUN" "$LIB" "$STATE/bin" "$STATE/glance/images" "$STATE/glance/staging" \
        "$STATE/glance/tasks"
    # NOTE: the running stack must not depend on the checkout that started it: another
    # checkout's svc-start would load its own fake_auth.py, and a removed checkout would take
    # nova-api's policy file with it.
    cp "$HERE/fake_auth.py" "$HERE/wsgi_app.py" "$HERE/compute.py" "$LIB/"
    cp "$NOVA_POLICY" "$ETC/nova-policy.yaml"
    printf '#!/bin/sh\n# test shim: the stack runs as root, there is no sudo here\nexec "$@"\n' \
        >"$STATE/bin/sudo"
    chmod +x "$STATE/bin/sudo"

    # Nova's API paste pipeline: fake_auth validates Keystone tokens with keystonemiddleware
    # and still takes the older tests' "user:project" tokens.
    sed -e 's/^paste.filter_factory = keystonemiddleware.auth_token:filter_factory/paste.filter_factory = fake_auth:filter_factory/' \
        "$NV/etc/nova/api-paste.ini" >"$ETC/api-paste.ini"
    grep -q 'fake_auth:filter_factory' "$ETC/api-paste.ini" || die "could not patch api-paste.ini"

    sed -e "s#^filters_path=.*#filters_path=$NV/etc/nova/rootwrap.d#" \
        -e "s#^exec_dirs=.*#exec_dirs=$NV/bin,/sbin,/usr/sbin,/bin,/usr/bin,/usr/local/sbin,/usr/local/bin#" \
        "$NV/etc/nova/rootwrap.conf" >"$ETC/rootwrap.conf"

    cat >"$ETC/nova.conf" <<EOF
[DEFAULT]
transport_url = rabbit://guest:guest@127.0.0.1:$RABBIT_PORT/
my_ip = 127.0.0.1
state_path = $STATE/nova
use_stderr = true
debug = false
rootwrap_config = $ETC/rootwrap.conf
instance_name_template = ${NAME_PREFIX}%08x
reclaim_instance_interval = 3600
running_deleted_instance_action = noop
heal_instance_info_cache_interval = -1
periodic_fuzzy_delay = 0
graceful_shutdown_timeout = 3
instance_usage_audit = false
# Neutron has no agents here: no port ever reports "plugged"; do not wait for it.
vif_plugging_is_fatal = false
vif_plugging_timeout = 0
[api]
max_limit = 1000
# The e2e tests share one stack: their servers together pass Nova's default quotas (10).
[quota]
instances = -1
cores = -1
ram = -1
[wsgi]
api_paste_config = $ETC/api-paste.ini
[api_database]
connection = $DB/nova_api
[database]
connection = $DB/nova
[oslo_concurrency]
lock_path = $STATE/nova/lock
[oslo_messaging_notifications]
driver = noop
[scheduler]
discover_hosts_in_cells_interval = 2
workers = 1
[conductor]
workers = 1
[keystone_authtoken]
$(service_auth)
www_authenticate_uri = $KEYSTONE
service_type = compute
[placement]
$(service_auth)
region_name = RegionOne
valid_interfaces = public
[neutron]
$(service_auth)
endpoint_override = http://127.0.0.1:9696
region_name = RegionOne
[glance]
endpoint_override = http://127.0.0.1:9292
region_name = RegionOne
[cinder]
$(service_auth)
os_region_name = RegionOne
# NOTE: the older tests' "user:project" tokens carry no service catalog.
endpoint_template = http://127.0.0.1:8776/v3
[vnc]
enabled = false
[spice]
enabled = false
[serial_console]
enabled = false
[os_vif_ovs]
ovsdb_connection = tcp:127.0.0.1:1
[oslo_policy]
enforce_scope = true
enforce_new_defaults = true
policy_file = $ETC/nova-policy.yaml
policy_dirs = $ETC/nova-policy.d
EOF
    mkdir -p "$ETC/nova-policy.d"
    # The second nova-api: the same configuration but for [api] max_limit.
    mkdir -p "$ETC/limited"
    cp "$ETC/api-paste.ini" "$ETC/limited/api-paste.ini"
    sed -e 's/^max_limit = 1000$/max_limit = 2/' "$ETC/nova.conf" >"$ETC/limited/nova.conf"
    grep -q '^max_limit = 2$' "$ETC/limited/nova.conf" || die "could not set max_limit for nova-api-limited"

    cat >"$ETC/cell2.conf" <<EOF
[DEFAULT]
transport_url = $CELL2_TRANSPORT
[database]
connection = $DB2/nova_cell2
EOF

    for h in $COMPUTES $CELL2_COMPUTES; do
        local driver=fake.FakeDriverWithoutFakeNodes
        [ "$h" = lvhost ] && driver=libvirt.LibvirtDriver
        mkdir -p "$STATE/$h/instances" "$STATE/$h/lock"
        cat >"$ETC/compute-$h.conf" <<EOF
[DEFAULT]
host = $h
state_path = $STATE/$h
instances_path = $STATE/$h/instances
compute_driver = $driver
running_deleted_instance_action = noop
[oslo_concurrency]
lock_path = $STATE/$h/lock
[libvirt]
virt_type = qemu
cpu_mode = none
connection_uri = $LIBVIRT_URI
EOF
    done

    cat >"$ETC/placement.conf" <<EOF
[DEFAULT]
debug = false
[api]
auth_strategy = keystone
[keystone_authtoken]
$(service_auth)
www_authenticate_uri = $KEYSTONE
[placement_database]
connection = $DB/placement
EOF

    mkdir -p "$STATE/keystone/fernet-keys" "$STATE/keystone/credential-keys"
    cat >"$ETC/keystone.conf" <<EOF
[DEFAULT]
debug = false
use_stderr = true
[database]
connection = $DB/keystone
[token]
provider = fernet
expiration = 86400
[fernet_tokens]
key_repository = $STATE/keystone/fernet-keys
[fernet_receipts]
key_repository = $STATE/keystone/fernet-keys
[credential]
key_repository = $STATE/keystone/credential-keys
[cache]
enabled = false
[identity]
# NOTE: bcrypt's cheapest cost: every user created and every password checked pays it.
password_hash_rounds = 4
EOF

    # neutron-server alone: ML2 with the stack's mechanism driver (binds every port, no
    # agents), VLAN tenant networks, no L3/DHCP/OVN.
    mkdir -p "$STATE/neutron/lock"
    sed -e 's/^paste.filter_factory = keystonemiddleware.auth_token:filter_factory/paste.filter_factory = fake_auth:filter_factory/' \
        "$NEV/etc/neutron/api-paste.ini" >"$ETC/neutron-api-paste.ini"
    grep -q 'fake_auth:filter_factory' "$ETC/neutron-api-paste.ini" || die "could not patch neutron's api-paste.ini"
    cat >"$ETC/neutron.conf" <<EOF
[DEFAULT]
debug = false
use_stderr = true
core_plugin = ml2
service_plugins =
auth_strategy = keystone
api_paste_config = $ETC/neutron-api-paste.ini
state_path = $STATE/neutron
transport_url = rabbit://guest:guest@127.0.0.1:$RABBIT_PORT/
rpc_workers = 0
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
[database]
connection = $DB/neutron
[keystone_authtoken]
$(service_auth)
www_authenticate_uri = $KEYSTONE
[oslo_concurrency]
lock_path = $STATE/neutron/lock
[oslo_messaging_notifications]
driver = noop
[ml2]
type_drivers = flat,vlan
tenant_network_types = vlan
mechanism_drivers = stack
extension_drivers = port_security
[ml2_type_vlan]
network_vlan_ranges = physnet1:100:199
[ml2_type_flat]
flat_networks = *
EOF

    # Cinder: cinder-api, cinder-scheduler and one cinder-volume whose backend is Cinder's own
    # FakeLoggingVolumeDriver (volumes, attachments and connections are records only; the
    # fake-driver computes attach them in records too).
    mkdir -p "$STATE/cinder/lock"
    sed -e 's/^paste.filter_factory = keystonemiddleware.auth_token:filter_factory/paste.filter_factory = fake_auth:filter_factory/' \
        "$CV/etc/cinder/api-paste.ini" >"$ETC/cinder-api-paste.ini"
    grep -q 'fake_auth:filter_factory' "$ETC/cinder-api-paste.ini" || die "could not patch cinder's api-paste.ini"
    cat >"$ETC/cinder.conf" <<EOF
[DEFAULT]
debug = false
use_stderr = true
auth_strategy = keystone
api_paste_config = $ETC/cinder-api-paste.ini
transport_url = rabbit://guest:guest@127.0.0.1:$RABBIT_PORT/
enabled_backends = fake
state_path = $STATE/cinder
my_ip = 127.0.0.1
host = stack-cinder
[database]
connection = $DB/cinder
[keystone_authtoken]
$(service_auth)
www_authenticate_uri = $KEYSTONE
[oslo_concurrency]
lock_path = $STATE/cinder/lock
[oslo_messaging_notifications]
driver = noop
[fake]
volume_driver = cinder.tests.fake_driver.FakeLoggingVolumeDriver
volume_backend_name = fake
EOF

    cp "$GV/etc/glance/glance-api-paste.ini" "$ETC/glance-api-paste.ini"
    cat >"$ETC/glance-api.conf" <<EOF
[DEFAULT]
debug = false
use_stderr = true
enabled_backends = fs:file
worker_self_reference_url = http://127.0.0.1:9292
image_cache_dir = $STATE/glance/cache
[database]
connection = $DB/glance
[paste_deploy]
flavor =
config_file = $ETC/glance-api-paste.ini
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = $STATE/glance/images
[os_glance_staging_store]
filesystem_store_datadir = $STATE/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = $STATE/glance/tasks
[oslo_policy]
policy_file = $ETC/glance-policy.yaml
enforce_scope = false
enforce_new_defaults = false
EOF
    printf '"publicize_image": ""\n"default": ""\n' >"$ETC/glance-policy.yaml"
}

# ---------------------------------------------------------------------------- pieces
# A first bootstrap has been seen to fail once on a fresh CI machine and never here: try
# three times from an empty data directory, and show the log's end in CI's output if all fail.
install_mariadb() {  # name datadir
    local name=$1 data=$2 try
    for try in 1 2 3; do
        rm -rf "$data"
        mariadb-install-db --no-defaults --datadir="$data" --user=root \
            --auth-root-authentication-method=normal --skip-test-db \
            >>"$LOG/$name-install.log" 2>&1 && return 0
        printf 'stack: %s bootstrap attempt %s failed\n' "$name" "$try" >&2
        sleep 2
    done
    tail -n 30 "$LOG/$name-install.log" | sed "s/^/stack: $name-install.log: /" >&2
    df -h "$data/.." >&2 || true
    die "mariadb-install-db failed (see $LOG/$name-install.log)"
}
start_mariadb() {  # name datadir socket port
    local name=$1 data=$2 sock=$3 port=$4
    [ -d "$data/mysql" ] || install_mariadb "$name" "$data"
    daemon "$name" mariadbd --no-defaults --datadir="$data" --socket="$sock" \
        --port="$port" --bind-address=127.0.0.1 --user=root --pid-file="$data.pidf" \
        --skip-log-bin --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
        --innodb-buffer-pool-size=128M --max-connections=1000 --skip-name-resolve
}
start_mariadb_cell1() { start_mariadb mariadb "$STATE/mysql" "$MYSQL_SOCK" "$MYSQL_PORT"; }
start_mariadb_cell2() { start_mariadb mariadb-cell2 "$STATE/mysql-cell2" "$MYSQL2_SOCK" "$MYSQL2_PORT"; }
mariadb_up() { mariadb-admin --no-defaults --socket="${1:-$MYSQL_SOCK}" -uroot --connect-timeout=2 ping >/dev/null 2>&1; }

start_rabbit() {
    mkdir -p "$STATE/rabbit/mnesia" "$STATE/rabbit/log"
    : >"$STATE/rabbit/enabled_plugins.erl"; echo '[].' >"$STATE/rabbit/enabled_plugins"
    printf 'loopback_users = none\nlisteners.tcp.1 = 127.0.0.1:%s\n' "$RABBIT_PORT" \
        >"$STATE/rabbit/rabbitmq.conf"
    RABBITMQ_NODENAME=$RABBIT_NODE RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT=$RABBIT_PORT RABBITMQ_DIST_PORT=$(( RABBIT_PORT + 20000 )) \
    RABBITMQ_MNESIA_BASE="$STATE/rabbit/mnesia" RABBITMQ_LOG_BASE="$STATE/rabbit/log" \
    RABBITMQ_PID_FILE="$STATE/rabbit/rabbit.pid" RABBITMQ_CONFIG_FILE="$STATE/rabbit/rabbitmq.conf" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$STATE/rabbit/enabled_plugins" \
    RABBITMQ_CONF_ENV_FILE=/dev/null RABBITMQ_ADVANCED_CONFIG_FILE="$STATE/rabbit/advanced.config" \
        daemon rabbitmq /usr/lib/rabbitmq/bin/rabbitmq-server
}
rabbit_up() { rabbitctl await_startup >/dev/null 2>&1; }
cell2_vhost() {
    rabbitctl add_vhost cell2 >/dev/null 2>&1 || true
    rabbitctl set_permissions -p cell2 guest '.*' '.*' '.*' >/dev/null ||
        die "could not open the cell2 vhost to guest"
}

create_databases() {
    sql "CREATE USER IF NOT EXISTS 'stack'@'%' IDENTIFIED BY 'stack';
         CREATE USER IF NOT EXISTS 'stack'@'localhost' IDENTIFIED BY 'stack';
         GRANT ALL PRIVILEGES ON *.* TO 'stack'@'%';
         GRANT ALL PRIVILEGES ON *.* TO 'stack'@'localhost';
         CREATE DATABASE IF NOT EXISTS nova_api; CREATE DATABASE IF NOT EXISTS nova;
         CREATE DATABASE IF NOT EXISTS nova_cell0; CREATE DATABASE IF NOT EXISTS placement;
         CREATE DATABASE IF NOT EXISTS glance; CREATE DATABASE IF NOT EXISTS keystone;
         CREATE DATABASE IF NOT EXISTS neutron; CREATE DATABASE IF NOT EXISTS cinder;
         FLUSH PRIVILEGES;" || die "could not create databases"
    sql "CREATE USER IF NOT EXISTS 'stack'@'%' IDENTIFIED BY 'stack';
         CREATE USER IF NOT EXISTS 'stack'@'localhost' IDENTIFIED BY 'stack';
         GRANT ALL PRIVILEGES ON *.* TO 'stack'@'%';
         GRANT ALL PRIVILEGES ON *.* TO 'stack'@'localhost';
         CREATE DATABASE IF NOT EXISTS nova_cell2; FLUSH PRIVILEGES;" "$MYSQL2_SOCK" ||
        die "could not create the cell2 database"
    local nm="nova-manage --config-file $ETC/nova.conf"
    local t; t=$(date +%s)
    ( placement-manage --config-file "$ETC/placement.conf" db sync >"$LOG/placement-dbsync.log" 2>&1 ) &
    local p1=$!
    ( "$GV/bin/glance-manage" --config-file "$ETC/glance-api.conf" db_sync >"$LOG/glance-dbsync.log" 2>&1 ) &
    local p2=$!
    ( $nm --config-file "$ETC/cell2.conf" db sync --local_cell >"$LOG/nova-cell2-dbsync.log" 2>&1 ) &
    local p3=$!
    local km="$KV/bin/keystone-manage --config-file $ETC/keystone.conf"
    ( $km fernet_setup --keystone-user root --keystone-group root &&
      $km credential_setup --keystone-user root --keystone-group root ) \
        >"$LOG/keystone-keys.log" 2>&1 &
    local p5=$!
    ( $km db_sync && $km bootstrap --bootstrap-password "$ADMIN_PASSWORD" --bootstrap-region-id RegionOne \
        --bootstrap-admin-url "$KEYSTONE/v3" --bootstrap-public-url "$KEYSTONE/v3" \
        --bootstrap-internal-url "$KEYSTONE/v3" ) >"$LOG/keystone-dbsync.log" 2>&1 &
    local p4=$!
    ( "$NEV/bin/neutron-db-manage" --config-file "$ETC/neutron.conf" upgrade heads ) \
        >"$LOG/neutron-dbsync.log" 2>&1 &
    local p6=$!
    ( "$CV/bin/cinder-manage" --config-file "$ETC/cinder.conf" db sync ) \
        >"$LOG/cinder-dbsync.log" 2>&1 &
    local p7=$!
    { $nm api_db sync && $nm cell_v2 map_cell0 && $nm cell_v2 create_cell --name cell1 &&
      $nm cell_v2 create_cell --name cell2 --database_connection "$DB2/nova_cell2" \
        --transport-url "$CELL2_TRANSPORT" &&
      $nm db sync; } >"$LOG/nova-dbsync.log" 2>&1 || die "nova db set-up failed (see $LOG/nova-dbsync.log)"
    wait "$p3" || die "cell2 db sync failed (see $LOG/nova-cell2-dbsync.log)"
    wait "$p1" || die "placement db sync failed (see $LOG/placement-dbsync.log)"
    wait "$p2" || die "glance db sync failed (see $LOG/glance-dbsync.log)"
    wait "$p4" || die "keystone db set-up failed (see $LOG/keystone-dbsync.log)"
    wait "$p5" || die "keystone key set-up failed (see $LOG/keystone-keys.log)"
    wait "$p6" || die "neutron db sync failed (see $LOG/neutron-dbsync.log)"
    wait "$p7" || die "cinder db sync failed (see $LOG/cinder-dbsync.log)"
    log "databases created in $(since "$t") s"
}

start_compute() {  # host
    local cell=()
    in_cell2 "$1" && cell=(--config-file "$ETC/cell2.conf")
    # NOTE: compute.py is Nova's nova-compute, reading a provider tree's allocations only
    # when they are used (see its docstring): builds on a 1,000-server host stay fast.
    local lib=$LIB
    [ -f "$lib/compute.py" ] || lib=$HERE  # a stack started before compute.py existed
    daemon "compute-$1" "$NV/bin/python" "$lib/compute.py" --config-file "$ETC/nova.conf" "${cell[@]}" \
        --config-file "$ETC/compute-$1.conf"
}
# NOTE: --limit-request-line 0: Nova asks Neutron for the ports of up to 150 servers in one
# GET (device_id=...&device_id=...), far over gunicorn's default 4,094 bytes; Apache and uWSGI,
# which deployments put in front of the APIs, accept such lines. With the default, every detail
# listing of more than about 70 servers failed with HTTP 500.
wsgi() {  # name venv port threads [workers]: an API under gunicorn (wsgi_app.py loads $STACK_WSGI_APP)
    local lib=$LIB
    [ -f "$lib/wsgi_app.py" ] || lib=$HERE  # a stack started before $LIB existed
    daemon "$1" "$2/bin/gunicorn" --bind "127.0.0.1:$3" --workers "${5:-1}" --threads "$4" --timeout 120 \
        --limit-request-line 0 \
        --graceful-timeout 3 --name "$1" --pythonpath "$lib" wsgi_app:application
}
start_service() {  # name
    case "$1" in
        neutron-api)
            OS_NEUTRON_CONFIG_DIR=$ETC OS_NEUTRON_CONFIG_FILES=neutron.conf \
                STACK_WSGI_APP=neutron.wsgi.api:application wsgi neutron-api "$NEV" 9696 4 ;;
        keystone)
            OS_KEYSTONE_CONFIG_FILES=$ETC/keystone.conf STACK_WSGI_APP=keystone.wsgi.api:application \
                wsgi keystone "$KV" 5000 4 ;;
        cinder-api)
            STACK_WSGI_ARGV="--config-file $ETC/cinder.conf" \
                STACK_WSGI_APP=cinder.wsgi.api:application wsgi cinder-api "$CV" 8776 4 ;;
        cinder-scheduler) daemon cinder-scheduler "$CV/bin/cinder-scheduler" --config-file "$ETC/cinder.conf" ;;
        cinder-volume) daemon cinder-volume "$CV/bin/cinder-volume" --config-file "$ETC/cinder.conf" ;;
        placement-api)
            OS_PLACEMENT_CONFIG_DIR=$ETC STACK_WSGI_APP=placement.wsgi.api:application \
                wsgi placement-api "$NV" 8778 4 ;;
        glance-api)
            OS_GLANCE_CONFIG_DIR=$ETC daemon glance-api "$GV/bin/gunicorn" --bind 127.0.0.1:9292 \
                --workers 1 --threads 4 --timeout 120 --graceful-timeout 3 --name glance-api glance.wsgi.api:application ;;
        nova-api)
            # NOTE: two worker processes, as DevStack runs nova-api on a 2-core machine
            # (API_WORKERS = max(cores / 4, 2)): one Python process runs one request's Python
            # at a time however many threads it has, and a deployment runs several.
            OS_NOVA_CONFIG_DIR=$ETC STACK_WSGI_APP=nova.wsgi.osapi_compute:application \
                wsgi nova-api "$NV" 8774 4 2 ;;
        nova-api-limited)
            OS_NOVA_CONFIG_DIR=$ETC/limited STACK_WSGI_APP=nova.wsgi.osapi_compute:application \
                wsgi nova-api-limited "$NV" 8785 4 ;;
        nova-conductor) daemon nova-conductor nova-conductor --config-file "$ETC/nova.conf" ;;
        nova-conductor-cell2)
            daemon nova-conductor-cell2 nova-conductor --config-file "$ETC/nova.conf" \
                --config-file "$ETC/cell2.conf" ;;
        mariadb) start_mariadb_cell1 ;;
        mariadb-cell2) start_mariadb_cell2 ;;
        nova-scheduler) daemon nova-scheduler nova-scheduler --config-file "$ETC/nova.conf" ;;
        compute-*) start_compute "${1#compute-}" ;;
        *) die "unknown service $1" ;;
    esac
}

in_cell2() { case " $CELL2_COMPUTES " in *" $1 "*) return 0 ;; esac; return 1; }
consumers() {  # vhost queue -> number of consumers
    rabbitctl list_queues -p "$1" name consumers 2>/dev/null | awk -v q="$2" '$1 == q {print $2}'
}
conductor_ready() {  # [vhost]
    local n; n=$(consumers "${1:-/}" conductor)
    [ "${n:-0}" -ge 1 ]
}
compute_ready() {  # host: mapped in the API DB, has a consumer, and has a fresh heartbeat
    local h=$1 n vhost=/ db=nova sock=$MYSQL_SOCK
    if in_cell2 "$h"; then vhost=cell2; db=nova_cell2; sock=$MYSQL2_SOCK; fi
    n=$(sql "SELECT count(*) FROM nova_api.host_mappings WHERE host='$h'") || return 1
    [ "${n:-0}" -ge 1 ] || return 1
    n=$(consumers "$vhost" "compute.$h"); [ "${n:-0}" -ge 1 ] || return 1
    n=$(sql "SELECT count(*) FROM $db.services WHERE host='$h' AND \`binary\`='nova-compute'
             AND deleted=0 AND updated_at > UTC_TIMESTAMP() - INTERVAL 30 SECOND" "$sock") || return 1
    [ "${n:-0}" -ge 1 ]
}
cinder_volume_ready() {  # the fake backend's cinder-volume reports to the database
    local n
    n=$(sql "SELECT count(*) FROM cinder.services WHERE \`binary\`='cinder-volume' AND deleted=0
             AND disabled=0 AND updated_at > UTC_TIMESTAMP() - INTERVAL 30 SECOND") || return 1
    [ "${n:-0}" -ge 1 ]
}
all_computes_ready() {
    local h; for h in $COMPUTES $CELL2_COMPUTES; do compute_ready "$h" || return 1; done
}

# nova-compute refuses to start as a NEW service when its hypervisor already has domains
# ("My hypervisor has existing instances..."), and qemu:///system is shared with other tests that
# define guests at any time. So lvhost is registered beforehand, as a compute host that has run
# before: a service row at the current service version plus the node identity file Nova expects
# such a host to have.
preregister_lvhost() {
    local ver
    ver=$(sed -n 's/^SERVICE_VERSION = \([0-9][0-9]*\)$/\1/p' "$NV"/lib/python3*/site-packages/nova/objects/service.py)
    [ -n "$ver" ] || die "cannot read nova's SERVICE_VERSION"
    mkdir -p "$STATE/lvhost"
    [ -s "$STATE/lvhost/compute_id" ] || cat /proc/sys/kernel/random/uuid >"$STATE/lvhost/compute_id"
    sql "INSERT INTO nova.services (created_at, host, \`binary\`, topic, report_count, disabled,
             deleted, forced_down, version, uuid)
         SELECT UTC_TIMESTAMP(), 'lvhost', 'nova-compute', 'compute', 0, 0, 0, 0, $ver,
             '$(cat /proc/sys/kernel/random/uuid)' FROM DUAL
         WHERE NOT EXISTS (SELECT 1 FROM nova.services WHERE host='lvhost'
                           AND \`binary\`='nova-compute' AND deleted=0)" ||
        die "could not pre-register lvhost"
}

cleanup_guests() {  # destroy/undefine the domains our lvhost compute created
    local d
    for d in $(timeout 10 virsh -c "$LIBVIRT_URI" list --all --name 2>/dev/null | grep "^$NAME_PREFIX" || true); do
        timeout 20 virsh -c "$LIBVIRT_URI" destroy "$d" >/dev/null 2>&1 || true
        timeout 20 virsh -c "$LIBVIRT_URI" undefine "$d" >/dev/null 2>&1 || true
    done
}

keystone_setup() {  # catalog, service users, nova-orphans' least-privilege user: $STATE/keystone.json
    "$NV/bin/python" "$HERE/keystone_setup.py" "$STATE" "$ADMIN_PASSWORD" "$SERVICE_PASSWORD" \
        >"$LOG/keystone-setup.log" 2>&1 ||
        { tail -5 "$LOG/keystone-setup.log" >&2; die "keystone set-up failed (see $LOG/keystone-setup.log)"; }
}

bootstrap() {  # image + flavor, recorded in $STATE/stack.json
    "$NV/bin/python" "$HERE/bootstrap.py" "$STATE" >"$LOG/bootstrap.log" 2>&1 ||
        { tail -5 "$LOG/bootstrap.log" >&2; die "bootstrap failed (see $LOG/bootstrap.log)"; }
}

ALL_SVCS="mariadb mariadb-cell2 rabbitmq keystone neutron-api cinder-api cinder-scheduler cinder-volume placement-api glance-api nova-api nova-api-limited nova-conductor nova-conductor-cell2 nova-scheduler compute-host1 compute-host2 compute-lvhost compute-host3"

status() {
    local s
    for s in $ALL_SVCS; do alive "$s" || { echo "stack: $s not running"; return 1; }; done
    http_ok http://127.0.0.1:8774/ || { echo "stack: nova-api not answering"; return 1; }
    http_ok http://127.0.0.1:8785/ || { echo "stack: nova-api-limited not answering"; return 1; }
    [ -s "$STATE/stack.json" ] || { echo "stack: not bootstrapped"; return 1; }
    echo "stack: up ($STATE)"
}

start() {
    local t0; t0=$(date +%s)
    [ -x "$NV/bin/nova-compute" ] && [ -x "$GV/bin/glance-manage" ] && [ -x "$KV/bin/keystone-manage" ] &&
        [ -x "$NEV/bin/neutron-db-manage" ] && [ -x "$CV/bin/cinder-manage" ] ||
        die "venvs missing: run tests/e2e/stack/install.sh first"
    if status >/dev/null 2>&1; then log "already up"; return 0; fi
    stop >/dev/null 2>&1 || true
    rm -rf "$STATE"
    mkdir -p "$STATE"
    # A start that fails half-way stops what it started (keep it for debugging with
    # STACK_KEEP_ON_FAIL=1).
    [ "${STACK_KEEP_ON_FAIL:-0}" = 1 ] || trap 'echo "stack: start failed, stopping" >&2; stop >/dev/null 2>&1' ERR EXIT
    timeout 5 virsh -c "$LIBVIRT_URI" version >/dev/null 2>&1 ||
        die "libvirt $LIBVIRT_URI not answering (run .ci/services/libvirtd.sh start)"
    cleanup_guests
    write_configs
    local epmd_before; epmd_before=$(pgrep -x epmd || true)
    log "starting mariadb (both cells), rabbitmq"
    # Bootstraps one after the other (about a second each): nothing shared can race.
    install_mariadb mariadb "$STATE/mysql"
    install_mariadb mariadb-cell2 "$STATE/mysql-cell2"
    start_mariadb_cell1 &
    local m1=$!
    start_mariadb_cell2 &
    local m2=$!
    start_rabbit
    wait "$m1" || die "mariadb did not start (see $LOG/mariadb-install.log)"
    wait "$m2" || die "mariadb-cell2 did not start (see $LOG/mariadb-cell2-install.log)"
    waitfor mariadb 60 mariadb_up
    waitfor mariadb-cell2 60 mariadb_up "$MYSQL2_SOCK"
    log "mariadb up after $(since "$t0") s"
    create_databases
    start_service keystone
    start_service neutron-api
    start_service cinder-api
    start_service placement-api
    start_service glance-api
    waitfor keystone 90 http_ok $KEYSTONE/v3
    # The catalog and users are made while RabbitMQ starts; every Nova service needs them
    # (nova-conductor dies at start when its placement client cannot get a token).
    keystone_setup &
    local ks=$!
    waitfor rabbitmq 90 rabbit_up
    cell2_vhost
    # RabbitMQ starts Erlang's port mapper as a detached daemon; stop it with the stack only
    # when this start brought it up.
    if [ -z "$epmd_before" ]; then pgrep -x epmd | head -1 >"$(pidfile epmd)" || true; fi
    log "rabbitmq up after $(since "$t0") s"
    wait "$ks" || die "keystone set-up failed"
    log "keystone set up after $(since "$t0") s"
    start_service nova-api
    start_service nova-api-limited
    start_service nova-conductor
    start_service nova-conductor-cell2
    start_service nova-scheduler
    start_service cinder-scheduler
    start_service cinder-volume
    # A compute that pings the conductor before its queue exists waits 10 s for nothing.
    waitfor "nova-conductor consumer" 180 conductor_ready
    waitfor "nova-conductor-cell2 consumer" 180 conductor_ready cell2
    preregister_lvhost
    for h in $COMPUTES $CELL2_COMPUTES; do start_compute "$h"; done
    waitfor placement-api 60 http_ok http://127.0.0.1:8778/
    waitfor glance-api 60 http_ok http://127.0.0.1:9292/versions
    waitfor neutron-api 90 http_ok http://127.0.0.1:9696/
    waitfor cinder-api 90 http_ok http://127.0.0.1:8776/
    waitfor nova-api 90 http_ok http://127.0.0.1:8774/
    waitfor nova-api-limited 90 http_ok http://127.0.0.1:8785/
    log "APIs up after $(since "$t0") s"
    bootstrap
    waitfor "computes (mapped, consuming, up)" 120 all_computes_ready
    waitfor "cinder-volume (up in cinder's service list)" 120 cinder_volume_ready
    trap - ERR EXIT
    log "stack ready in $(since "$t0") s"
}

stop() {
    cleanup_guests
    # The OpenStack services first (they would log connection errors otherwise), then the
    # message bus and database.
    kill_svcs nova-api nova-api-limited nova-conductor nova-conductor-cell2 nova-scheduler \
        compute-host1 compute-host2 compute-lvhost compute-host3 placement-api glance-api neutron-api \
        cinder-api cinder-scheduler cinder-volume keystone
    kill_svcs rabbitmq mariadb mariadb-cell2
    kill_svcs epmd
    # NOTE: a stack started by the scripts before Neutron was real ran a stub on Neutron's port.
    kill_svcs neutron-stub
    log "stopped"
}

svc_stop() { kill_svcs "$1"; log "$1 stopped"; }
svc_start() {
    local t; t=$(date +%s)
    start_service "$1"
    case "$1" in
        compute-*) waitfor "$1" 90 compute_ready "${1#compute-}" ;;
        nova-api) waitfor nova-api 90 http_ok http://127.0.0.1:8774/ ;;
        nova-api-limited) waitfor nova-api-limited 90 http_ok http://127.0.0.1:8785/ ;;
        mariadb-cell2) waitfor mariadb-cell2 60 mariadb_up "$MYSQL2_SOCK" ;;
    esac
    log "$1 started in $(since "$t") s"
}

# One stack.sh at a time per stack directory (start/stop/svc-* would race otherwise).
locked() {
    mkdir -p "$STACK_DIR"
    exec 9>"$STACK_DIR/stack.lock"
    flock -w 900 9 || die "another stack.sh held $STACK_DIR/stack.lock for 15 minutes"
    "$@"
}

case "${1:-}" in
    start) locked start ;;
    stop) locked stop ;;
    status) status ;;
    svc-stop) locked svc_stop "${2:?service name}" ;;
    svc-start) locked svc_start "${2:?service name}" ;;
    compute-ready) compute_ready "${2:?host}" ;;
    *) echo "usage: $0 start|stop|status|svc-stop NAME|svc-start NAME" >&2; exit 2 ;;
esac
