#!/usr/bin/env bash
# A node with an empty disk joins a two-node cluster holding KEYS keys and catches up from
# its snapshot, while a memory cgroup holds the new node's process, and its page cache, to
# LIMIT. Prints how long the catch-up took and the memory both ends used.
#
# Needs root (cgroup v1 or v2) and a release build:
#     cargo build --release --manifest-path replicated/Cargo.toml
#     sudo replicated/scripts/catch-up-under-a-memory-limit.sh
# Settings (environment): KEYS (10000000), LIMIT (512M), WORK (/tmp/bloomkv-catch-up),
# BIN (replicated/target/release/bloomkv-node), PORT (21100), EVERY (500: the log entries
# between snapshots, each a write of 1,000 keys, so the new node can only catch up from a
# snapshot).
set -euo pipefail
KEYS=${KEYS:-10000000}
LIMIT=${LIMIT:-512M}
WORK=${WORK:-/tmp/bloomkv-catch-up}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$HERE/target/release/bloomkv-node}
PORT=${PORT:-21100}
EVERY=${EVERY:-500}
A1=127.0.0.1:$((PORT + 1)); A2=127.0.0.1:$((PORT + 2)); A3=127.0.0.1:$((PORT + 3))
GROUP=bloomkv-catch-up-$$

if [ -d /sys/fs/cgroup/memory ]; then
    CG=/sys/fs/cgroup/memory/$GROUP
    mkdir "$CG"
    echo "$LIMIT" > "$CG/memory.limit_in_bytes"
    PEAK=$CG/memory.max_usage_in_bytes
else
    CG=/sys/fs/cgroup/$GROUP
    mkdir "$CG"
    echo "$LIMIT" > "$CG/memory.max"
    PEAK=$CG/memory.peak
fi

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rmdir "$CG" 2>/dev/null || true
}
trap cleanup EXIT

rm -rf "$WORK" && mkdir -p "$WORK"
"$BIN" serve --id 1 --addr "$A1" --dir "$WORK/n1" --snapshot-every "$EVERY" 2> "$WORK/n1.log" & PIDS+=($!)
"$BIN" serve --id 2 --addr "$A2" --dir "$WORK/n2" --snapshot-every "$EVERY" 2> "$WORK/n2.log" & PIDS+=($!)
LEADER_PID=${PIDS[0]}
sleep 1
"$BIN" client --addr "$A1" init "1=$A1,2=$A2"
"$BIN" client --addr "$A1" load "$KEYS"
# A last write past the load, so that the log holds entries the snapshot does not.
"$BIN" client --addr "$A1" put last-key last-value > /dev/null
du -sh "$WORK/n1/sm/"[0-9]* | sed 's/^/leader state machine: /'
du -ch "$WORK/n1/sm/"snapshot-*.data | tail -1 | sed 's/^/leader snapshot data: /'

# The new node starts inside the cgroup, with an empty directory.
sh -c "echo \$\$ > $CG/cgroup.procs; exec $BIN serve --id 3 --addr $A3 --dir $WORK/n3" \
    2> "$WORK/n3.log" & PIDS+=($!)
NEW_PID=${PIDS[2]}
sleep 1
applied() {
    "$BIN" client --addr "$1" status | grep -o 'last_applied_index: Some([0-9]*)' | grep -o '[0-9]*'
}
target=$(applied "$A1")
started=$(date +%s.%N)
# The leader answers once the learner is added; the new node's own status says when it has
# caught up.
"$BIN" client --addr "$A1" add-learner 3 "$A3"
until [ "$(applied "$A3" 2> /dev/null || echo 0)" -ge "$target" ]; do sleep 0.2; done
ended=$(date +%s.%N)
for key in key0000000000000 key0000000004242 "key$(printf %013d $((KEYS - 1)))"; do
    [ "$("$BIN" client --addr "$A3" get "$key" --stale)" = \
      "$("$BIN" client --addr "$A1" get "$key" --stale)" ]
done
[ "$("$BIN" client --addr "$A3" get last-key --stale)" = last-value ]
echo "caught up in $(echo "$ended - $started" | bc) s"
echo "new node: peak of the cgroup (process and page cache) $(($(cat "$PEAK") >> 20)) MiB of $LIMIT;" \
    "resident peak $(awk '/VmHWM/ {print int($2 / 1024)}' /proc/$NEW_PID/status) MiB"
echo "leader: resident peak $(awk '/VmHWM/ {print int($2 / 1024)}' /proc/$LEADER_PID/status) MiB"
"$BIN" client --addr "$A3" status
