#!/usr/bin/env bash
# record-fixtures.sh OUT_DIR: record what a real Slurm says about a job array's life, for the
# parsers that follow a job from the head node (tests/fixtures/slurm/ holds one recording).
#
# Needs a running cluster (scripts/slurm/slurm.sh start DIR; SLURM_CONF exported). It submits
#   1. `sbatch --array=0-3 --requeue --open-mode=append` of a job that prints its SLURM_*
#      environment and sleeps a while (task 3 then fails: exit 3); records squeue / scontrol
#      while tasks run and pend, requeues task 1 while it runs (`scontrol requeue`), restarts
#      it at once (`scontrol update jobid=… StartTime=now`), records again, and once every
#      task has ended (and what squeue says of a job the controller does not know: one it
#      forgot, MinJobAge = 300 s after it ended, looks the same);
#   2. arrays whose task ids are not 0..N-1 (`--array=0-15:2`, `--array=1-4`,
#      `--array=1,3,7`), a job that is no array, and an array task running `srun -n 2`,
#      keeping the environment each task saw.
# Every file is written as `$ <command>` followed by its stdout and stderr; the environments
# as `env-*.txt`. Environment: RECORD_SLEEP (seconds each array task of (1) sleeps, 20).
set -euo pipefail

PROG="record-fixtures.sh"
SLEEP="${RECORD_SLEEP:-20}"
say() { echo "[$PROG $(date +%H:%M:%S)] $*"; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

[ $# = 1 ] || die "usage: $PROG OUT_DIR (with SLURM_CONF of a running cluster exported)"
[ -n "${SLURM_CONF:-}" ] || die "SLURM_CONF is not set: export the one 'slurm.sh start DIR' printed"
sinfo -h >/dev/null 2>&1 || die "sinfo fails with SLURM_CONF=$SLURM_CONF: is the cluster running? ('slurm.sh status DIR')"
OUT="$(realpath -m -- "$1")"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/slurm-record.XXXXXX)"
cd "$WORK"

# `$ command` then what it printed (stdout and stderr, as a user sees them) into OUT/NAME.
record() {
    local name="$1"; shift
    { echo "\$ $*"; "$@" 2>&1 || echo "[exit status $?]"; } >"$OUT/$name"
    say "recorded $name"
}

# Until `squeue` shows the job's task in STATE (or the job has left the queue, for "gone").
wait_task() {
    local id="$1" state="$2" deadline now
    deadline=$(( $(date +%s) + 300 ))
    while :; do
        now="$(squeue -h -r -j "$id" -o '%T' 2>/dev/null | head -n 1)"
        if [ "$state" = gone ]; then [ -z "$now" ] && return 0
        elif [ "$now" = "$state" ]; then return 0; fi
        [ "$(date +%s)" -lt "$deadline" ] || die "task $id is '$now', not '$state', after 300 s"
        sleep 0.5
    done
}

cat >env-and-sleep.sh <<SH
#!/bin/sh
env | grep -E '^SLURM' | sort
sleep $SLEEP
echo "task \$SLURM_ARRAY_TASK_ID done (restart \${SLURM_RESTART_COUNT:-0})"
[ "\$SLURM_ARRAY_TASK_ID" != 3 ] || exit 3
SH
cat >env.sh <<'SH'
#!/bin/sh
env | grep -E '^SLURM' | sort
SH
chmod +x env-and-sleep.sh env.sh

# -- 1. an array of four, one task requeued while it runs ------------------------------------
JOB="$(sbatch --parsable --array=0-3 --requeue --open-mode=append -o 'array-%a.out' env-and-sleep.sh)"
say "submitted array job $JOB"
wait_task "${JOB}_1" RUNNING
record squeue-running.txt squeue
record squeue-running-r.txt squeue -r -j "$JOB"
record squeue-running-format.txt squeue -h -r -j "$JOB" -o '%i|%A|%F|%K|%T|%r|%N|%M|%S'
record squeue-running.json squeue --json -j "$JOB"
record scontrol-show-job-running.txt scontrol show job "$JOB"
record scontrol-oneliner-running.txt scontrol -o show job "$JOB"

record scontrol-requeue.txt scontrol requeue "${JOB}_1"
wait_task "${JOB}_1" PENDING
record squeue-after-requeue.txt squeue -r -j "$JOB"
record scontrol-show-task-requeued.txt scontrol show job "${JOB}_1"
record scontrol-update-starttime.txt scontrol update "jobid=${JOB}_1" StartTime=now
wait_task "${JOB}_1" RUNNING
record squeue-requeued-running.txt squeue -r -j "$JOB"
record scontrol-show-task-restarted.txt scontrol show job "${JOB}_1"

for task in 0 1 2 3; do wait_task "${JOB}_$task" gone; done
record squeue-done.txt squeue -r -j "$JOB"
record squeue-done-all-states.txt squeue -h -r -t all -j "$JOB" -o '%i|%A|%F|%K|%T|%r|%N|%M|%S'
record squeue-unknown-job.txt squeue -j 999999
record scontrol-show-job-done.txt scontrol show job "$JOB"
record scontrol-oneliner-done.txt scontrol -o show job "$JOB"
record sacct.txt sacct -j "$JOB"
record sacct-jobcomp.txt sacct -c -o JobID,JobName,State,ExitCode,NodeList,Start,End
for task in 0 1 2 3; do cp "array-$task.out" "$OUT/env-array-0-3-task-$task.txt"; done

# -- 2. the environment of other arrays, a plain job and an srun step ------------------------
submit_env() {
    local name="$1"; shift
    local id
    id="$(sbatch --parsable "$@" -o "$name-%a.out" env.sh)"
    wait_task "$id" gone
    say "job $id ($*) done"
}
submit_env step --array=0-15:2
submit_env from1 --array=1-4
submit_env list --array=1,3,7
cp step-4.out "$OUT/env-array-0-15-step-2-task-4.txt"
cp from1-1.out "$OUT/env-array-1-4-task-1.txt"
cp list-3.out "$OUT/env-array-1,3,7-task-3.txt"

PLAIN="$(sbatch --parsable -o plain.out env.sh)"
wait_task "$PLAIN" gone
cp plain.out "$OUT/env-plain-job.txt"

SRUN="$(sbatch --parsable --array=0-1 -n 2 -o 'srun-%a.out' --wrap "srun --label $WORK/env.sh")"
wait_task "$SRUN" gone
cp srun-0.out "$OUT/env-array-srun-n2-task-0.txt"

say "all recorded in $OUT (scratch $WORK left for a look; remove it when done)"
