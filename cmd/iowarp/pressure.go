package main

import (
	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/tier"
	"github.com/iowarp/iowarp/internal/host"
	"github.com/iowarp/iowarp/internal/units"
)

// shedKeep is the share of its pages a RAM tier keeps at each sample
// that shows memory pressure (one a second while it lasts): a quarter of
// what is left moves down a tier each time.
const shedKeep = 0.75

// watchPressure starts moving the pool's RAM pages down a tier whenever
// the machine or the daemon's cgroup is short of memory (PSI stalls,
// memory.events), rather than letting the OOM killer take the daemon.
func watchPressure(pool *bufferpool.Pool) *host.PressureWatcher {
	w := host.NewPressureWatcher(pressureOptions(pool, host.PressureOptions{}))
	if w.Sources() == "" {
		logrus.Warnf("neither PSI (/proc/pressure/memory) nor a cgroup v2 memory.events here: the daemon cannot see memory pressure coming")
		return w
	}
	logrus.Debugf("watching memory pressure: %s", w.Sources())
	return w.Start()
}

// pressureOptions sets the callbacks of o to shed and unshed pool.
func pressureOptions(pool *bufferpool.Pool, o host.PressureOptions) host.PressureOptions {
	o.OnPressure = func(why string) { relieve(pool, why) }
	o.OnRelief = func() {
		pool.Unshed()
		logrus.Infof("memory pressure has passed: the RAM tier may fill to its capacity again")
	}
	return o
}

// relieve moves a share of the RAM tiers' pages down a tier.
func relieve(pool *bufferpool.Pool, why string) {
	freed := pool.Shed(shedKeep)
	var ram int64
	for _, t := range pool.Stats().Tiers {
		if tr, _ := tier.TraitsOf(t.Kind); tr.Memory {
			ram += t.Used
		}
	}
	logrus.Warnf("memory pressure (%s): moved %s of RAM-tier pages to slower tiers; RAM tiers held at %s until it passes",
		why, units.FormatSize(freed), units.FormatSize(ram))
}
