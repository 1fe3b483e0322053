package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/hist"
)

// collector turns the Sources into metrics at each scrape.
type collector struct {
	src Sources
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("iowarp_"+name, help, labels, nil)
}

var (
	tierLabels   = []string{"tier", "kind"}
	tierCapacity = desc("tier_capacity_bytes", "Capacity of the tier.", tierLabels...)
	tierUsed     = desc("tier_used_bytes", "Bytes the tier holds.", tierLabels...)
	tierDirty    = desc("tier_dirty_bytes", "Dirty bytes (not on the backing store) in the tier.", tierLabels...)
	tierBlobs    = desc("tier_blobs", "Blobs (pages) in the tier.", tierLabels...)
	tierPromoted = desc("tier_promoted_total", "Blobs promoted into the tier.", tierLabels...)
	tierDemoted  = desc("tier_demoted_total", "Blobs demoted out of the tier.", tierLabels...)
	tierEvicted  = desc("tier_evicted_total", "Clean blobs evicted from the tier.", tierLabels...)
	tierSumErr   = desc("tier_checksum_errors_total", "Reads of blobs on the tier whose bytes failed their crc32c.", tierLabels...)
	tierSaved    = desc("tier_compression_saved_bytes", "Capacity of the tier that compression leaves free.", tierLabels...)
	tierComp     = desc("tier_compressed_logical_bytes", "Logical bytes of the blobs stored compressed on the tier.", tierLabels...)
	poolHits     = desc("pool_hits_total", "Pool reads served by a resident blob.")
	poolMisses   = desc("pool_misses_total", "Pool reads that needed a fill.")

	dirty       = desc("dirty_bytes", "Dirty bytes in the pool, not yet written back.")
	backlog     = desc("flush_backlog_files", "Files queued for write-back.")
	openFiles   = desc("open_files", "Open files of the file layer.")
	failing     = desc("write_back_failing_files", "Files whose write-back fails (retried).")
	flushed     = desc("flush_bytes_total", "Bytes written back to the backing store.")
	staged      = desc("stage_in_bytes_total", "Bytes staged in from the backing store.")
	readBytes   = desc("read_bytes_total", "Bytes read by applications.")
	written     = desc("written_bytes_total", "Bytes written by applications.")
	readHits    = desc("read_hits_total", "Page reads served from the pool.")
	readMisses  = desc("read_misses_total", "Page reads that missed the pool.")
	prefetched  = desc("prefetched_bytes_total", "Bytes staged in ahead of readers.")
	flushLat    = desc("flush_write_seconds", "Latency of one write of the write-back to the backing store.")
	stageLat    = desc("stage_in_read_seconds", "Latency of one read of a stage-in from the backing store.")
	fuseLat     = desc("fuse_request_seconds", "Latency of FUSE requests by opcode, in the daemon.", "op")
	ipcRequests = desc("ipc_requests_total", "ipc requests (round trips) served.")
	ipcClients  = desc("ipc_clients", "Connected ipc clients.")
	ipcAccepted = desc("ipc_clients_accepted_total", "ipc clients accepted.")
	ipcSegments = desc("ipc_segment_bytes", "Bytes of client segments mapped.")
	helperStart = desc("helper_starts_total", "Format helper processes started.")
	helperRest  = desc("helper_restarts_total", "Format helpers stopped (library error) or killed (crash, timeout) and so replaced.")
	errorsTotal = desc("errors_total", "Errors by kind: flush (write-back attempts), backing_checksum (stage-ins that failed the write-back's crc32c), tier_checksum (reads of slower tiers that failed theirs), fuse_eio (EIO replies), ipc_bad_request, ipc_refused, ipc_killed, helper_failed.", "kind")
)

