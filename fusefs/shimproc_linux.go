package fusefs

import (
	"bytes"
	"os"
	"strconv"
)

// shimLoaded reports whether the process of thread tid has the shim
// (libiowarp*.so) mapped. With the writeback cache its opens must bypass
// the kernel's page cache from the start: the shim attaches to an open
// after the open's cache mode is fixed, and kernel-path writes held dirty
// in the page cache would later land over what the shim wrote to the pool
// meanwhile (and the shim's own reads of the pool would miss them). An
// unreadable maps file (the process is gone) counts as not loaded.
func shimLoaded(tid uint32) bool {
	if tid == 0 {
		return false
	}
	maps, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/maps")
	if err != nil {
		return false
	}
	return bytes.Contains(maps, []byte("/libiowarp"))
}
