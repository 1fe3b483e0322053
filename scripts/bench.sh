#!/usr/bin/env bash
# bench.sh: fio on tmpfs and on an iowarp mount, in the same run, and the
# ratio mount/tmpfs of every figure.
#
#   scripts/bench.sh                 # needs root, fio, jq and bin/iowarp (make bench)
#   SIZE=4g RUNTIME=30 scripts/bench.sh
#   MARKDOWN=1 scripts/bench.sh      # also print the README table
#
# Jobs (ioengine=psync, one job each, one file):
#   seqwrite  1 MiB sequential write of SIZE
#   seqread   1 MiB sequential read of that file
#   randread  4 KiB random read of that file, RUNTIME seconds
#   randwrite 4 KiB random write into a 256 MiB file, RUNTIME seconds
# The mount is iowarp in writeback mode over a temporary backing directory,
# with a RAM tier large enough to hold the files. Between jobs the script
# waits for the mount's write-back to drain so that one job's flush does not
# run during the next job.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-bin/iowarp}
SIZE=${SIZE:-1g}
RUNTIME=${RUNTIME:-15}
RAM=${RAM:-3GiB}

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mount)"
command -v fio >/dev/null || die "fio is missing (make deps)"
command -v jq >/dev/null || die "jq is missing (make deps)"
[ -x "$BIN" ] || die "$BIN is missing (make build)"
BIN=$(readlink -f "$BIN")

work=$(mktemp -d /tmp/iowarp-bench.XXXXXX)
mnt=$work/mnt tmp=$work/tmpfs ctl=$work/ctl
mkdir -p "$mnt" "$tmp" "$work/backing" "$work/nvme" "$ctl"

cleanup() {
	set +e
	if mountpoint -q "$mnt"; then
		"$BIN" runtime stop "$mnt" --control-dir "$ctl" --timeout 120s >/dev/null 2>&1 || umount -l "$mnt"
	fi
	mountpoint -q "$tmp" && umount "$tmp"
	rm -rf "$work"
}
trap cleanup EXIT

mount -t tmpfs -o size=$(( $(numfmt --from=iec "${SIZE^^}") + (512 << 20) )) tmpfs "$tmp"

cat >"$work/config.yaml" <<EOF
backing: $work/backing
mode: writeback
tiers:
  - name: ram
    kind: ram
    capacity: $RAM
  - name: nvme
    kind: file
    dir: $work/nvme
    capacity: 4GiB
control_dir: $ctl
log_level: warn
EOF
"$BIN" mount "$mnt" --config "$work/config.yaml" --daemon --log-file "$work/iowarp.log" \
	|| { cat "$work/iowarp.log" >&2; die "mount failed"; }

# drain waits until the mount has written everything back.
drain() {
	local dir=$1
	[ "$dir" = "$mnt" ] || return 0
	for _ in $(seq 1 600); do
		[ "$("$BIN" stat "$mnt" --control-dir "$ctl" --json | jq .dirty_bytes)" = 0 ] && return 0
		sleep 0.2
	done
	die "write-back did not drain in 120s"
}

# job NAME DIR fio-args... : runs fio, leaves the JSON in $work/NAME.DIR.json
job() {
	local name=$1 dir=$2 label
	shift 2
	label=$([ "$dir" = "$mnt" ] && echo iowarp || echo tmpfs)
	fio --name="$name" --directory="$dir" --ioengine=psync --numjobs=1 --group_reporting \
		--output-format=json --output="$work/$name.$label.json" "$@" >/dev/null
	drain "$dir"
}

for dir in "$tmp" "$mnt"; do
	job seqwrite "$dir" --rw=write --bs=1M --size="$SIZE" --filename=seq.dat
	job seqread "$dir" --rw=read --bs=1M --size="$SIZE" --filename=seq.dat
	job randread "$dir" --rw=randread --bs=4k --size="$SIZE" --filename=seq.dat \
		--time_based --runtime="$RUNTIME" --norandommap
	job randwrite "$dir" --rw=randwrite --bs=4k --size=256M --filename=rand.dat \
		--time_based --runtime="$RUNTIME" --norandommap
done

# get NAME LABEL JQ-EXPR
get() { jq -r ".jobs[0]$3" "$work/$1.$2.json"; }

rows=()
row() { # label, tmpfs value, iowarp value, unit, "lower is better"?
	local ratio
	ratio=$(awk -v a="$2" -v b="$3" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }')
	rows+=("$1|$2|$3|$4|$ratio")
}
mib() { awk -v v="$1" 'BEGIN { printf "%.0f", v / 1048576 }'; }
us() { awk -v v="$1" 'BEGIN { printf "%.1f", v / 1000 }'; }

row "seq write 1 MiB" "$(mib "$(get seqwrite tmpfs .write.bw_bytes)")" "$(mib "$(get seqwrite iowarp .write.bw_bytes)")" "MiB/s"
row "seq read 1 MiB" "$(mib "$(get seqread tmpfs .read.bw_bytes)")" "$(mib "$(get seqread iowarp .read.bw_bytes)")" "MiB/s"
row "rand read 4 KiB" "$(get randread tmpfs .read.iops | cut -d. -f1)" "$(get randread iowarp .read.iops | cut -d. -f1)" "IOPS"
row "rand read 4 KiB mean lat" "$(us "$(get randread tmpfs .read.lat_ns.mean)")" "$(us "$(get randread iowarp .read.lat_ns.mean)")" "µs"
row "rand read 4 KiB p99 lat" "$(us "$(get randread tmpfs '.read.clat_ns.percentile["99.000000"]')")" \
	"$(us "$(get randread iowarp '.read.clat_ns.percentile["99.000000"]')")" "µs"
row "rand write 4 KiB" "$(get randwrite tmpfs .write.iops | cut -d. -f1)" "$(get randwrite iowarp .write.iops | cut -d. -f1)" "IOPS"
row "rand write 4 KiB mean lat" "$(us "$(get randwrite tmpfs .write.lat_ns.mean)")" "$(us "$(get randwrite iowarp .write.lat_ns.mean)")" "µs"

echo
echo "fio psync, SIZE=$SIZE, RUNTIME=${RUNTIME}s, $(nproc) CPUs, $(uname -r)"
printf '%-28s %12s %12s %7s  %s\n' "test" "tmpfs" "iowarp" "ratio" "unit"
for r in "${rows[@]}"; do
	IFS='|' read -r l a b u x <<<"$r"
	printf '%-28s %12s %12s %7s  %s\n' "$l" "$a" "$b" "$x" "$u"
done
echo "(ratio = iowarp / tmpfs: higher is better for MiB/s and IOPS, lower for latency)"

if [ -n "${MARKDOWN:-}" ]; then
	echo
	echo "| test | unit | tmpfs | iowarp | iowarp/tmpfs |"
	echo "|---|---|---:|---:|---:|"
	for r in "${rows[@]}"; do
		IFS='|' read -r l a b u x <<<"$r"
		echo "| $l | $u | $a | $b | $x |"
	done
fi
