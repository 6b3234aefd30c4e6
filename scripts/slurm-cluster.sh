#!/usr/bin/env bash
# A one-node Slurm cluster on this Debian machine, for trying distexp under Slurm and for the tests
# (tests/cluster/test_slurm.py, .ci/run). Run as root:
#
#   scripts/slurm-cluster.sh up       install what is missing, start munge, MariaDB, slurmdbd,
#                                     slurmctld, slurmd; prints how long the start took
#   scripts/slurm-cluster.sh up --nodes 2
#                                     the same with N nodes, each slurmd in a network namespace of
#                                     its own (dxs-n1..N: hostname dx-n1.., 10.213.9.11..) joined by
#                                     veth pairs to a bridge in the controller's namespace (dxs-ctl:
#                                     hostname dx-ctl, 10.213.9.1: slurmctld, slurmdbd); names in
#                                     /etc/hosts between "# distexp-slurm" markers
#   scripts/slurm-cluster.sh exec CMD...
#                                     run CMD where Slurm's clients reach the controller: as is on
#                                     one node; in the controller's namespace (hostname dx-ctl) on N
#   scripts/slurm-cluster.sh status   the daemons and `sinfo`
#   scripts/slurm-cluster.sh down     cancel every job, stop the daemons (by their PID files),
#                                     remove the namespaces, links and /etc/hosts lines it made
#
# Only addresses inside the namespaces it creates are used (10.213.9.0/24 on the bridge in dxs-ctl);
# the machine's own namespace gets no address, route or link. Slurm's clients (srun, sbatch,
# squeue, sacct) must then run in dxs-ctl (`exec`), where the hostname resolves to the bridge.
# Namespaces are entered with `nsenter --net` + `unshare --uts`, not `ip netns exec` (which remounts
# /sys and leaves slurmd without cgroups: docs/facts.md#slurm-netns).
#
# Idempotent: `up` on a running cluster checks it and returns; `down` on a stopped one does nothing.
# No systemd or cgroups needed (proctrack/linuxproc, task/none, every daemon as root except munged
# and mariadbd). The node is `hostname -s` with CPUs=4 whatever the cores (config_overrides), so a
# 2-core machine runs a ps job (coordinator + 2 workers + 1 ps) at once; accounting (slurmdbd +
# MariaDB) is there because submitit polls `sacct`.
set -Eeuo pipefail
# never exit without a word: a command that fails under `set -e` names itself
trap 'rc=$?; echo "slurm-cluster: error: \`$BASH_COMMAND\` failed (exit $rc, line $LINENO)" >&2' ERR

CLUSTER=${SLURM_CLUSTER_NAME:-distexp}
CPUS=${SLURM_NODE_CPUS:-4}
NODE=$(hostname -s)
ETC=/etc/slurm
RUN=/run/slurm
LOG=/var/log/slurm
STATE=/var/spool/distexp-slurm  # its own StateSaveLocation: another cluster's cannot clash with it
DB_USER=distexp_slurm            # its own MariaDB user and database (unix socket only): another
DB_NAME=distexp_slurm_acct_db    # Slurm's `slurm` user with another password is left alone
DB_PASS=distexp-local-only
MARK="# distexp-slurm"           # what this script wrote in slurm.conf and /etc/hosts
NET=10.213.9                     # the bridge's /24, inside the namespaces only
CTL_NS=dxs-ctl CTL_HOST=dx-ctl
NODES=1
PIDS=("$RUN/slurmctld.pid" "$RUN/slurmdbd.pid" /run/mysqld/mysqld.pid /run/munge/munged.pid)

