#!/usr/bin/env bash
# A one-node Slurm cluster for the tests, from Debian's slurmctld, slurmd and munge:
# everything under DIR, its own munge socket and ports, two fake GPU types backed by
# plain files (gres.conf File=), no accounting daemon. Prints the SLURM_CONF path.
#   tests/slurm/start-cluster.sh DIR [NODES]
# FAKE_GPUS=N (one node only): N fake GPUs of each type instead of one, and CPUS=M declared CPUs
# (config_overrides lets slurmd accept more than the machine has): benchmarks/slurm_scale.py runs
# many cells at once with them. Unset, the cluster is the tests' own.
# NODES > 1: that many slurmd on this one machine, node1, node2 ..., each started with -N under its
# own name, with its own Port= (SLURMD_PORTS, one per node, else SLURMD_PORT + i - 1), spool
# directory, pid and log file (%n), and its own two fake GPUs. Debian's slurmd is not built with
# --enable-multiple-slurmd, but -N, per-node ports and %n work without it (slurm 22.05.8, checked here).
set -euo pipefail
dir=$(realpath -m "$1")
nodes=${2:-1}
host=$(hostname -s)
mkdir -p "$dir"/{state,spool,dev,log}
: > "$dir/dev/nvidia0"; : > "$dir/dev/nvidia1"
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge.key"
munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed"

cat > "$dir/slurm.conf" <<CONF
ClusterName=gpucompat
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=${SLURMCTLD_PORT:-16817}
SlurmdPort=${SLURMD_PORT:-16818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=600
KillWait=2
OverTimeLimit=0
MessageTimeout=20
CONF
if [ "$nodes" -eq 1 ]; then
  gpus=${FAKE_GPUS:-1}
  if [ -n "${CPUS:-}" ]; then echo "SlurmdParameters=config_overrides" >> "$dir/slurm.conf"; fi
  cat >> "$dir/slurm.conf" <<CONF
NodeName=$host NodeAddr=127.0.0.1 CPUs=${CPUS:-$(nproc)} RealMemory=2000 Gres=gpu:a100:$gpus,gpu:h100:$gpus Feature=fakegpu,hbm State=UNKNOWN
CONF
  cat > "$dir/gres.conf" <<CONF
NodeName=$host Name=gpu Type=a100 File=$dir/dev/nvidia0
NodeName=$host Name=gpu Type=h100 File=$dir/dev/nvidia1
CONF
  for i in $(seq 1 $((gpus - 1))); do  # FAKE_GPUS > 1: nvidia2, nvidia3 ... alternately a100 and h100
    : > "$dir/dev/nvidia$((2 * i))"; : > "$dir/dev/nvidia$((2 * i + 1))"
    printf 'NodeName=%s Name=gpu Type=a100 File=%s\nNodeName=%s Name=gpu Type=h100 File=%s\n' \
      "$host" "$dir/dev/nvidia$((2 * i))" "$host" "$dir/dev/nvidia$((2 * i + 1))" >> "$dir/gres.conf"
  done
else
  read -r -a ports <<< "${SLURMD_PORTS:-}"
  sed -i -e "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=$dir/spool/%n|" -e "s|^SlurmdPidFile=.*|SlurmdPidFile=$dir/slurmd-%n.pid|" \
    -e "s|^SlurmdLogFile=.*|SlurmdLogFile=$dir/log/slurmd-%n.log|" "$dir/slurm.conf"
  : > "$dir/gres.conf"
  for i in $(seq 1 "$nodes"); do
    mkdir -p "$dir/spool/node$i"
    : > "$dir/dev/node$i-nvidia0"; : > "$dir/dev/node$i-nvidia1"
    echo "NodeName=node$i NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[$((i - 1))]:-$((${SLURMD_PORT:-16818} + i - 1))}" \
      "CPUs=$(nproc) RealMemory=2000 Gres=gpu:a100:1,gpu:h100:1 Feature=fakegpu,hbm State=UNKNOWN" >> "$dir/slurm.conf"
    printf 'NodeName=node%s Name=gpu Type=%s File=%s\n' "$i" a100 "$dir/dev/node$i-nvidia0" "$i" h100 "$dir/dev/node$i-nvidia1" >> "$dir/gres.conf"
  done
fi
echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
if [ "$nodes" -eq 1 ]; then
  slurmd -f "$SLURM_CONF" -N "$host"
else
  for i in $(seq 1 "$nodes"); do slurmd -f "$SLURM_CONF" -N "node$i"; done
fi
for _ in $(seq 1 60); do
  if [ "$(sinfo -h -N -o %t 2>/dev/null | grep -cE '^(idle|mix)')" -ge "$nodes" ]; then echo "$SLURM_CONF"; exit 0; fi
  sleep 0.5
done
echo "the test cluster did not come up; logs in $dir/log" >&2
tail -n 20 "$dir"/log/*.log >&2
exit 1
