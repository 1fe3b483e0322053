package host

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/internal/units"
)

// HostMemory is what the RAM tiers must fit in.
type HostMemory struct {
	MemTotal int64 // /proc/meminfo MemTotal, bytes (0: unknown)
	// CgroupMax is the tightest memory limit on the daemon's cgroup and
	// its ancestors (cgroup v2 memory.max, v1 memory.limit_in_bytes);
	// 0: none. Cgroup names the cgroup that sets it.
	CgroupMax int64
	Cgroup    string
}

// Usable is the memory the daemon may use: MemTotal, or the cgroup's
// limit if that is lower (0: unknown).
func (m HostMemory) Usable() int64 {
	if m.CgroupMax > 0 && (m.MemTotal == 0 || m.CgroupMax < m.MemTotal) {
		return m.CgroupMax
	}
	return m.MemTotal
}

// Describe names the limit Usable comes from, for error messages.
func (m HostMemory) Describe() string {
	if m.Usable() == m.CgroupMax && m.CgroupMax > 0 {
		return fmt.Sprintf("the memory its cgroup may use (%s memory.max of %s)", units.FormatSize(m.CgroupMax), m.Cgroup)
	}
	return fmt.Sprintf("this machine's memory (%s MemTotal)", units.FormatSize(m.MemTotal))
}

// ReadHostMemory reads MemTotal and the cgroup limit of this process.
func ReadHostMemory() HostMemory {
	m := HostMemory{MemTotal: MemTotal()}
	if cg, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		m.CgroupMax, m.Cgroup = cgroupLimit("/sys/fs/cgroup", cg)
	}
	return m
}

// MemTotal returns the machine's physical memory in bytes (0: unknown).
func MemTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return meminfoField(b, "MemTotal")
}

// meminfoField returns a "Name: N kB" field of /proc/meminfo in bytes.
func meminfoField(b []byte, name string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(f) > 1 && f[1] == "kB" {
			n <<= 10
		}
		return n
	}
	return 0
}

// cgroupLimit finds the tightest memory limit along the cgroup path of
// /proc/self/cgroup (contents cg) under the cgroup file systems at root:
// the v2 unified hierarchy (root itself or root/unified) and the v1
// memory controller (root/memory). A level whose directory is not visible
// (a cgroup namespace) is skipped. It returns 0 when no limit is set.
func cgroupLimit(root string, cg []byte) (int64, string) {
	var best int64
	var where string
	consider := func(dir, file, cgPath string) {
		for p := cgPath; ; p = path.Dir(p) {
			if n := readLimit(path.Join(root, dir, p, file)); n > 0 && (best == 0 || n < best) {
				best, where = n, p
			}
			if p == "/" || p == "." {
				return
			}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(cg))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			consider("", "memory.max", f[2])
			consider("unified", "memory.max", f[2])
		case containsWord(f[1], "memory"):
			consider("memory", "memory.limit_in_bytes", f[2])
		}
	}
	return best, where
}

func containsWord(list, w string) bool {
	for _, s := range strings.Split(list, ",") {
		if s == w {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup limit file: bytes, or 0 for "max", for the v1
// "unlimited" value (a page-rounded MaxInt64) and for a missing file.
func readLimit(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0
	}
	return n
}

// SetOOMScoreAdj sets this process's oom_score_adj (-1000..1000): how
// much the kernel's OOM killer prefers it as a victim. Lowering it below
// the current value needs CAP_SYS_RESOURCE.
func SetOOMScoreAdj(n int) error {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(n)), 0); err != nil {
		return fmt.Errorf("set oom_score_adj %d: %w", n, err)
	}
	return nil
}