die() { echo "slurm-cluster: error: $*" >&2; exit 1; }
say() { echo "slurm-cluster: $*"; }
node_name() { echo "dx-n$1"; }   # node k of a several-node cluster (k = 1..N)
node_ns() { echo "dxs-n$1"; }
node_addr() { echo "$NET.$((10 + $1))"; }
in_ns() {  # in_ns <netns> <hostname> <command...>: a network namespace + a UTS one of its own
  local ns=$1 host=$2; shift 2
  nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$host" "$@"
}
running_nodes() {  # the node count of the cluster this script's slurm.conf describes, 0 if none
  [ -f "$ETC/slurm.conf" ] && grep -q "^$MARK" "$ETC/slurm.conf" || { echo 0; return; }
  sed -n "s/^$MARK nodes=\([0-9]*\).*/\1/p" "$ETC/slurm.conf" | head -1 | grep . || echo 1
}
ctl() {  # a Slurm client where it reaches this cluster's controller
  if [ "$(running_nodes)" -gt 1 ] && [ -e "/run/netns/$CTL_NS" ]; then
    in_ns "$CTL_NS" "$CTL_HOST" "$@"
  else
    "$@"
  fi
}
slurmd_pids() {  # the PID files of the running nodes' slurmd
  local n; n=$(running_nodes)
  if [ "$n" -gt 1 ]; then for k in $(seq "$n"); do echo "$RUN/slurmd-$(node_name "$k").pid"; done
  else echo "$RUN/slurmd.pid"; fi
}
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
  local mem_mb nodes_line=() ctl_host=$NODE
  mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9 / '"$NODES"'}' /proc/meminfo)
  install -d -m 755 "$ETC" "$RUN" "$LOG" "$STATE"
  if [ "$NODES" -gt 1 ]; then
    ctl_host="$CTL_HOST($NET.1)"
    for k in $(seq "$NODES"); do
      install -d -m 755 "/var/spool/slurmd-$(node_name "$k")"
      nodes_line+=("NodeName=$(node_name "$k") NodeAddr=$(node_addr "$k") CPUs=$CPUS RealMemory=$mem_mb State=UNKNOWN")
    done
  else
    install -d -m 755 /var/spool/slurmd
    nodes_line=("NodeName=$NODE CPUs=$CPUS RealMemory=$mem_mb State=UNKNOWN")
  fi
  local spool=/var/spool/slurmd dpid=$RUN/slurmd.pid dlog=$LOG/slurmd.log
  [ "$NODES" -gt 1 ] && spool=/var/spool/slurmd-%n dpid=$RUN/slurmd-%n.pid dlog=$LOG/slurmd-%n.log
  cat > "$ETC/slurm.conf" <<CONF
$MARK nodes=$NODES
# written by distexp scripts/slurm-cluster.sh: no systemd or cgroups
ClusterName=$CLUSTER
SlurmctldHost=$ctl_host
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
StateSaveLocation=$STATE
SlurmdSpoolDir=$spool
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$dpid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$dlog
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
KillWait=30
InactiveLimit=0
# a node that stops answering (its link cut) is DOWN after 30 s and its jobs end NODE_FAIL
SlurmdTimeout=30
$(printf '%s\n' "${nodes_line[@]}")
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  cat > "$ETC/slurmdbd.conf" <<CONF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
CONF
  chmod 600 "$ETC/slurmdbd.conf"  # slurmdbd refuses a readable one (it holds the password)
}

make_network() {  # the namespaces, the bridge in the controller's, a veth pair per node, names
  ip netns add "$CTL_NS" 2>/dev/null || [ -e "/run/netns/$CTL_NS" ] || die "ip netns add $CTL_NS failed"
  ip -n "$CTL_NS" link set lo up
  ip -n "$CTL_NS" link show dxbr >/dev/null 2>&1 || ip -n "$CTL_NS" link add dxbr type bridge
  ip -n "$CTL_NS" addr replace "$NET.1/24" dev dxbr
  ip -n "$CTL_NS" link set dxbr up
  local hosts="$NET.1 $CTL_HOST"
  for k in $(seq "$NODES"); do
    local ns; ns=$(node_ns "$k")
    ip netns add "$ns" 2>/dev/null || [ -e "/run/netns/$ns" ] || die "ip netns add $ns failed"
    ip -n "$ns" link set lo up
    if ! ip -n "$CTL_NS" link show "veth-n$k" >/dev/null 2>&1; then
      ip -n "$CTL_NS" link add "veth-n$k" type veth peer name eth0 netns "$ns"
    fi
    ip -n "$CTL_NS" link set "veth-n$k" master dxbr up
    ip -n "$ns" addr replace "$(node_addr "$k")/24" dev eth0
    ip -n "$ns" link set eth0 up
    hosts+=$'\n'"$(node_addr "$k") $(node_name "$k")"
  done
  remove_hosts
  printf '%s begin\n%s\n%s end\n' "$MARK" "$hosts" "$MARK" >> /etc/hosts
}

