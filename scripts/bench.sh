#!/usr/bin/env bash
# bench.sh: the same benchmarks, in one run, on three columns: a tmpfs
# directory, the iowarp mount, and the mount under `iowarp run` (the
# LD_PRELOAD shim); every figure with its ratio to tmpfs.
#
#   scripts/bench.sh                 # needs root, fio, jq, mpirun, bin/iowarp,
#                                    # bin/libiowarp.so, bin/ior, bin/mdtest (make bench)
#   QUICK=1 scripts/bench.sh         # small sizes: a couple of minutes
#   MARKDOWN=1 scripts/bench.sh      # also print the README table
#   BENCH="ior mdtest" scripts/bench.sh   # only some sections
#
# Sizes (env): SIZE=1g (fio file), RUNTIME=15 (s, fio random jobs),
# IOR_BLOCK=512m (IOR block per rank), MDTEST_N=10000 (files per mdtest
# run, split among its ranks), COLD_SIZE=2g, NP=2 (MPI ranks), REPEAT=1
# (IOR and mdtest runs per column, interleaved; the best of them counts).
# QUICK=1 sets SIZE=64m RUNTIME=1 IOR_BLOCK=16m MDTEST_N=1000 COLD_SIZE=64m
# unless they are given. PASSTHROUGH=1 and WRITEBACK_CACHE=1 turn on those
# options of the mount (both off by default; see the config).
#
# Sections (BENCH, default all four):
#   fio     ioengine=psync, one job, --thread (so the shim sees the job's
#           I/O, a forked child never enters the shim): 1 MiB sequential
#           write and read of SIZE, 4 KiB random read of that file and 4 KiB
#           random write into a 256 MiB file, RUNTIME seconds each
#   ior     bin/ior (bench/ior.c: what ior -a API -t 1m -b IOR_BLOCK [-F]
#           [-e] -C -W -w -r does) on NP ranks: POSIX and MPIIO, file per
#           process and one shared file, without and with -e (fsync after
#           the write phase); MiB/s of the write and read phases like IOR
#   mdtest  bin/mdtest (bench/mdtest.c): create, stat and remove of
#           MDTEST_N files in one directory and in a tree (depth 2, branch
#           10), on NP ranks and on 1 rank; ops/s per phase. With
#           bin/loopback (go-fuse's example loopback, make bench builds it)
#           also on a loopback mount of a directory next to the backing
#           one: the "loopback" column, and mount/loopback the ratio
#   cold    sequential 1 MiB read of a COLD_SIZE file put into the backing
#           directory, after `echo 3 > /proc/sys/vm/drop_caches`; the tmpfs
#           column is that read from the backing directory itself
# The mount is iowarp in writeback mode over a temporary backing directory
# (on the disk of /tmp), with a RAM tier large enough to hold the files.
# After every job on the mount the script waits for the write-back to
# drain, so that one job's flush does not run during the next job. For the
# shim column IOWARP_REPORT is on: "fast/ipc/kern %" is the share of the
# bytes of that direction (write or read) that went over the shared-memory
# fast path, the ipc rings, or the kernel (FUSE).
set -euo pipefail

cd "$(dirname "$0")/.."
if [ -n "${QUICK:-}" ]; then
	: "${SIZE:=64m}" "${RUNTIME:=1}" "${IOR_BLOCK:=16m}" "${MDTEST_N:=1000}" "${COLD_SIZE:=64m}"
fi
BIN=${BIN:-bin/iowarp}
SIZE=${SIZE:-1g}
RUNTIME=${RUNTIME:-15}
IOR_BLOCK=${IOR_BLOCK:-512m}
MDTEST_N=${MDTEST_N:-10000}
COLD_SIZE=${COLD_SIZE:-2g}
NP=${NP:-2}
REPEAT=${REPEAT:-1}
RAM=${RAM:-3GiB}
BENCH=${BENCH:-fio ior mdtest cold}
COLS=(tmpfs mount shim)

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mount, drop_caches)"
for c in fio jq mpirun numfmt; do
	command -v $c >/dev/null || die "$c is missing (make deps)"
done
for f in "$BIN" bin/libiowarp.so bin/ior bin/mdtest; do
	[ -e "$f" ] || die "$f is missing (make bench builds it)"
done
BIN=$(readlink -f "$BIN") IOR=$(readlink -f bin/ior) MDTEST=$(readlink -f bin/mdtest)
LOOPBACK=$([ -x bin/loopback ] && readlink -f bin/loopback || true)
bytes() { numfmt --from=iec "${1^^}"; }

