#!/usr/bin/env bash
# bench-shim.sh: libiowarp.so against tmpfs and the plain mount, same run.
# Needs root and /dev/fuse; builds bin/iowarp and bin/libiowarp.so first
# (make build). Prints ns/op and MB/s per case and configuration, the
# shim's cost on tmpfs files it does not intercept, and process start time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/bin/libiowarp.so
bin=$root/bin/iowarp
work=$(mktemp -d /tmp/iowarp-bench-shim.XXXXXX)
tmpfs=$(mktemp -d /dev/shm/iowarp-bench-shim.XXXXXX)
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$work" "$tmpfs"' EXIT
gcc -O2 -o "$work/bench" "$root/adapters/posix/shimtest/testdata/bench.c"
mkdir -p "$work/mnt" "$work/backing"
"$bin" mount "$work/mnt" --backing "$work/backing" --ram 2GiB --control-dir "$work/ctl" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 100); do grep -q " $work/mnt " /proc/self/mountinfo && break; sleep 0.05; done
n=${N:-20000}
echo "== tmpfs, no shim";        "$work/bench" "$tmpfs/f" "$n"
echo "== tmpfs, shim (not intercepted)"; LD_PRELOAD=$lib "$work/bench" "$tmpfs/f" "$n"
echo "== mount, no shim";        "$work/bench" "$work/mnt/f" "$n"
echo "== mount, shim";           LD_PRELOAD=$lib IOWARP_REPORT=1 "$work/bench" "$work/mnt/f" "$n"
start() {
	local s e i
	s=$(date +%s%N)
	for i in $(seq 200); do "$@" /bin/true; done
	e=$(date +%s%N)
	echo $(((e - s) / 200000))
}
plain=$(start env)
shim=$(start env LD_PRELOAD="$lib")
# env and true both start under the shim: two processes per iteration.
echo "== process start: plain ${plain} us, under the shim ${shim} us (+$(((shim - plain) / 2)) us per process)"
