package config

import (
	"testing"

	"github.com/iowarp/iowarp/internal/host"
)

// withHostMemory makes the config checks see m as this machine's memory.
func withHostMemory(t *testing.T, m host.HostMemory) {
	t.Helper()
	old := hostMemory
	hostMemory = func() host.HostMemory { return m }
	t.Cleanup(func() { hostMemory = old })
}

// TestRAMCap: RAM tiers that add up to more than 80% of the memory the
// daemon may use (MemTotal, or the cgroup's memory.max if lower) are
// refused, with the numbers, at the tier that crosses the line.
func TestRAMCap(t *testing.T) {
	machine := host.HostMemory{MemTotal: 23961 << 20} // 23.4GiB
	slurm := host.HostMemory{MemTotal: 256 << 30, CgroupMax: 8 << 30, Cgroup: "/slurm/uid_0/job_7"}
	const tail = ": a RAM tier is memory the kernel cannot page out, and filling it would make the OOM killer " +
		"take the daemon and every dirty byte; use at most 18.7GiB of RAM (and a file tier for the rest)"
	cases := []struct {
		name string
		mem  host.HostMemory
		yaml string
		want string // "" = accepted
	}{
		{"100TiB", machine, "tiers:\n  - {name: r, kind: ram, capacity: 100TiB}\n",
			"c.yaml:2: tiers[0].capacity: 100TiB is more than 80% of this machine's memory (23.4GiB MemTotal)" + tail},
		{"sum of ram tiers", machine, "tiers:\n  - {name: a, kind: ram, capacity: 12GiB}\n  - {name: n, kind: file, dir: /n, capacity: 1TiB}\n  - {name: b, kind: ram, capacity: 8GiB}\n",
			"c.yaml:4: tiers[2].capacity: the ram tiers add up to 20GiB (tiers[0] 12GiB + tiers[2] 8GiB), which is more than 80% of this machine's memory (23.4GiB MemTotal)" + tail},
		{"cgroup limit", slurm, "tiers:\n  - {name: r, kind: ram, capacity: 7GiB}\n",
			"c.yaml:2: tiers[0].capacity: 7GiB is more than 80% of the memory its cgroup may use (8GiB memory.max of /slurm/uid_0/job_7): " +
				"a RAM tier is memory the kernel cannot page out, and filling it would make the OOM killer take the daemon and every dirty byte; " +
				"use at most 6.4GiB of RAM (and a file tier for the rest)"},
		{"just fits", machine, "tiers:\n  - {name: r, kind: ram, capacity: 18GiB}\n", ""},
		{"file tiers do not count", machine, "tiers:\n  - {name: r, kind: ram, capacity: 1GiB}\n  - {name: n, kind: file, dir: /n, capacity: 100TiB}\n", ""},
		{"80% fits", slurm, "tiers:\n  - {name: r, kind: ram, capacity: 80%}\n", ""},
		{"unknown memory", host.HostMemory{}, "tiers:\n  - {name: r, kind: ram, capacity: 100TiB}\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withHostMemory(t, tc.mem)
			_, err := Parse("c.yaml", []byte(tc.yaml))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

// TestRAMCapFlag: a RAM tier set by a flag is refused naming the flag.
func TestRAMCapFlag(t *testing.T) {
	withHostMemory(t, host.HostMemory{MemTotal: 23961 << 20})
	c := Default()
	c.Tiers[0].Capacity = 1 << 40
	c.OverriddenBy("tiers[0].capacity", "--ram")
	want := "--ram: 1TiB is more than 80% of this machine's memory (23.4GiB MemTotal): a RAM tier"
	if err := c.Validate(); err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("Validate = %v, want %s...", err, want)
	}
}

// TestRAMPercentOfCgroup: "N%" is of the memory the daemon may use.
func TestRAMPercentOfCgroup(t *testing.T) {
	withHostMemory(t, host.HostMemory{MemTotal: 256 << 30, CgroupMax: 8 << 30, Cgroup: "/job"})
	n, err := ParseCapacity("50%", "ram")
	if err != nil || n != 4<<30 {
		t.Fatalf("ParseCapacity(50%%) = %d, %v; want 4GiB", n, err)
	}
	if _, err := ParseCapacity("85%", "ram"); err == nil {
		t.Fatal("85% accepted")
	}
}
