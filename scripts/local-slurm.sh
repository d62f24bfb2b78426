#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, with accounting and fake GPUs, for
# testing the SLURM profile (tests/test_slurm.py, docs/slurm.md).
#
#   scripts/local-slurm.sh start    install what is missing, start everything, wait until the node is idle
#   scripts/local-slurm.sh status   the daemons, their PIDs, sinfo
#   scripts/local-slurm.sh stop     cancel this cluster's jobs, stop the daemons it started (by PID), take
#                                   its configuration out of /etc/slurm (any earlier one is put back)
#
# Debian 12 packages (Slurm 22.05, munge 0.5, MariaDB 10.11), run as root, no
# systemd: the daemons are started directly, bound to 127.0.0.1. State, spool,
# logs, PID files, the munge socket and the MariaDB data directory all live
# under one folder, $CAUSALPOS_SLURM_DIR (default /tmp/causalpos-slurm):
#
#   munge/     munged's socket, PID file, log, seed (owner munge)
#   mariadb/   MariaDB's data directory, socket, PID file, log (owner mysql)
#   state/     slurmctld's StateSaveLocation (owner slurm)
#   spool/     slurmd's SlurmdSpoolDir
#   run/       PID files of slurmctld, slurmd, slurmdbd
#   log/       slurmctld.log, slurmd.log, slurmdbd.log
#   gpu/       nvidia0 ... the GPUs' device files: /dev/null under other names
#
# Two partitions on the one node, as profiles/slurm-test/partitions.yaml
# describes them: cpu (the default) and gpu. The node has GPUS (8) GPUs as a
# generic resource (gres) with no GPU behind them: SLURM allocates and
# accounts them like real ones (sbatch --gpus=1 gets one, sacct's AllocTRES
# says gres/gpu=1, the job's CUDA_VISIBLE_DEVICES names it), and the job
# finds no CUDA device, so the pipeline's `device: auto` runs it on the CPU.
#
# The configuration goes where the Slurm commands look without SLURM_CONF:
# /etc/slurm/slurm.conf, gres.conf and slurmdbd.conf (a file there that this
# script did not write is first copied to $CAUSALPOS_SLURM_DIR/backup/, and
# put back by `stop`). `stop` removes what it wrote: the client tools stay
# installed, and with a slurm.conf naming a stopped controller every Slurm
# command, and every start of Snakemake (its SLURM executor plugin runs
# `scontrol show config`), would wait MessageTimeout - 1 = 9 s for it; with no
# configuration they fail at once.
#
# Environment: CAUSALPOS_SLURM_DIR, CAUSALPOS_SLURM_TIMEOUT (seconds to wait
# for the node, default 120), CAUSALPOS_SLURM_DB_PORT (MariaDB's port on
# 127.0.0.1, default 3366 so that it does not meet a system MariaDB on 3306).
set -euo pipefail

DIR=${CAUSALPOS_SLURM_DIR:-/tmp/causalpos-slurm}
TIMEOUT=${CAUSALPOS_SLURM_TIMEOUT:-120}
DB_PORT=${CAUSALPOS_SLURM_DB_PORT:-3366}
CLUSTER=causalpos
PARTITION=cpu       # the default partition; GPU_PARTITION has the same node, for jobs that ask for a GPU
GPU_PARTITION=gpu
# GPUs of the node: one per job that profiles/slurm-test runs at once (jobs: 8), so no GPU job waits for a GPU
GPUS=8
NODE=$(hostname -s)
CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
MARKER="# written by causalpos scripts/local-slurm.sh"
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)

MUNGE_DIR=$DIR/munge
GPU_DIR=$DIR/gpu
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
DB_DIR=$DIR/mariadb
DB_DATA=$DB_DIR/data
DB_SOCKET=$DB_DIR/mariadb.sock
# daemon name -> PID file, and the executable name (/proc/PID/comm) it must have
declare -A PIDFILE=(
    [munged]=$MUNGE_DIR/munged.pid
    [mariadbd]=$DB_DIR/mariadbd.pid
    [slurmdbd]=$DIR/run/slurmdbd.pid
    [slurmctld]=$DIR/run/slurmctld.pid
    [slurmd]=$DIR/run/slurmd.pid
)
declare -A LOGFILE=(
    [munged]=$MUNGE_DIR/munged.log
    [mariadbd]=$DB_DIR/mariadb.log
    [slurmdbd]=$DIR/log/slurmdbd.log
    [slurmctld]=$DIR/log/slurmctld.log
    [slurmd]=$DIR/log/slurmd.log
)
ORDER=(munged mariadbd slurmdbd slurmctld slurmd)
# Stopped in this order, each group together (each daemon takes ~2 s): the Slurm daemons before the
# accounting daemon they report to, the database and munge (which authenticates them all) last.
STOP_GROUPS=("slurmd slurmctld" "slurmdbd" "mariadbd munged")

