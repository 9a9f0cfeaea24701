#!/usr/bin/env bash
# A private PostgreSQL server for the tests: `scripts/pg-server.sh start DIR` initialises a
# cluster in DIR (as the `postgres` user when run as root), starts it on a free local port with
# trust authentication on 127.0.0.1 only, and prints the URL of a fresh database `warden`;
# `scripts/pg-server.sh stop DIR` stops it and removes DIR. Every wait is bounded.
#
# PG_LISTEN (default 127.0.0.1) lists the addresses to listen on, and PG_HBA_NET, when set, is a
# network whose clients are trusted too (the two-host tests' namespace addresses).
#
# Needs PostgreSQL 12 or newer's server binaries (Debian: `apt-get install postgresql`); looks in
# PG_BIN, then /usr/lib/postgresql/*/bin, then PATH.
set -euo pipefail

command=${1:-}
dir=${2:-}
if [ -z "$command" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi

find_bin() {
    if [ -n "${PG_BIN:-}" ] && [ -x "$PG_BIN/initdb" ]; then echo "$PG_BIN"; return; fi
    local found
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    if [ -n "$found" ] && [ -x "$found/initdb" ]; then echo "$found"; return; fi
    if command -v initdb >/dev/null; then dirname "$(command -v initdb)"; return; fi
    echo "no PostgreSQL server binaries (initdb, pg_ctl) found: install postgresql or set PG_BIN" >&2
    exit 1
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "$command" in
start)
    bin=$(find_bin)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '${PG_LISTEN:-127.0.0.1}'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
fsync = on
EOF
    if [ -n "${PG_HBA_NET:-}" ]; then
        echo "host all all $PG_HBA_NET trust" >>"$dir/data/pg_hba.conf"
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -q -c "CREATE DATABASE warden" >/dev/null
    echo "$port" >"$dir/port"
    echo "postgresql://postgres@127.0.0.1:$port/warden"
    ;;
restart)
    # pg_ctl restart -m fast: every session ended at once (in-flight transactions rolled back).
    bin=$(find_bin)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 30 restart >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    ;;
stop)
    if [ -d "$dir/data" ]; then
        bin=$(find_bin)
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