work=$(mktemp -d /tmp/iowarp-bench.XXXXXX)
mnt=$work/mnt tmp=$work/tmpfs ctl=$work/ctl backing=$work/backing lb=$work/loopback
mkdir -p "$mnt" "$tmp" "$backing/plain" "$backing/shim" "$backing/cold" "$work/nvme" "$ctl" "$lb" "$work/lbsrc"

cleanup() {
	set +e
	mountpoint -q "$lb" && umount "$lb"
	if mountpoint -q "$mnt"; then
		"$BIN" runtime stop "$mnt" --control-dir "$ctl" --timeout 120s >/dev/null 2>&1 || umount -l "$mnt"
	fi
	mountpoint -q "$tmp" && umount "$tmp"
	rm -rf "$work"
}
trap cleanup EXIT

big=$(bytes "$SIZE")
ior_total=$(($(bytes "$IOR_BLOCK") * NP))
[ "$ior_total" -gt "$big" ] && big=$ior_total
mount -t tmpfs -o size=$((big + (512 << 20))) tmpfs "$tmp"

cat >"$work/config.yaml" <<EOF
backing: $backing
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
passthrough: $([ -n "${PASSTHROUGH:-}" ] && echo true || echo false)
writeback_cache: $([ -n "${WRITEBACK_CACHE:-}" ] && echo true || echo false)
EOF
"$BIN" mount "$mnt" --config "$work/config.yaml" --daemon --log-file "$work/iowarp.log" \
	|| { cat "$work/iowarp.log" >&2; die "mount failed"; }

# dir COL: the directory a column's jobs run in.
dir() {
	case $1 in
	tmpfs) echo "$tmp" ;;
	mount) echo "$mnt/plain" ;;
	shim) echo "$mnt/shim" ;;
	loopback) echo "$lb" ;;
	esac
}

# drain COL: waits until the mount has written everything back.
drain() {
	[ "$1" = tmpfs ] && return 0
	for _ in $(seq 1 600); do
		[ "$("$BIN" stat "$mnt" --control-dir "$ctl" --json | jq .dirty_bytes)" = 0 ] && return 0
		sleep 0.2
	done
	die "write-back did not drain in 120s"
}

# on COL NAME CMD...: runs CMD for the column; for shim under `iowarp run`
# with the report of every process appended to $work/NAME.report.
on() {
	local col=$1 name=$2
	shift 2
	if [ "$col" = shim ]; then
		rm -f "$work/$name.report"
		IOWARP_REPORT=$work/$name.report "$BIN" run -- "$@"
	else
		"$@"
	fi
}

# mpi COL NAME NP CMD...: on, of mpirun on NP ranks (passing the shim's
# environment on to the ranks for shim).
mpi() {
	local col=$1 name=$2 np=$3 x=()
	shift 3
	[ "$col" = shim ] && x=(-x LD_PRELOAD -x IOWARP_REPORT)
	on "$col" "$name" mpirun --allow-run-as-root --oversubscribe -np "$np" "${x[@]}" "$@"
}

# Results: val[TEST,COL], unit[TEST], path[TEST] (shim's fast/ipc/kern %),
# in the order of tests[].
declare -A val unit path
tests=()
put() { # TEST UNIT COL VALUE
	[ -n "${unit[$1]:-}" ] || tests+=("$1")
	unit[$1]=$2 val[$1,$3]=$4
}
best() { # TEST UNIT COL VALUE: put, unless a higher value is there
	local old=${val[$1,$3]:-}
	if [ -z "$old" ] || [ "$4" -gt "$old" ]; then put "$@"; fi
}

# share NAME DIR: fast/ipc/kern % of the bytes of direction DIR (read or
# write) in the report of run NAME.
share() {
	[ -f "$work/$1.report" ] || { echo "no report"; return; }
	awk -v d="$2" '$1 == "iowarp-report" {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); s[kv[1]] += kv[2] }
	} END {
		f = s["fast_" d]; p = s["ipc_" d]; k = s["kernel_" d]; t = f + p + k
		if (t == 0) print "no bytes"; else printf "%.0f/%.0f/%.0f\n", 100 * f / t, 100 * p / t, 100 * k / t
	}' "$work/$1.report"
}