remove_hosts() {
  grep -q "^$MARK" /etc/hosts 2>/dev/null || return 0
  # /etc/hosts may be a bind mount: rewrite it in place, never replace the file
  local kept; kept=$(sed "/^$MARK begin/,/^$MARK end/d" /etc/hosts)
  printf '%s\n' "$kept" > /etc/hosts
}

remove_network() {  # whatever exists of it, in any state
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | { grep -E "^dxs-(ctl|n[0-9]+)$" || true; }); do
    ip netns delete "$ns" 2>/dev/null || say "could not delete network namespace $ns"
  done
  remove_hosts
}

start_munge() {
  alive /run/munge/munged.pid && return
  install -d -o munge -g munge -m 755 /run/munge
  runuser -u munge -- /usr/sbin/munged || die "munged did not start (see its log in /var/log/munge/)"
  wait_for 10 munged munge -n
}

start_mariadb() {
  if ! alive /run/mysqld/mysqld.pid; then
    install -d -o mysql -g mysql -m 755 /run/mysqld
    setsid runuser -u mysql -- /usr/sbin/mariadbd --pid-file=/run/mysqld/mysqld.pid \
      --socket=/run/mysqld/mysqld.sock --skip-networking </dev/null >>"$LOG/mariadb.log" 2>&1 &
    wait_for 30 MariaDB mariadb -uroot -e "select 1"
  fi
  # its own user: ALTER keeps the password this script knows even if the user existed
  mariadb -uroot <<SQL || die "MariaDB refused to create the user $DB_USER (see $LOG/mariadb.log)"
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
SQL
}

daemon() {  # daemon <name> <log> <command...>: start it, or one line with its log's last words
  local name=$1 log=$2; shift 2
  "$@" || die "$name did not start: $(tail -n 1 "$log" 2>/dev/null | cut -c1-300) ($log)"
}

ctl_daemon() {  # a controller-side daemon: in the controller's namespace on several nodes
  if [ "$NODES" -gt 1 ]; then in_ns "$CTL_NS" "$CTL_HOST" "$@"; else "$@"; fi
}

start_slurm() {
  alive "$RUN/slurmdbd.pid" || daemon slurmdbd "$LOG/slurmdbd.log" ctl_daemon /usr/sbin/slurmdbd
  wait_for 30 slurmdbd ctl sacctmgr -n list cluster
  ctl sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER" \
    || ctl sacctmgr -i add cluster "$CLUSTER" >/dev/null
  alive "$RUN/slurmctld.pid" || daemon slurmctld "$LOG/slurmctld.log" ctl_daemon /usr/sbin/slurmctld
  wait_for 30 slurmctld ctl scontrol ping
  local names=()
  if [ "$NODES" -gt 1 ]; then
    for k in $(seq "$NODES"); do
      local n; n=$(node_name "$k")
      names+=("$n")
      alive "$RUN/slurmd-$n.pid" || daemon "slurmd on $n" "$LOG/slurmd-$n.log" \
        in_ns "$(node_ns "$k")" "$n" /usr/sbin/slurmd -N "$n"
    done
  else
    names=("$NODE")
    alive "$RUN/slurmd.pid" || daemon slurmd "$LOG/slurmd.log" /usr/sbin/slurmd
  fi
  for n in "${names[@]}"; do  # each node idle (or mixed/allocated by jobs), not down/unknown
    wait_for 30 "node $n" node_ready "$n"
  done
}

