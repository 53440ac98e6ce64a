#!/usr/bin/env bash
# Stop what start-cluster.sh started in DIR.
dir=$(realpath -m "$1")
for pid in slurmd slurmctld munged; do
  [ -f "$dir/$pid.pid" ] && kill "$(cat "$dir/$pid.pid")" 2>/dev/null
done
exit 0
