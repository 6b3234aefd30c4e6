#!/usr/bin/env bash
# A one-node Slurm cluster on this Debian machine, for trying distexp under Slurm and for the tests
# (tests/test_slurm.py, .ci/run). Run as root:
#
#   scripts/slurm-cluster.sh up       install what is missing, start munge, MariaDB, slurmdbd,
#                                     slurmctld, slurmd; prints how long the start took
#   scripts/slurm-cluster.sh status   the daemons and `sinfo`
#   scripts/slurm-cluster.sh down     cancel every job, stop the daemons (by their PID files)
#
# Idempotent: `up` on a running cluster checks it and returns; `down` on a stopped one does nothing.
# No systemd or cgroups needed (proctrack/linuxproc, task/none, every daemon as root except munged
# and mariadbd). The node is `hostname -s` with CPUs=4 whatever the cores (config_overrides), so a
# 2-core machine runs a ps job (coordinator + 2 workers + 1 ps) at once; accounting (slurmdbd +
# MariaDB) is there because submitit polls `sacct`.
set -euo pipefail

CLUSTER=${SLURM_CLUSTER_NAME:-distexp}
CPUS=${SLURM_NODE_CPUS:-4}
NODE=$(hostname -s)
ETC=/etc/slurm
RUN=/run/slurm
LOG=/var/log/slurm
DB_PASS=distexp-local-only   # MariaDB user `slurm`, reachable on the unix socket only
PIDS=("$RUN/slurmd.pid" "$RUN/slurmctld.pid" "$RUN/slurmdbd.pid" /run/mysqld/mysqld.pid
      /run/munge/munged.pid)

die() { echo "slurm-cluster: error: $*" >&2; exit 1; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {print b - a}'; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() {  # wait_for <seconds> <what> <command...>
  local limit=$1 what=$2; shift 2
  for _ in $(seq $((limit * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  die "$what did not come up in ${limit} s (logs: $LOG/)"
}

install_packages() {
  local missing=()
  for p in slurm-wlm munge slurmdbd mariadb-server; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "slurm-cluster: apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

write_config() {
  local mem_mb
  mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
  install -d -m 755 "$ETC" "$RUN" "$LOG" /var/spool/slurmctld /var/spool/slurmd
  cat > "$ETC/slurm.conf" <<EOF
# written by distexp scripts/slurm-cluster.sh: a one-node cluster, no systemd or cgroups
ClusterName=$CLUSTER
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
KillWait=30
InactiveLimit=0
NodeName=$NODE CPUs=$CPUS RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  cat > "$ETC/slurmdbd.conf" <<EOF
# written by distexp scripts/slurm-cluster.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$ETC/slurmdbd.conf"  # slurmdbd refuses a readable one (it holds the password)
}

start_munge() {
  alive /run/munge/munged.pid && return
  install -d -o munge -g munge -m 755 /run/munge
  runuser -u munge -- /usr/sbin/munged
  wait_for 10 munged munge -n
}

start_mariadb() {
  if ! alive /run/mysqld/mysqld.pid; then
    install -d -o mysql -g mysql -m 755 /run/mysqld
    setsid runuser -u mysql -- /usr/sbin/mariadbd --pid-file=/run/mysqld/mysqld.pid \
      --socket=/run/mysqld/mysqld.sock --skip-networking </dev/null >>"$LOG/mariadb.log" 2>&1 &
    wait_for 30 MariaDB mariadb -uroot -e "select 1"
  fi
  mariadb -uroot <<EOF
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF
}

start_slurm() {
  if ! alive "$RUN/slurmdbd.pid"; then
    /usr/sbin/slurmdbd
    wait_for 30 slurmdbd sacctmgr -n list cluster
  fi
  sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
  alive "$RUN/slurmctld.pid" || /usr/sbin/slurmctld
  wait_for 30 slurmctld scontrol ping
  alive "$RUN/slurmd.pid" || /usr/sbin/slurmd
  # the node is idle (or mixed/allocated by jobs), not down/unknown
  wait_for 30 "node $NODE" bash -c "sinfo -h -n $NODE -o %T | grep -Eq '^(idle|mixed|allocated)'"
}

up() {
  [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons); received uid $(id -u)"
  [ -f /etc/debian_version ] || die "needs Debian (apt, slurm-wlm); this machine has no /etc/debian_version"
  local t0 all=1
  t0=$(date +%s.%N)
  install_packages
  for p in "${PIDS[@]}"; do alive "$p" || all=0; done
  if [ $all = 1 ] && scontrol ping >/dev/null 2>&1; then
    echo "slurm-cluster: already up (node $NODE, $(sinfo -h -n "$NODE" -o '%T, %c CPUs'))"
    return
  fi
  local t1
  t1=$(date +%s.%N)
  write_config
  start_munge
  start_mariadb
  start_slurm
  local t2
  t2=$(date +%s.%N)
  printf 'slurm-cluster: up in %.1f s (install %.1f s, start %.1f s): node %s, %s CPUs, cluster %s\n' \
    "$(secs "$t0" "$t2")" "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")" "$NODE" "$CPUS" "$CLUSTER"
}

stop_pid() {  # stop_pid <pidfile> <name>: SIGTERM, then SIGKILL after 10 s
  local f=$1 pid
  alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "slurm-cluster: $2 ($pid) ignored SIGTERM for 10 s: SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  if alive "$RUN/slurmctld.pid" && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
    echo "slurm-cluster: cancelling $(squeue -h -o %i | wc -l) job(s)"
    scancel --full $(squeue -h -o %i) 2>/dev/null || true
    for _ in $(seq 100); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  stop_pid "$RUN/slurmd.pid" slurmd
  stop_pid "$RUN/slurmctld.pid" slurmctld
  stop_pid "$RUN/slurmdbd.pid" slurmdbd
  stop_pid /run/mysqld/mysqld.pid mariadbd
  stop_pid /run/munge/munged.pid munged
  echo "slurm-cluster: down"
}

status() {
  local rc=0
  for p in "${PIDS[@]}"; do
    if alive "$p"; then echo "running  $(basename "$p" .pid) (pid $(cat "$p"))"
    else echo "stopped  $(basename "$p" .pid)"; rc=1; fi
  done
  [ $rc = 0 ] && sinfo
  return $rc
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