node_ready() { ctl sinfo -h -n "$1" -o %T | grep -Eq '^(idle|mixed|allocated)'; }

foreign_ctld() {  # the PID of a slurmctld this script did not start, if any
  local mine=""
  alive "$RUN/slurmctld.pid" && grep -q "^$MARK" "$ETC/slurm.conf" 2>/dev/null && mine=$(cat "$RUN/slurmctld.pid")
  # not a zombie: just after `up`, slurmctld's daemonizing parent is one for a moment
  { pgrep -x slurmctld || true; } | { grep -vx "${mine:-none}" || true; } | while read -r pid; do
    grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null || echo "$pid"
  done | head -1
}

# A slurmctld this script did not start that does not answer `scontrol show config`: one that
# was just stopped and is still exiting (seen: `up --nodes 2` right after another Slurm was
# stopped), or one starting or stuck. Give it FOREIGN_WAIT_S to exit: gone, print nothing (`up`
# goes on as on a machine without it); still there, one line saying what was found.
FOREIGN_WAIT_S=${SLURM_FOREIGN_WAIT_S:-15}
foreign_answers() {  # foreign_answers <pid>: 0 it answers, 1 it exited; else the one line, exit 1
  local pid=$1 why
  why=$(scontrol show config 2>&1 >/dev/null) && return 0
  for _ in $(seq $((FOREIGN_WAIT_S * 10))); do
    kill -0 "$pid" 2>/dev/null || return 1
    scontrol show config >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "found a slurmctld not started by this script (pid $pid, $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-80 | sed 's/ *$//')) that" \
      "does not answer after ${FOREIGN_WAIT_S} s (scontrol show config: $(echo "${why:-no output}" | head -1));" \
      "if it is stopping, run 'up' again once it has exited; else stop it (kill $pid) and run 'up'"
}

up() {
  [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons); received uid $(id -u)"
  [ -f /etc/debian_version ] || die "needs Debian (apt, slurm-wlm); this machine has no /etc/debian_version"
  [[ "$NODES" =~ ^[1-9]$ ]] || die "--nodes: received '$NODES'; expected 1 to 9"
  local t0 ti all=1 other running
  t0=$(date +%s.%N)
  install_packages
  ti=$(date +%s.%N)
  other=$(foreign_ctld)
  if [ -n "$other" ] && ! foreign_answers "$other"; then other=""; fi  # it exited meanwhile
  if [ -n "$other" ]; then  # a Slurm someone else started: use it as is, or one line
    local name; name=$(scontrol show config 2>/dev/null | awk '$1 == "ClusterName" {print $3}' || true)
    if [ "$NODES" = 1 ] && scontrol ping >/dev/null 2>&1 && sacct -n -X -S now >/dev/null 2>&1 \
       && sinfo -h -o %T | grep -Eq '^(idle|mixed)'; then
      say "found a Slurm cluster not started by this script (slurmctld pid $other, cluster" \
          "${name:-?}: $(sinfo -h -o '%D node(s) %T' | paste -sd, -)) answering with accounting: using it as is; 'down' leaves it alone"
      touch "$RUN/foreign"
      return
    fi
    die "found a Slurm not started by this script (slurmctld pid $other, cluster ${name:-?}) that" \
        "$([ "$NODES" = 1 ] && echo "does not answer with an idle node and accounting" || echo "cannot give $NODES nodes in namespaces");" \
        "stop it first (or use it with 'up' for one node)"
  fi
  rm -f "$RUN/foreign"
  running=$(running_nodes)
  for p in "${PIDS[@]}" $(slurmd_pids); do alive "$p" || all=0; done
  if [ $all = 1 ] && [ "$running" = "$NODES" ] && ctl scontrol ping >/dev/null 2>&1; then
    say "already up ($NODES node(s): $(ctl sinfo -h -N -o '%N %T' | paste -sd, -))"
    return
  fi
  if alive "$RUN/slurmctld.pid" && [ "$running" != 0 ] && [ "$running" != "$NODES" ]; then
    say "a cluster of $running node(s) from this script is up: stopping it for one of $NODES"
    down >/dev/null
  fi
  local t1
  t1=$(date +%s.%N)
  write_config
  [ "$NODES" -gt 1 ] && make_network
  start_munge
  start_mariadb
  start_slurm
  local t2
  t2=$(date +%s.%N)
  printf 'slurm-cluster: up in %.1f s (install %.1f s, start %.1f s): %s, %s CPUs each, cluster %s\n' \
    "$(secs "$t0" "$t2")" "$(secs "$t0" "$ti")" "$(secs "$t1" "$t2")" \
    "$(ctl sinfo -h -N -o '%N' | paste -sd' ' -)" "$CPUS" "$CLUSTER"
  [ "$NODES" -gt 1 ] && say "Slurm's clients reach it from the controller's namespace: $0 exec srun -N$NODES hostname"
  return 0
}

