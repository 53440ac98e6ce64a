#!/usr/bin/env bash
# Stop what start-cluster.sh started in DIR (one slurmd, or one per node: slurmd-node1.pid ...).
dir=$(realpath -m "$1")
for pidfile in "$dir"/slurmd.pid "$dir"/slurmd-*.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
  [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
done
exit 0