# fio COL NAME TEST-ARGS...: leaves the JSON in $work/NAME.COL.json
fiojob() {
	local col=$1 name=$2
	shift 2
	on "$col" "$name" fio --name="$name" --directory="$(dir "$col")" --ioengine=psync --numjobs=1 --thread \
		--group_reporting --output-format=json --output="$work/$name.$col.json" "$@" >/dev/null
	drain "$col"
}
fget() { jq -r ".jobs[0]$3" "$work/$1.$2.json"; }
mib() { awk -v v="$1" 'BEGIN { printf "%.0f", v / 1048576 }'; }
us() { awk -v v="$1" 'BEGIN { printf "%.1f", v / 1000 }'; }
int() { cut -d. -f1 <<<"$1"; }

bench_fio() {
	local col
	for col in "${COLS[@]}"; do
		fiojob "$col" seqwrite --rw=write --bs=1M --size="$SIZE" --filename=seq.dat
		fiojob "$col" seqread --rw=read --bs=1M --size="$SIZE" --filename=seq.dat
		fiojob "$col" randread --rw=randread --bs=4k --size="$SIZE" --filename=seq.dat \
			--time_based --runtime="$RUNTIME" --norandommap
		fiojob "$col" randwrite --rw=randwrite --bs=4k --size=256M --filename=rand.dat \
			--time_based --runtime="$RUNTIME" --norandommap
		rm -f "$(dir "$col")/seq.dat" "$(dir "$col")/rand.dat"
		drain "$col"
		put "fio seq write 1 MiB" MiB/s "$col" "$(mib "$(fget seqwrite "$col" .write.bw_bytes)")"
		put "fio seq read 1 MiB" MiB/s "$col" "$(mib "$(fget seqread "$col" .read.bw_bytes)")"
		put "fio rand read 4 KiB" IOPS "$col" "$(int "$(fget randread "$col" .read.iops)")"
		put "fio rand read 4 KiB mean lat" µs "$col" "$(us "$(fget randread "$col" .read.lat_ns.mean)")"
		put "fio rand read 4 KiB p99 lat" µs "$col" "$(us "$(fget randread "$col" '.read.clat_ns.percentile["99.000000"]')")"
		put "fio rand write 4 KiB" IOPS "$col" "$(int "$(fget randwrite "$col" .write.iops)")"
		put "fio rand write 4 KiB mean lat" µs "$col" "$(us "$(fget randwrite "$col" .write.lat_ns.mean)")"
	done
	path["fio seq write 1 MiB"]=$(share seqwrite write)
	path["fio seq read 1 MiB"]=$(share seqread read)
	path["fio rand read 4 KiB"]=$(share randread read)
	path["fio rand write 4 KiB"]=$(share randwrite write)
}

# field LINE KEY: the value of KEY=... in a "prog k=v ..." line.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

bench_ior() {
	local col api layout e name flags out op line rep
	for api in POSIX MPIIO; do
		for layout in fpp shared; do
			for e in "" -e; do
				name=ior-$api-$layout$e
				flags=(-a "$api" -t 1m -b "$IOR_BLOCK" -C -W -w -r $e -o)
				[ "$layout" = fpp ] && flags=(-F "${flags[@]}")
				for rep in $(seq "$REPEAT"); do
					for col in "${COLS[@]}"; do
						out=$(mpi "$col" "$name" "$NP" "$IOR" "${flags[@]}" "$(dir "$col")/ior.dat") \
							|| die "$name on $col failed: $out"
						drain "$col"
						for op in write read; do
							line=$(grep "^ior op=$op " <<<"$out") || die "$name on $col: no $op line in: $out"
							best "IOR $api $layout${e:+ -e} $op" MiB/s "$col" "$(field "$line" bw_mib | cut -d. -f1)"
						done
					done
				done
				path["IOR $api $layout${e:+ -e} write"]=$(share "$name" write)
				path["IOR $api $layout${e:+ -e} read"]=$(share "$name" read)
			done
		done
	done
}

# loopback: mounts go-fuse's loopback of a directory on the backing
# directory's file system at $lb (once); false without bin/loopback.
loopback() {
	[ -n "$LOOPBACK" ] || return 1
	mountpoint -q "$lb" && return 0
	setsid "$LOOPBACK" -q -directmountstrict "$lb" "$work/lbsrc" </dev/null >"$work/loopback.log" 2>&1 &
	for _ in $(seq 1 50); do
		mountpoint -q "$lb" && return 0
		sleep 0.1
	done
	die "loopback did not mount: $(cat "$work/loopback.log")"
}

