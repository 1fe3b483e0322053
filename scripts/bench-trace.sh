#!/usr/bin/env bash
# The cost of `iowarp trace`, in three cases: fio 4 KiB random reads
# (psync) on tmpfs, 1 MiB sequential reads on tmpfs, and 4 KiB random
# reads of a file in an iowarp mount (FUSE, the daemon started here).
# Each case runs fio untraced, untraced while a trace of another (idle)
# process is attached (what the tracepoints cost every process on the
# machine while a trace runs: the programs run and filter it out, the
# floor under the traced figure), and traced by `iowarp trace --`,
# alternated REPS times in one run. Prints each triple and, per case over
# all of them, the ratios to untraced of the IOPS and of the fio thread's
# CPU time per read (user + system: the kernel-side tracing runs in the
# traced thread, so the difference is the tracer's cost per read, in ns,
# and waiting for a CPU on a loaded machine does not enter it). Part of
# `make bench`. EVERY=1: with --output (every call an event to user
# space, nothing counted in the kernel). CASES: which to run (default
# "rand4k seq1m mount").
set -euo pipefail
BIN=${BIN:-bin/iowarp}
RUNTIME=${RUNTIME:-2}
REPS=${REPS:-5}
CASES=${CASES:-rand4k seq1m mount}
if [ "$(id -u)" != 0 ] || [ ! -e /sys/kernel/btf/vmlinux ]; then
	echo "trace overhead: skipped (needs root and a BPF-capable kernel)"
	exit 0
fi
dir=$(mktemp -d /dev/shm/iowarp-bench-trace.XXXXXX)
work=$(mktemp -d /tmp/iowarp-bench-trace.XXXXXX)
# The untraced runs get a cgroup of their own too, as `iowarp trace --`
# gives the traced ones.
cg=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)/iowarp-bench-trace.$$
mkdir "$cg"
cleanup() {
	if mountpoint -q "$work/mnt" 2>/dev/null; then
		"$BIN" runtime stop "$work/mnt" --control-dir "$work/ctl" --timeout 60s >/dev/null 2>&1 || umount -l "$work/mnt"
	fi
	rm -rf "$dir" "$work"
	rmdir "$cg" 2>/dev/null || true
}
trap cleanup EXIT
incg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
traced=("$BIN" trace --top 1 --control-dir "$work/ctl")
if [ -n "${EVERY:-}" ]; then
	traced+=(--output "$dir/events.jsonl")
fi
# run FILE RW BS CMD...: one fio run under CMD; prints "IOPS CPU-ns-per-read".
run() {
	local file=$1 rw=$2 bs=$3
	shift 3
	"$@" fio --name=r --filename="$file" --size=256m --rw="$rw" --bs="$bs" --ioengine=psync \
		--runtime="$RUNTIME" --time_based --output-format=json --output="$work/out.json" >/dev/null 2>&1
	/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"]
cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] * 1e6
print("%d %.0f" % (j["read"]["iops"], cpu / ios))' "$work/out.json"
}
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
# mount: an iowarp daemon on $work/mnt, RAM tier large enough for the file.
mount_iowarp() {
	mkdir -p "$work/mnt" "$work/backing"
	cat >"$work/config.yaml" <<YAML
backing: $work/backing
mode: writeback
tiers:
  - {name: ram, kind: ram, capacity: 512MiB}
control_dir: $work/ctl
log_level: warn
YAML
	"$BIN" mount "$work/mnt" --config "$work/config.yaml" --daemon --log-file "$work/iowarp.log" \
		|| { cat "$work/iowarp.log" >&2; exit 1; }
}
# bench NAME FILE RW BS: the three legs, REPS times; the summary line.
bench() {
	local name=$1 file=$2 rw=$3 bs=$4 sum=""
	run "$file" "$rw" "$bs" incg >/dev/null # lay out the file
	for _ in $(seq "$REPS"); do
		read -r pi pc < <(run "$file" "$rw" "$bs" incg)
		read -r ai ac < <(attached run "$file" "$rw" "$bs" incg)
		read -r ti tc < <(run "$file" "$rw" "$bs" "${traced[@]}" --)
		echo "fio $name: untraced $pi IOPS ($pc ns CPU/read), another process traced $ai ($ac), traced $ti ($tc)"
		sum="$sum $pi $pc $ai $ac $ti $tc"
	done
	/usr/bin/python3 -c '
import sys
v = [float(x) for x in sys.argv[3:]]
pi, pc, ai, ac, ti, tc = (sum(v[i::6]) for i in range(6))
n = len(v) // 6
print("trace overhead, %s: traced/untraced IOPS = %.2fx, CPU per read %.2fx: %.0f ns per traced read, of which %.0f ns "
      "the tracepoints cost any process while a trace runs (IOPS %.2fx, CPU %.2fx) (%d runs each, load %s)"
      % (sys.argv[1], ti / pi, tc / pc, (tc - pc) / n, (ac - pc) / n, ai / pi, ac / pc, n, sys.argv[2]))' \
		"$name" "$(cut -d' ' -f1 /proc/loadavg)" $sum
}
for c in $CASES; do
	case $c in
	rand4k) bench "4k randread tmpfs" "$dir/f" randread 4k ;;
	seq1m) bench "1M seqread tmpfs" "$dir/f" read 1m ;;
	mount)
		mount_iowarp
		bench "4k randread iowarp mount (FUSE)" "$work/mnt/f" randread 4k
		;;
	*) echo "bench-trace: unknown case $c (rand4k, seq1m, mount)" >&2; exit 2 ;;
	esac
done
