#!/usr/bin/env bash
# slurm.sh: a real one-node Slurm cluster on this machine (Debian's slurm-wlm + munge), for
# eagle-tui's opt-in scheduler tests; docs/large-capture.md ("A real Slurm on one machine")
# explains it.
#
#   slurm.sh install       apt-get install slurm-wlm and munge, create the munge key (root)
#   slurm.sh start DIR     write DIR/slurm.conf, start munged (if none answers), slurmctld and
#                          slurmd; return when the node is idle, print the SLURM_CONF to export
#   slurm.sh stop DIR      scontrol shutdown (slurmctld + slurmd), then end the munged that
#                          `start` started, by its PID
#   slurm.sh status DIR    what runs (exit 0 when the cluster answers, 3 when it is stopped)
#
# Every command is idempotent: installing twice, starting a running cluster or stopping a
# stopped one says so and succeeds. The cluster is one node (`hostname -s`) in one partition,
# `debug`; its daemons listen on ports the OS picks at `start` (other servers on this machine
# keep theirs); jobs run as the user who submits them. Slurm's state (queued jobs) is kept in
# DIR/state across stop/start. Environment: SLURM_START_TIMEOUT (seconds, default 60) and
# SLURM_STOP_TIMEOUT (30).
set -euo pipefail

PROG="slurm.sh"
START_TIMEOUT="${SLURM_START_TIMEOUT:-60}"
STOP_TIMEOUT="${SLURM_STOP_TIMEOUT:-30}"
MUNGE_KEY=/etc/munge/munge.key
MUNGE_PIDFILE=/run/munge/munged.pid
PACKAGES=(slurm-wlm munge)

