#!/usr/bin/env bash
# The main job's training with the monitor off (core 0) and on by default (core 1), side by side.
cd /work/main
export OMP_NUM_THREADS=1
taskset -c 0 .venv/bin/python -m rlvr.trainer.recipes.r1zero -o runs/mcost_off --overwrite --eval-tasks 1 monitor_action=off > runs/mcost_off.log 2>&1 &
a=$!
taskset -c 1 .venv/bin/python -m rlvr.trainer.recipes.r1zero -o runs/mcost_log --overwrite --eval-tasks 1 > runs/mcost_log.log 2>&1 &
b=$!
echo "$a $b" > /work/tools/mcost.pids
wait $a $b
echo "done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> /work/tools/mcost.txt
