#!/usr/bin/env bash
# The cost of `iowarp trace`: fio 4 KiB random reads (psync) on tmpfs,
# untraced and traced, alternated REPS times in one run; prints each
# figure and the ratio traced/untraced. Part of `make bench`.
set -euo pipefail
BIN=${BIN:-bin/iowarp}
RUNTIME=${RUNTIME:-5}
REPS=${REPS:-2}
if [ "$(id -u)" != 0 ] || [ ! -e /sys/kernel/btf/vmlinux ]; then
	echo "trace overhead: skipped (needs root and a BPF-capable kernel)"
	exit 0
fi
dir=$(mktemp -d /dev/shm/iowarp-bench-trace.XXXXXX)
trap 'rm -rf "$dir"' EXIT
iops() {
	"$@" fio --name=r --filename="$dir/f" --size=256m --rw=randread --bs=4k --ioengine=psync \
		--runtime="$RUNTIME" --time_based --output-format=terse 2>/dev/null |
		awk -F';' 'NF > 8 { print $8 }'
}
plain=0 traced=0
for _ in $(seq "$REPS"); do
	p=$(iops env)
	t=$(iops "$BIN" trace --top 1 --)
	echo "fio 4k randread tmpfs: untraced $p IOPS, traced $t IOPS"
	plain=$((plain + p)) traced=$((traced + t))
done
awk -v p="$plain" -v t="$traced" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
	'BEGIN { printf "trace overhead: traced/untraced = %.2fx (load %s)\n", t / p, l }'