say() { echo "[$PROG $(date +%H:%M:%S)] $*"; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

need_root() {
    [ "$(id -u)" = 0 ] || die "$1 needs root (it runs apt-get / the Slurm daemons as root): run it as root or with sudo"
}

installed() {
    local pkg
    for pkg in "${PACKAGES[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || return 1
    done
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null
}

need_installed() {
    installed || die "slurm-wlm and munge are not installed: run '$0 install' first"
}

versions() {
    dpkg-query -W -f='${Package} ${Version}  ' "${PACKAGES[@]}"
}

# The PID in FILE when that process is alive and is NAME (a stale file names nobody).
live_pid() {
    local file="$1" name="$2" pid
    [ -f "$file" ] || return 1
    pid="$(tr -dc '0-9' <"$file")"
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    [ "$(cat "/proc/$pid/comm")" = "$name" ] || return 1
    echo "$pid"
}

# Until PID has exited or SECONDS pass (1 on timeout).
wait_gone() {
    local pid="$1" seconds="$2" deadline
    deadline=$(( $(date +%s) + seconds ))
    while [ -d "/proc/$pid" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

munge_answers() {
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1
}

cluster_dir() {
    [ -n "${1:-}" ] || die "which directory? give the cluster's directory, e.g. '$0 $CMD /tmp/slurm'"
    realpath -m -- "$1"
}

# ---------------------------------------------------------------------------------------------

cmd_install() {
    need_root install
    if installed; then
        say "already installed: $(versions)"
    else
        local t0=$SECONDS
        say "apt-get install ${PACKAGES[*]} (about 2 minutes) ..."
        apt-get update -qq || die "apt-get update failed (network? /etc/apt/sources.list?)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${PACKAGES[@]}" >/dev/null \
            || die "apt-get install ${PACKAGES[*]} failed (see apt-get's message above)"
        say "installed in $((SECONDS - t0)) s: $(versions)"
    fi
    if [ ! -s "$MUNGE_KEY" ]; then
        say "creating the munge key $MUNGE_KEY"
        mungekey --create --keyfile="$MUNGE_KEY" || die "mungekey could not create $MUNGE_KEY"
    fi
    chown munge:munge "$MUNGE_KEY" && chmod 400 "$MUNGE_KEY"
}

start_munged() {
    local dir="$1" pid
    if munge_answers; then
        say "munged already answers (not started here; stop leaves it running)"
        return
    fi
    mkdir -p /run/munge && chown munge:munge /run/munge
    say "starting munged"
    su -s /bin/sh munge -c /usr/sbin/munged || die "munged did not start (journal: /var/log/munge/munged.log)"
    pid="$(live_pid "$MUNGE_PIDFILE" munged)" || die "munged started but $MUNGE_PIDFILE names no live munged"
    echo "$pid" >"$dir/munged.pid"   # ours: stop ends exactly this one
    munge_answers || die "munged (pid $pid) runs but 'munge -n | unmunge' fails: see /var/log/munge/munged.log"
}

# Two distinct ports the OS says are free now (slurmctld's, slurmd's).
free_ports() {
    python3 - <<'PY'
import socket
held = [socket.socket() for _ in range(2)]
for s in held:
    s.bind(("", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))
PY
}

write_conf() {
    local dir="$1" node ctld_port slurmd_port
    node="$(hostname -s)"
    read -r ctld_port slurmd_port < <(free_ports)
    cat >"$dir/slurm.conf" <<CONF
# Written by scripts/slurm/slurm.sh start $(date -u +%FT%TZ): a one-node cluster for tests.
ClusterName=local
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MpiDefault=none
NodeName=$node CPUs=$(nproc) RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
    say "wrote $dir/slurm.conf (node $node, slurmctld port $ctld_port, slurmd port $slurmd_port)"
}

node_state() {
    sinfo -h -o '%T' 2>/dev/null | head -n 1
}

wait_idle() {
    local dir="$1" deadline state=""
    deadline=$(( $(date +%s) + START_TIMEOUT ))
    while :; do
        state="$(node_state || true)"
        case "$state" in idle|mixed|allocated) return 0 ;; esac
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "--- $dir/log/slurmctld.log (tail)" >&2; tail -n 15 "$dir/log/slurmctld.log" >&2 || true
            echo "--- $dir/log/slurmd.log (tail)" >&2; tail -n 15 "$dir/log/slurmd.log" >&2 || true
            die "the node is not idle after ${START_TIMEOUT}s (sinfo says '${state:-nothing}'); logs above"
        fi
        sleep 0.5
    done
}

other_slurmctld() {
    local dir="$1" pid
    for pid in $(pgrep -x slurmctld || true); do
        [ "$(live_pid "$dir/slurmctld.pid" slurmctld || true)" = "$pid" ] || { echo "$pid"; return 0; }
    done
    return 1
}

cmd_start() {
    need_root start
    need_installed
    local dir t0=$SECONDS other
    dir="$(cluster_dir "${1:-}")"
    mkdir -p "$dir"/{spool,state,log} || die "cannot create $dir"
    export SLURM_CONF="$dir/slurm.conf"
    start_munged "$dir"
    if live_pid "$dir/slurmctld.pid" slurmctld >/dev/null; then
        say "slurmctld already running (pid $(live_pid "$dir/slurmctld.pid" slurmctld)) with $SLURM_CONF"
    else
        if other="$(other_slurmctld "$dir")"; then
            die "another slurmctld (pid $other, $(tr '\0' ' ' </proc/"$other"/cmdline)) runs on this machine: stop it first ('$0 stop ITS_DIR')"
        fi
        write_conf "$dir"
        say "starting slurmctld"
        slurmctld -f "$SLURM_CONF" || die "slurmctld did not start: see $dir/log/slurmctld.log"
    fi
    if live_pid "$dir/slurmd.pid" slurmd >/dev/null; then
        say "slurmd already running (pid $(live_pid "$dir/slurmd.pid" slurmd))"
    else
        say "starting slurmd"
        slurmd -f "$SLURM_CONF" || die "slurmd did not start: see $dir/log/slurmd.log"
    fi
    wait_idle "$dir"
    say "cluster up in $((SECONDS - t0)) s: $(sinfo -h -o '%P %a %D %T %N' | head -n 1)"
    echo "export SLURM_CONF=$SLURM_CONF"
}

# Until the daemon whose PID was PID has exited (SIGTERM after STOP_TIMEOUT); "" = it was not up.
stop_daemon() {
    local name="$1" pid="$2"
    [ -n "$pid" ] || return 0
    if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
        say "$name (pid $pid) still runs ${STOP_TIMEOUT}s after the shutdown: sending it SIGTERM"
        kill -TERM "$pid" 2>/dev/null || true
        wait_gone "$pid" 10 || die "$name (pid $pid) does not stop: end it by hand (kill -KILL $pid)"
    fi
    say "$name (pid $pid) stopped"
}

cmd_stop() {
    need_root stop
    local dir pid ctld slurmd
    dir="$(cluster_dir "${1:-}")"
    export SLURM_CONF="$dir/slurm.conf"
    ctld="$(live_pid "$dir/slurmctld.pid" slurmctld || true)"
    slurmd="$(live_pid "$dir/slurmd.pid" slurmd || true)"
    if [ -n "$ctld" ]; then
        say "scontrol shutdown (slurmctld and slurmd)"
        scontrol shutdown || say "scontrol shutdown failed; the daemons get SIGTERM after ${STOP_TIMEOUT}s"
    elif [ -n "$slurmd" ]; then
        say "slurmctld is not running; ending slurmd (pid $slurmd) with SIGTERM"
        kill -TERM "$slurmd" 2>/dev/null || true
    else
        say "no slurmctld or slurmd of $dir runs"
    fi
    stop_daemon slurmctld "$ctld"
    stop_daemon slurmd "$slurmd"
    if pid="$(live_pid "$dir/munged.pid" munged)"; then
        kill -TERM "$pid"
        wait_gone "$pid" "$STOP_TIMEOUT" || die "munged (pid $pid) does not stop: end it by hand (kill -KILL $pid)"
        say "munged (pid $pid) stopped"
    elif pid="$(live_pid "$MUNGE_PIDFILE" munged)"; then
        say "leaving munged (pid $pid) running: this script did not start it"
    fi
    rm -f "$dir/munged.pid"
}

cmd_status() {
    local dir pid name up=0
    dir="$(cluster_dir "${1:-}")"
    if installed; then echo "installed: $(versions)"; else echo "installed: no (run '$0 install')"; fi
    if pid="$(live_pid "$MUNGE_PIDFILE" munged)"; then
        echo "munged:    pid $pid$( [ -f "$dir/munged.pid" ] && echo ' (started by this script)')"
    else
        echo "munged:    not running"
    fi
    for name in slurmctld slurmd; do
        if pid="$(live_pid "$dir/$name.pid" "$name")"; then
            printf '%-10s pid %s\n' "$name:" "$pid"; up=$((up + 1))
        else
            printf '%-10s not running\n' "$name:"
        fi
    done
    [ "$up" = 2 ] || exit 3
    export SLURM_CONF="$dir/slurm.conf"
    echo "SLURM_CONF=$SLURM_CONF"
    sinfo
    squeue
}

CMD="${1:-}"
[ $# -gt 0 ] && shift
case "$CMD" in
    install) cmd_install ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    -h|--help|help) usage ;;
    "") echo "$PROG: error: no command given" >&2; usage ;;
    *) echo "$PROG: error: unknown command '$CMD'" >&2; usage ;;
esac
