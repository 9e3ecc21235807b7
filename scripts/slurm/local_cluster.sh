#!/usr/bin/env bash
# A real Slurm cluster on this machine (slurmctld, one slurmd per node, munge; Debian's
# slurm-wlm), for the launch tests and for trying troupe under Slurm (docs/launch.md):
#
#   scripts/slurm/local_cluster.sh [--nodes N] [--cpus C] -- CMD [ARGS...]
#
# starts N nodes (default 3) named n1..nN, each a `slurmd -N nX` on a port of its own and with C
# CPUs (default 4; Slurm believes the config, SlurmdParameters=config_overrides), waits until
# every node is idle, runs CMD with SLURM_CONF exported (so srun, sbatch, squeue and scancel
# reach this cluster), then cancels every job and stops the daemons. The exit code is CMD's, 1
# when the cluster does not come up, 2 for a usage error. Every daemon runs in the foreground as
# a child of this script, on free ports, with its own munge key and socket, in a temp directory
# that is removed afterwards (kept, with the daemons' logs printed, when something failed).
set -euo pipefail

usage() {
  echo "usage: scripts/slurm/local_cluster.sh [--nodes N] [--cpus C] -- CMD [ARGS...]" >&2
  exit 2
}
nodes=3
cpus=4
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]?$ ]] || usage; nodes=$2; shift 2 ;;
    --cpus) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage; cpus=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -ge 1 ] || usage
for tool in munged slurmctld slurmd srun scontrol sinfo scancel; do
  command -v "$tool" >/dev/null || {
    echo "local_cluster.sh: $tool is missing; run scripts/setup.sh" >&2
    exit 2
  }
done

# A job inside a job would talk to the outer cluster.
while read -r name; do unset "$name"; done < <(env | grep -oE '^(SLURM|SBATCH|SRUN|SALLOC)_[A-Z_]*' || true)

dir=$(mktemp -d /tmp/troupe-slurm.XXXXXX)
chmod 755 "$dir"  # munged needs every directory above its socket searchable
mkdir -p "$dir"/munge "$dir"/state "$dir"/log "$dir"/run
chmod 755 "$dir"/munge
for i in $(seq 1 "$nodes"); do mkdir -p "$dir/spool/n$i"; done
pids=()
cmd_pid=""
failed=0

# `count` consecutive TCP ports that no socket uses, from a random base below the kernel's
# ephemeral range (there an outgoing connection of any process could take one meanwhile).
free_ports() {
  local count=$1 base port taken low
  read -r low _ < /proc/sys/net/ipv4/ip_local_port_range
  [ "$low" -gt 12000 ] || low=32768
  for _ in $(seq 1 50); do
    base=$((10000 + RANDOM % (low - 10000 - count)))
    taken=0
    for port in $(seq "$base" $((base + count - 1))); do
      if ss -Htan "sport = :$port" | grep -q .; then taken=1; break; fi
    done
    [ "$taken" = 0 ] && { echo "$base"; return 0; }
  done
  echo "local_cluster.sh: no $count free ports found" >&2
  return 1
}

gone() { [ ! -e "/proc/$1/stat" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

stop() {
  local pid left
  for pid in "$@"; do [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 1 150); do
    left=0
    for pid in "$@"; do [ -n "$pid" ] && ! gone "$pid" && left=1; done
    [ "$left" = 0 ] && return 0
    sleep 0.1
  done
  for pid in "$@"; do [ -n "$pid" ] && ! gone "$pid" && kill -KILL "$pid" 2>/dev/null; done
  return 0
}

teardown() {
  set +e
  [ -n "$cmd_pid" ] && kill -TERM "$cmd_pid" 2>/dev/null
  if [ -n "${SLURM_CONF:-}" ] && [ -e "$SLURM_CONF" ]; then
    scancel --full --quiet --user="$(id -un)" 2>/dev/null
    for _ in $(seq 1 100); do
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  # The Slurm daemons, then munged; KILL what has not gone after 15 s.
  stop "${pids[@]:1}"
  stop "${pids[0]:-}"
  wait 2>/dev/null
  if [ "$failed" = 1 ]; then
    echo "local_cluster.sh: the cluster's logs (kept in $dir):" >&2
    tail -n 20 "$dir"/log/*.log "$dir"/munge/munged.log 2>/dev/null >&2
  else
    rm -rf "$dir"
  fi
}
trap teardown EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

fail() {
  failed=1
  echo "local_cluster.sh: $*" >&2
  exit 1
}

dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged -F --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
  --seed-file="$dir/munge/munged.seed" >"$dir/log/munged.out" 2>&1 &
pids+=($!)

base=$(free_ports $((nodes + 1))) || fail "no free ports"
user=$(id -un)
export SLURM_CONF="$dir/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=troupe
SlurmctldHost=localhost
SlurmctldPort=$base
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
SlurmUser=$user
SlurmdUser=$user
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,bf_interval=1
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=10
MinJobAge=30
NodeName=n[1-$nodes] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$((base + 1))-$((base + nodes))] CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

for _ in $(seq 1 100); do
  [ -S "$dir/munge/munge.socket" ] && break
  gone "${pids[0]}" && fail "munged exited"
  sleep 0.05
done
slurmctld -D -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do
  scontrol ping 2>/dev/null | grep -q "is UP" && break
  gone "${pids[1]}" && fail "slurmctld exited"
  sleep 0.05
done
for i in $(seq 1 "$nodes"); do
  slurmd -D -f "$SLURM_CONF" -N "n$i" >"$dir/log/slurmd.n$i.out" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 300); do
  [ "$(sinfo -h -N -o %t 2>/dev/null | grep -c idle)" = "$nodes" ] && break
  for pid in "${pids[@]}"; do gone "$pid" && fail "a daemon (pid $pid) exited"; done
  sleep 0.05
done
[ "$(sinfo -h -N -o %t | grep -c idle)" = "$nodes" ] || fail "the nodes did not become idle within 15 s"
echo "local_cluster.sh: $nodes nodes up (SLURM_CONF=$SLURM_CONF)" >&2

# In the background, so that a TERM reaches the trap at once (bash runs traps between commands).
set +e
"$@" </dev/null &
cmd_pid=$!
wait "$cmd_pid"
code=$?
cmd_pid=""
set -e
exit "$code"