// Describe sends nothing: the collector is unchecked (its metrics depend
// on which Sources a daemon has).
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch}
	switch {
	case c.src.Files != nil:
		st := c.src.Files()
		e.pool(st.Pool)
		e.files(st)
	case c.src.Pool != nil:
		e.pool(c.src.Pool())
	}
	if c.src.Latencies != nil {
		wb, si := c.src.Latencies()
		e.histogram(flushLat, wb)
		e.histogram(stageLat, si)
	}
	if c.src.FUSE != nil {
		var eio uint64
		c.src.FUSE(func(op string, lat hist.Snapshot, n uint64) {
			e.histogram(fuseLat, lat, op)
			eio += n
		})
		e.counter(errorsTotal, eio, "fuse_eio")
	}
	c.ipc(e)
	c.helpers(e)
}

func (c *collector) ipc(e emitter) {
	if c.src.IPC == nil {
		return
	}
	st := c.src.IPC()
	e.counter(ipcRequests, st.Requests)
	e.gauge(ipcClients, float64(st.Clients))
	e.counter(ipcAccepted, st.Accepted)
	e.gauge(ipcSegments, float64(st.SegmentBytes))
	e.counter(errorsTotal, st.BadRequests, "ipc_bad_request")
	e.counter(errorsTotal, st.Refused, "ipc_refused")
	e.counter(errorsTotal, st.Killed, "ipc_killed")
}

func (c *collector) helpers(e emitter) {
	if c.src.Helpers == nil {
		return
	}
	st := c.src.Helpers()
	e.counter(helperStart, st.Started)
	e.counter(helperRest, st.Retired+st.Failed)
	e.counter(errorsTotal, st.Failed, "helper_failed")
}

// emitter sends const metrics.
type emitter struct {
	ch chan<- prometheus.Metric
}

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (e emitter) counter(d *prometheus.Desc, v uint64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func (e emitter) histogram(d *prometheus.Desc, s hist.Snapshot, labels ...string) {
	e.ch <- prometheus.MustNewConstHistogram(d, s.Count, s.Sum.Seconds(), s.Cumulative(), labels...)
}

func (e emitter) pool(ps bufferpool.Stats) {
	for _, t := range ps.Tiers {
		e.gauge(tierCapacity, float64(t.Capacity), t.Name, t.Kind)
		e.gauge(tierUsed, float64(t.Used), t.Name, t.Kind)
		e.gauge(tierDirty, float64(t.Dirty), t.Name, t.Kind)
		e.gauge(tierBlobs, float64(t.Blobs), t.Name, t.Kind)
		e.counter(tierPromoted, t.Promoted, t.Name, t.Kind)
		e.counter(tierDemoted, t.Demoted, t.Name, t.Kind)
		e.counter(tierEvicted, t.Evicted, t.Name, t.Kind)
		e.counter(tierSumErr, t.ChecksumErrors, t.Name, t.Kind)
		e.gauge(tierSaved, float64(t.SavedBytes), t.Name, t.Kind)
		e.gauge(tierComp, float64(t.CompressedBytes), t.Name, t.Kind)
	}
	e.counter(poolHits, ps.Hits)
	e.counter(poolMisses, ps.Misses)
	e.gauge(dirty, float64(ps.DirtyBytes))
}

func (e emitter) files(st files.Stats) {
	e.gauge(backlog, float64(st.FlushBacklog))
	e.gauge(openFiles, float64(st.OpenFiles))
	e.gauge(failing, float64(st.FailingCount))
	e.counter(flushed, st.FlushedBytes)
	e.counter(staged, st.StagedBytes)
	e.counter(readBytes, st.BytesRead)
	e.counter(written, st.BytesWritten)
	e.counter(readHits, st.ReadHits)
	e.counter(readMisses, st.ReadMisses)
	e.counter(prefetched, st.PrefetchedBytes)
	e.counter(errorsTotal, st.FlushErrors, "flush")
	e.counter(errorsTotal, st.BackingChecksumErrors, "backing_checksum")
	e.counter(errorsTotal, st.TierChecksumErrors, "tier_checksum")
}