stop_pid() {  # stop_pid <pidfile> <name>: SIGTERM, then SIGKILL after 10 s
  local f=$1 pid
  alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    say "$2 ($pid) ignored SIGTERM for 10 s: SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  if [ -e "$RUN/foreign" ]; then
    say "the running Slurm was started by someone else ('up' found it): left alone"
    rm -f "$RUN/foreign"
    return
  fi
  if alive "$RUN/slurmctld.pid" && [ -n "$(ctl squeue -h -o %i 2>/dev/null)" ]; then
    say "cancelling $(ctl squeue -h -o %i | wc -l) job(s)"
    ctl scancel --full $(ctl squeue -h -o %i) 2>/dev/null || true
    for _ in $(seq 100); do [ -z "$(ctl squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  local f
  for f in "$RUN"/slurmd.pid "$RUN"/slurmd-*.pid; do [ -e "$f" ] && stop_pid "$f" "$(basename "$f" .pid)"; done
  stop_pid "$RUN/slurmctld.pid" slurmctld
  stop_pid "$RUN/slurmdbd.pid" slurmdbd
  stop_pid /run/mysqld/mysqld.pid mariadbd
  stop_pid /run/munge/munged.pid munged
  # what a node's jobs left in its namespace (a task whose node was cut off), then the namespaces
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | { grep -E "^dxs-(ctl|n[0-9]+)$" || true; }); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  done
  remove_network
  say "down"
}

status() {  # informational: its own exit code (1 = something stopped), no ERR lines
  trap - ERR
  set +e
  local rc=0
  for p in "${PIDS[@]}" $(slurmd_pids); do
    if alive "$p"; then echo "running  $(basename "$p" .pid) (pid $(cat "$p"))"
    else echo "stopped  $(basename "$p" .pid)"; rc=1; fi
  done
  ip netns list 2>/dev/null | { grep -E "^dxs-" || true; } | sed "s/^/netns    /"
  [ $rc = 0 ] && ctl sinfo -N
  return $rc
}

cmd=${1:-}
shift || true
case "$cmd" in
  up)
    while [ $# -gt 0 ]; do
      case "$1" in
        --nodes) NODES=${2:-}; shift 2 || die "--nodes needs a number" ;;
        --nodes=*) NODES=${1#--nodes=}; shift ;;
        *) die "up: received '$1'; valid: --nodes N" ;;
      esac
    done
    up ;;
  down) down ;;
  status) status ;;
  exec) [ $# -gt 0 ] || die "exec needs a command"; trap - ERR; ctl "$@" ;;  # its own exit code
  *) echo "usage: $0 up [--nodes N] | down | status | exec CMD..." >&2; exit 2 ;;
esac
