#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests, from Debian's postgresql package: its own data
# directory and port, run as the 'postgres' system user (the server refuses root), on loopback.
# Prints the SQLAlchemy URL.   tests/postgres/start-server.sh DIR PORT
set -euo pipefail
dir=$(realpath -m "$1"); port=$2
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
mkdir -p "$dir"
chown postgres "$dir"
run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
run "'$bin/initdb' -D '$dir/data' -U gpucompat --auth=trust -E UTF8 >/dev/null"
run "'$bin/pg_ctl' -D '$dir/data' -l '$dir/server.log' -o \"-p $port -k /tmp -c listen_addresses=127.0.0.1\" -w start >/dev/null"
echo "postgresql+psycopg://gpucompat@127.0.0.1:$port/postgres"
