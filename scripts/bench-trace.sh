#!/usr/bin/env bash
# The cost of `iowarp trace`: fio 4 KiB random reads (psync) on tmpfs,
# untraced and traced, alternated REPS times in one run. Prints each pair
# and, over all of them, the ratio traced/untraced of the IOPS and of the
# fio thread's CPU time per read (user + system: the kernel-side tracing
# runs in the traced thread, so the difference is the tracer's cost per
# syscall, in ns, and waiting for a CPU on a loaded machine does not
# enter it). A third leg runs fio untraced while a trace of another
# process is attached: what the tracepoints cost every process on the
# machine (the programs run and filter it out), the floor under the
# traced figure. Part of `make bench`. EVERY=1: with --output (every call
# an event to user space, nothing counted in the kernel).
set -euo pipefail
BIN=${BIN:-bin/iowarp}
RUNTIME=${RUNTIME:-2}
REPS=${REPS:-5}
if [ "$(id -u)" != 0 ] || [ ! -e /sys/kernel/btf/vmlinux ]; then
	echo "trace overhead: skipped (needs root and a BPF-capable kernel)"
	exit 0
fi
dir=$(mktemp -d /dev/shm/iowarp-bench-trace.XXXXXX)
# The untraced runs get a cgroup of their own too, as `iowarp trace --`
# gives the traced ones.
cg=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)/iowarp-bench-trace.$$
mkdir "$cg"
trap 'rm -rf "$dir"; rmdir "$cg" 2>/dev/null || true' EXIT
incg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
traced=("$BIN" trace --top 1)
if [ -n "${EVERY:-}" ]; then
	traced+=(--output "$dir/events.jsonl")
fi
# run CMD...: one fio run under CMD; prints "IOPS CPU-ns-per-read".
run() {
	"$@" fio --name=r --filename="$dir/f" --size=256m --rw=randread --bs=4k --ioengine=psync \
		--runtime="$RUNTIME" --time_based --output-format=json --output="$dir/out.json" >/dev/null 2>&1
	/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"]
cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] * 1e6
print("%d %.0f" % (j["read"]["iops"], cpu / ios))' "$dir/out.json"
}
run incg >/dev/null # lay out the file
# attached CMD...: CMD while `iowarp trace` traces an idle process.
attached() {
	sleep 600 &
	local idle=$!
	"$BIN" trace --pid "$idle" --duration 600s >/dev/null 2>&1 &
	local tracer=$!
	sleep 1 # loaded and attached
	"$@"
	kill "$tracer" "$idle" 2>/dev/null || true
	wait "$tracer" "$idle" 2>/dev/null || true
}
sum=""
for _ in $(seq "$REPS"); do
	read -r pi pc < <(run incg)
	read -r ai ac < <(attached run incg)
	read -r ti tc < <(run "${traced[@]}" --)
	echo "fio 4k randread tmpfs: untraced $pi IOPS ($pc ns CPU/read), another process traced $ai ($ac), traced $ti ($tc)"
	sum="$sum $pi $pc $ai $ac $ti $tc"
done
/usr/bin/python3 -c '
import sys
v = [float(x) for x in sys.argv[2:]]
pi, pc, ai, ac, ti, tc = (sum(v[i::6]) for i in range(6))
n = len(v) // 6
print("trace overhead: traced/untraced IOPS = %.2fx, CPU per read %.2fx: %.0f ns per traced syscall, of which %.0f ns "
      "the tracepoints cost any process while a trace runs (IOPS %.2fx, CPU %.2fx) (%d runs each, load %s)"
      % (ti / pi, tc / pc, (tc - pc) / n, (ac - pc) / n, ai / pi, ac / pc, n, sys.argv[1]))' "$(cut -d' ' -f1 /proc/loadavg)" $sum