say() { echo "local-slurm: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

need_root() { [[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts daemons)"; }

# PID of a running daemon started by this script, or nothing. The PID file must
# name a live process whose executable is that daemon (no kill of a reused PID).
running_pid() {
    local name=$1 file=${PIDFILE[$1]} pid
    [[ -s $file ]] || return 0
    pid=$(tr -dc '0-9' <"$file")
    [[ -n $pid ]] && is_daemon "$pid" "$name" && echo "$pid"
    return 0
}

# is_daemon PID NAME: PID is alive and is NAME (not a later process that got the same PID)
is_daemon() {
    [[ -d /proc/$1 && $(cat "/proc/$1/comm" 2>/dev/null) == "$2" ]]
}

show_logs() {
    local name
    for name in "${ORDER[@]}"; do
        if [[ -s ${LOGFILE[$name]} ]]; then
            echo "----- ${LOGFILE[$name]} (last 25 lines)" >&2
            tail -n 25 "${LOGFILE[$name]}" >&2
        fi
    done
}

fail() {
    say "ERROR: $*"
    show_logs
    exit 1
}

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND once a second
wait_for() {
    local seconds=$1 what=$2
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || fail "$what did not come up within ${seconds}s"
        sleep 1
    done
}

install_packages() {
    local missing=0 cmd
    for cmd in munged mungekey slurmctld slurmd slurmdbd sbatch sacct sacctmgr mariadbd mariadb-install-db; do
        command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || missing=1
    done
    ((missing)) || return 0
    say "installing ${PACKAGES[*]} (apt-get)"
    # No service may start from a package's postinst (no systemd here, and we
    # start the daemons ourselves, on our own directories).
    local policy_added=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_added=1
    fi
    local rc=0
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${PACKAGES[@]}"
    } >"/tmp/causalpos-slurm-apt.log" 2>&1 || rc=$?
    ((policy_added)) && rm -f /usr/sbin/policy-rc.d
    if ((rc != 0)); then
        tail -n 30 /tmp/causalpos-slurm-apt.log >&2
        die "apt-get install failed (full output: /tmp/causalpos-slurm-apt.log)"
    fi
}

ensure_users() {
    local user
    for user in munge slurm mysql; do
        id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
    done
}

# write_if_changed FILE OWNER MODE < content
write_if_changed() {
    local file=$1 owner=$2 mode=$3 tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if [[ -e $file ]] && ! grep -qF "$MARKER" "$file"; then
        mkdir -p "$DIR/backup"
        cp -p "$file" "$DIR/backup/$(basename "$file").$(date +%s)"
        say "kept a copy of the existing $file in $DIR/backup/"
    fi
    if ! cmp -s "$tmp" "$file" 2>/dev/null; then
        mkdir -p "$(dirname "$file")"
        install -o "$owner" -m "$mode" "$tmp" "$file"
    else
        chown "$owner" "$file"
        chmod "$mode" "$file"
    fi
    rm -f "$tmp"
}

make_dirs() {
    mkdir -p "$DIR"
    chmod 755 "$DIR"
    install -d -o munge -g munge -m 755 "$MUNGE_DIR"
    install -d -o mysql -g mysql -m 750 "$DB_DIR"
    install -d -o slurm -g slurm -m 755 "$DIR/state" "$DIR/log" "$DIR/run"
    install -d -o root -g root -m 755 "$DIR/spool" "$GPU_DIR"
    # slurmd drops a GPU gres without device files (File=) and refuses a plain file: character devices with
    # /dev/null's numbers (1, 3), so nothing could use them as a GPU
    local i
    for ((i = 0; i < GPUS; i++)); do
        [[ -c $GPU_DIR/nvidia$i ]] || mknod -m 666 "$GPU_DIR/nvidia$i" c 1 3
    done
}

write_configs() {
    local cpus mem_mib db_pass
    # Six CPUs per core: the test jobs are short and mostly wait (for the plugin's next status check, ~40 s
    # apart once nothing has finished for a while, or, one of them, for its time limit), so with one CPU per
    # core the cores stood half idle while the DAG's 18 figure jobs went two at a time; on two cores, room
    # for the tests' DAG (8 jobs at a time) and the few jobs that run beside it.
    # SlurmdParameters=config_overrides lets slurmd take the node as configured.
    cpus=$((6 * $(nproc --all)))
    # Memory is bookkeeping here (TaskPlugin=task/none, no cgroups: no job is held to its request), and the
    # jobs ask for what rules/resources.yaml says (up to 32 GB: train, emergence; the tests check they do),
    # so the node declares 256 GiB: room for 8 such requests at once, whatever this machine has
    # (config_overrides again). The tiny jobs use a few hundred MB each.
    mem_mib=$((256 * 1024))
    if [[ ! -s $DIR/.dbpass ]]; then
        (umask 077 && head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$DIR/.dbpass")
    fi
    db_pass=$(cat "$DIR/.dbpass")

    write_if_changed "$CONF" root 644 <<EOF
$MARKER
# A one-node cluster on loopback for causalpos's SLURM tests; state under $DIR.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CryptoType=crypto/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=${PIDFILE[slurmctld]}
SlurmdPidFile=${PIDFILE[slurmd]}
SlurmctldLogFile=${LOGFILE[slurmctld]}
SlurmdLogFile=${LOGFILE[slurmd]}
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
# A job's processes are its batch script's process group: tracked by parentage (proctrack/linuxproc), a
# cancelled job's Snakemake that outlived its shell (hung in its shutdown, reparented to init) escaped the
# SIGKILL at the job's end and stayed forever.
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol for an hour: the plugin's squeue
# status command needs several minutes, more on a slow machine, where its checks
# come further apart (sacct reads slurmdbd anyway).
MinJobAge=3600
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# sacct keeps each job's comment, where the Snakemake plugin names the job's rule (rule_<rule>_wildcards_...)
AccountingStoreFlags=job_comment
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
# the munge socket for talking to slurmdbd (AuthInfo covers the rest)
AccountingStoragePass=$MUNGE_SOCKET
# GPUs as a generic resource (gres.conf: one device file each, under $GPU_DIR), tracked in accounting
GresTypes=gpu
AccountingStorageTRES=gres/gpu
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mib Gres=gpu:$GPUS State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=$GPU_PARTITION Nodes=$NODE MaxTime=INFINITE State=UP
EOF

    write_if_changed "$GRES_CONF" root 644 <<EOF
$MARKER
NodeName=$NODE Name=gpu File=$GPU_DIR/nvidia[0-$((GPUS - 1))]
EOF

    write_if_changed "$DBD_CONF" slurm 600 <<EOF
$MARKER
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=slurm
PidFile=${PIDFILE[slurmdbd]}
LogFile=${LOGFILE[slurmdbd]}
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db
EOF
}

start_munge() {
    [[ -n $(running_pid munged) ]] && return 0
    if [[ ! -s /etc/munge/munge.key ]]; then
        mkdir -p /etc/munge
        mungekey --create --keyfile=/etc/munge/munge.key
    fi
    chown munge:munge /etc/munge /etc/munge/munge.key
    chmod 700 /etc/munge
    chmod 600 /etc/munge/munge.key
    rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged --socket="$MUNGE_SOCKET" --pid-file="${PIDFILE[munged]}" \
        --log-file="${LOGFILE[munged]}" --seed-file="$MUNGE_DIR/munged.seed" ||
        fail "munged did not start"
    wait_for 20 "munge" bash -c "munge -n -S '$MUNGE_SOCKET' | unmunge -S '$MUNGE_SOCKET'"
}

db() { mariadb --no-defaults --socket="$DB_SOCKET" -u root "$@"; }

start_mariadb() {
    if [[ -z $(running_pid mariadbd) ]]; then
        if [[ ! -d $DB_DATA/mysql ]]; then
            say "initialising MariaDB in $DB_DATA"
            install -d -o mysql -g mysql -m 750 "$DB_DATA"
            mariadb-install-db --no-defaults --user=mysql --datadir="$DB_DATA" \
                --auth-root-authentication-method=socket --skip-test-db >"$DB_DIR/install.log" 2>&1 ||
                { tail -n 30 "$DB_DIR/install.log" >&2; die "mariadb-install-db failed"; }
        fi
        say "starting mariadbd on 127.0.0.1:$DB_PORT"
        rm -f "$DB_SOCKET"
        setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DB_DATA" --socket="$DB_SOCKET" \
            --pid-file="${PIDFILE[mariadbd]}" --log-error="${LOGFILE[mariadbd]}" \
            --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
            --innodb-buffer-pool-size=128M --innodb-log-file-size=64M --innodb-lock-wait-timeout=900 \
            </dev/null >/dev/null 2>&1 &
        wait_for 60 "mariadbd" mariadb-admin --no-defaults --socket="$DB_SOCKET" -u root ping
        wait_for 10 "the MariaDB PID file" test -s "${PIDFILE[mariadbd]}"
    fi
    local pass
    pass=$(cat "$DIR/.dbpass")
    db <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
EOF
}

start_slurmdbd() {
    if [[ -z $(running_pid slurmdbd) ]]; then
        say "starting slurmdbd"
        /usr/sbin/slurmdbd || fail "slurmdbd did not start"
    fi
    # the first start creates the tables (a few seconds)
    wait_for 60 "slurmdbd" sacctmgr -n list cluster
    if ! sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null || fail "sacctmgr add cluster $CLUSTER failed"
    fi
}

start_slurmctld() {
    [[ -n $(running_pid slurmctld) ]] && return 0
    say "starting slurmctld"
    /usr/sbin/slurmctld || fail "slurmctld did not start"
    wait_for 30 "slurmctld" scontrol ping
}

start_slurmd() {
    [[ -n $(running_pid slurmd) ]] && return 0
    say "starting slurmd"
    /usr/sbin/slurmd || fail "slurmd did not start"
}

node_state() { sinfo -h -N -n "$NODE" -p "$PARTITION" -o %T 2>/dev/null | head -n 1; }

wait_idle() {
    local deadline=$((SECONDS + TIMEOUT)) state resumed=0
    while :; do
        state=$(node_state)
        case $state in
            idle | mixed | allocated | completing) break ;;
            *drain* | down* | fail*)
                # e.g. left drained by an earlier run: bring it back once
                if ((!resumed)); then
                    scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
                    resumed=1
                fi
                ;;
        esac
        if ((SECONDS >= deadline)); then
            sinfo -N -l >&2 || true
            fail "node $NODE is '${state:-unknown}', not idle, after ${TIMEOUT}s"
        fi
        sleep 1
    done
}

start() {
    need_root
    local t0=$SECONDS
    install_packages
    ensure_users
    make_dirs
    write_configs
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurmctld
    start_slurmd
    wait_idle
    say "up in $((SECONDS - t0))s: cluster $CLUSTER, partitions $PARTITION and $GPU_PARTITION, node $NODE" \
        "($(node_state), $GPUS GPUs); files under $DIR"
    sinfo
}

# stop_daemons NAME...: SIGTERM to the PIDs in their PID files, wait for all, SIGKILL those that hang
stop_daemons() {
    local name pid i alive
    local -A pids=()
    for name in "$@"; do
        pid=$(running_pid "$name")
        if [[ -n $pid ]]; then
            say "stopping $name (PID $pid)"
            kill -TERM "$pid" 2>/dev/null || true
            pids[$name]=$pid
        fi
    done
    for ((i = 0; i < 300; i++)); do
        alive=0
        for name in "${!pids[@]}"; do
            is_daemon "${pids[$name]}" "$name" && alive=1
        done
        ((alive)) || break
        sleep 0.1
    done
    for name in "${!pids[@]}"; do
        pid=${pids[$name]}
        if is_daemon "$pid" "$name"; then
            say "$name (PID $pid) did not stop in 30 s; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
        fi
    done
    for name in "$@"; do
        rm -f "${PIDFILE[$name]}"
    done
}

stop() {
    need_root
    # cancel this cluster's jobs first, so that no job step outlives slurmd
    if [[ -n $(running_pid slurmctld) ]] && grep -qF "$MARKER" "$CONF" 2>/dev/null; then
        local jobs
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [[ -n $jobs ]]; then
            say "cancelling jobs: $(echo $jobs)"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            local i
            for ((i = 0; i < 30; i++)); do
                [[ -z $(squeue -h -o %i 2>/dev/null || true) ]] && break
                sleep 1
            done
        fi
    fi
    local group
    for group in "${STOP_GROUPS[@]}"; do
        # shellcheck disable=SC2086
        stop_daemons $group
    done
    remove_configs
    say "stopped (files kept under $DIR)"
}

# Take the configuration this script wrote out of /etc/slurm; put back the one it replaced, if any (the
# newest backup: each start backs up the file it finds there unless this script wrote it).
remove_configs() {
    local file backup latest
    for file in "$CONF" "$GRES_CONF" "$DBD_CONF"; do
        if ! { [[ -e $file ]] && grep -qF "$MARKER" "$file"; }; then
            continue
        fi
        rm -f "$file"
        latest=""
        for backup in "$DIR/backup/$(basename "$file")".*; do # <name>.<epoch>: the glob sorts them oldest first
            [[ -e $backup ]] && latest=$backup
        done
        if [[ -n $latest ]]; then
            mv "$latest" "$file"
            say "put back $file (from $latest)"
        else
            say "removed $file"
        fi
    done
}

status() {
    local name pid up=0 total=0
    for name in "${ORDER[@]}"; do
        pid=$(running_pid "$name")
        total=$((total + 1))
        if [[ -n $pid ]]; then
            up=$((up + 1))
            printf '%-10s running  PID %-8s log %s\n' "$name" "$pid" "${LOGFILE[$name]}"
        else
            printf '%-10s stopped                log %s\n' "$name" "${LOGFILE[$name]}"
        fi
    done
    if [[ -n $(running_pid slurmctld) ]]; then
        sinfo || true
    fi
    ((up == total))
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
