package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/internal/host"
	"github.com/iowarp/iowarp/internal/units"
)

// RAMShare is the largest fraction of the memory the daemon may use
// (HostMemory.Usable) that the RAM tiers together may take. The RAM tier
// is shared memory (memfds): the kernel cannot page it out without swap,
// so a tier that fills more than the machine (or the cgroup) has makes the
// OOM killer take the daemon and every dirty byte with it. The other 20%
// are for the kernel, the page cache of the backing store, the daemon's
// own heap and the applications.
const RAMShare = 0.8

// hostMemory reads the host's memory limits; tests replace it.
var hostMemory = host.ReadHostMemory

// ParseCapacity reads a tier capacity: a size more than zero, or for a
// ram tier also a percentage ("25%") of the memory the daemon may use
// (HostMemory.Usable: MemTotal, or the cgroup's limit if lower), at most
// RAMShare of it.
func ParseCapacity(s, kind string) (int64, error) {
	if pct, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		if !isMemory(kind) {
			return 0, fmt.Errorf("a percentage is only allowed for a ram tier")
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || v <= 0 || v > RAMShare*100 {
			return 0, fmt.Errorf("%q is not a percentage of memory between 0 and %g", s, RAMShare*100)
		}
		return int64(v / 100 * float64(hostMemory().Usable())), nil
	}
	n, err := units.ParseSize(s)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("%q must be more than zero", s)
	}
	return n, nil
}
