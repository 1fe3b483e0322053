#!/bin/bash
# coldread.sh: cold sequential read of a file on the backing dir, read
# directly and through the mounts of one or more iowarp binaries, in one
# run, interleaved, after `echo 3 > /proc/sys/vm/drop_caches` before each
# read; prints each figure, its ratio to the backing dir read just before
# it, the daemon's CPU seconds per GiB read (utime+stime: less noisy than
# MiB/s on a loaded machine) and the load average. Needs root.
#
#   scripts/coldread.sh                          # bin/iowarp
#   BINS="old=/tmp/iowarp.old new=bin/iowarp" scripts/coldread.sh
#   EXTRA_new="direct_stage_in: false" BINS="new=bin/iowarp" scripts/coldread.sh
#
# env: SZ (MiB, 1024), BS (fio bs, 1M), REP (3), RA (readahead, 32MiB),
# EXTRA_<name> (config lines for that mount).
set -euo pipefail
SZ=${SZ:-1024} BS=${BS:-1M} REP=${REP:-3} RA=${RA:-32MiB}
BINS=${BINS:-"mount=bin/iowarp"}
w=$(mktemp -d /tmp/iowarp-coldread.XXXXXX)
names=()
declare -A bin
for nb in $BINS; do
	n=${nb%%=*}
	names+=("$n")
	bin[$n]=$(readlink -f "${nb#*=}")
done
cleanup() {
	set +e
	for n in "${names[@]}"; do
		mountpoint -q "$w/$n/mnt" && { "${bin[$n]}" runtime stop "$w/$n/mnt" --control-dir "$w/$n/ctl" --timeout 60s >/dev/null 2>&1 || umount -l "$w/$n/mnt"; }
	done
	rm -rf "$w"
}
trap cleanup EXIT
mkdir -p "$w/base"
for n in "${names[@]}"; do
	d=$w/$n
	mkdir -p "$d/mnt" "$d/backing" "$d/ctl"
	extra=EXTRA_$n
	printf 'backing: %s\nmode: writeback\nreadahead: %s\ntiers:\n  - name: ram\n    kind: ram\n    capacity: 3GiB\ncontrol_dir: %s\nlog_level: warn\n%s\n' \
		"$d/backing" "$RA" "$d/ctl" "${!extra:-}" >"$d/config.yaml"
	"${bin[$n]}" mount "$d/mnt" --config "$d/config.yaml" --daemon --log-file "$d/log" || { cat "$d/log"; exit 1; }
done
rd() { fio --name=c --filename="$1" --rw=read --bs="$BS" --size="${SZ}m" --ioengine=psync --thread --output-format=json 2>/dev/null | jq '.jobs[0].read.bw_bytes/1048576|floor'; }
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for r in $(seq 1 "$REP"); do
	dd if=/dev/urandom of="$w/base/f" bs=1M count="$SZ" status=none
	for n in "${names[@]}"; do cp "$w/base/f" "$w/$n/backing/f"; done
	sync
	line="rep $r:"
	for n in "${names[@]}"; do
		echo 3 >/proc/sys/vm/drop_caches
		b=$(rd "$w/base/f")
		pid=$(pgrep -f "mount $w/$n/mnt" | head -1)
		c0=$(cpu "$pid")
		echo 3 >/proc/sys/vm/drop_caches
		m=$(rd "$w/$n/mnt/f")
		c1=$(cpu "$pid")
		line+=" backing dir $b MiB/s, $n $m MiB/s ($(awk -v a="$b" -v b="$m" 'BEGIN{printf "%.2f", b/a}')x, daemon $(awk -v c=$((c1 - c0)) -v s="$SZ" 'BEGIN{printf "%.2f", c/100/(s/1024)}') CPU s/GiB) |"
	done
	echo "$line load $(cut -d' ' -f1-3 /proc/loadavg)"
	for n in "${names[@]}"; do rm -f "$w/$n/backing/f"; done
done
for n in "${names[@]}"; do
	echo "$n: $("${bin[$n]}" stat "$w/$n/mnt" --control-dir "$w/$n/ctl" --json |
		jq -c '{prefetched_pages,prefetch_hits,prefetch_wasted,staged_bytes,staged_direct_bytes,read_around,staged_behind_pages,read_misses}')"
done
