#!/usr/bin/env bash
dir=$(realpath -m "$1")
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "'$bin/pg_ctl' -D '$dir/data' -m immediate stop" >/dev/null 2>&1; else "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1; fi
exit 0