bench_mdtest() {
	local col np layout tree name out ph line rep cols=("${COLS[@]}")
	loopback && cols+=(loopback)
	for np in "$NP" 1; do
		for layout in flat tree; do
			tree=()
			[ "$layout" = tree ] && tree=(-z 2 -b 10)
			name=mdtest-$layout-$np
			for rep in $(seq "$REPEAT"); do
				for col in "${cols[@]}"; do
					mkdir -p "$(dir "$col")/md"
					out=$(mpi "$col" "$name" "$np" "$MDTEST" -n $((MDTEST_N / np)) "${tree[@]}" -d "$(dir "$col")/md") \
						|| die "$name on $col failed: $out"
					rmdir "$(dir "$col")/md"
					drain "$col"
					for ph in create stat remove; do
						line=$(grep "^mdtest phase=$ph " <<<"$out") || die "$name on $col: no $ph line in: $out"
						best "mdtest $layout $ph ($np rank$([ "$np" = 1 ] || echo s))" ops/s "$col" "$(field "$line" ops_s | cut -d. -f1)"
					done
				done
			done
		done
	done
}

dropcaches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || { cold_note=" (drop_caches failed: NOT cold)"; return 0; }
}

cold_note=""
bench_cold() {
	local col f
	# One file per column, not hard links: pages of one inode that the
	# daemon still maps would survive drop_caches and make the next read warm.
	for col in "${COLS[@]}"; do
		fio --name=mkcold --filename="$backing/cold/$col.dat" --rw=write --bs=1M --size="$COLD_SIZE" \
			--output-format=json --output=/dev/null >/dev/null
	done
	for col in "${COLS[@]}"; do
		f=$mnt/cold/$col.dat
		[ "$col" = tmpfs ] && f=$backing/cold/$col.dat
		dropcaches
		on "$col" cold fio --name=cold --filename="$f" --rw=read --bs=1M --size="$COLD_SIZE" --ioengine=psync \
			--thread --output-format=json --output="$work/cold.$col.json" >/dev/null
		put "cold seq read 1 MiB (tmpfs: backing dir)$cold_note" MiB/s "$col" "$(mib "$(fget cold "$col" .read.bw_bytes)")"
	done
	rm -f "$backing"/cold/*.dat
	path["cold seq read 1 MiB (tmpfs: backing dir)$cold_note"]=$(share cold read)
}

for s in $BENCH; do
	case $s in
	fio | ior | mdtest | cold) "bench_$s" ;;
	*) die "unknown section $s (fio ior mdtest cold)" ;;
	esac
done

ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "" || b == "" || a <= 0) print "n/a"; else if (b / a < 0.1) printf "%.3f", b / a; else printf "%.2f", b / a }'
}

echo
echo "SIZE=$SIZE RUNTIME=${RUNTIME}s IOR_BLOCK=$IOR_BLOCK NP=$NP MDTEST_N=$MDTEST_N COLD_SIZE=$COLD_SIZE REPEAT=$REPEAT" \
	"PASSTHROUGH=${PASSTHROUGH:-} WRITEBACK_CACHE=${WRITEBACK_CACHE:-};" \
	"$(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
fmt='%-44s %6s %10s %10s %10s %7s %7s %9s %8s  %s\n'
printf "$fmt" test unit tmpfs mount mount+shim mnt/tmp shim/tmp loopback mnt/loop "shim fast/ipc/kern %"
for t in "${tests[@]}"; do
	a=${val[$t,tmpfs]:-} b=${val[$t,mount]:-} c=${val[$t,shim]:-} l=${val[$t,loopback]:-}
	lr=$([ -n "$l" ] && ratio "$l" "$b" || true)
	printf "$fmt" "$t" "${unit[$t]}" "$a" "$b" "$c" "$(ratio "$a" "$b")" "$(ratio "$a" "$c")" "$l" "$lr" "${path[$t]:-}"
done
echo "(ratios = column / tmpfs, mnt/loop = mount / go-fuse loopback: higher is better for MiB/s, IOPS"
echo " and ops/s, lower for latency)"

if [ -n "${MARKDOWN:-}" ]; then
	echo
	echo "| test | unit | tmpfs | mount | mount+shim | mount/tmpfs | shim/tmpfs | loopback | mount/loopback | shim bytes fast/ipc/kernel % |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for t in "${tests[@]}"; do
		a=${val[$t,tmpfs]:-} b=${val[$t,mount]:-} c=${val[$t,shim]:-} l=${val[$t,loopback]:-}
		lr=$([ -n "$l" ] && ratio "$l" "$b" || true)
		echo "| $t | ${unit[$t]} | $a | $b | $c | $(ratio "$a" "$b") | $(ratio "$a" "$c") | $l | $lr | ${path[$t]:-} |"
	done
fi
