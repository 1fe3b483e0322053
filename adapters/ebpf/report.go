package ebpf

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/iowarp/iowarp/internal/mountinfo"
	"github.com/iowarp/iowarp/internal/units"
)

// WriteSummary writes the per-file table of a trace: bytes, calls, access
// sizes, sequential fraction and time in I/O, most bytes first (at most
// top files; 0 = all), then the calls by name.
func WriteSummary(w io.Writer, a *Aggregator, top int) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "read\twrite\treads\twrites\topens\tseq\tI/O time\tsizes r/w\t  file")
	files := a.Files()
	if top > 0 && len(files) > top {
		files = files[:top]
	}
	for _, f := range files {
		if f.Reads+f.Writes+f.Opens+f.Stats+f.Syncs == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f%%\t%v\t%s/%s\t  %s\n", units.FormatSize(f.BytesRead),
			units.FormatSize(f.BytesWritten), f.Reads, f.Writes, f.Opens, 100*f.Sequential(),
			f.IOTime().Round(time.Microsecond), commonSize(f.ReadSizes), commonSize(f.WriteSizes), f.Path)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var calls []string
	for name, n := range a.Calls {
		calls = append(calls, fmt.Sprintf("%s %d", name, n))
	}
	slices.Sort(calls)
	if _, err := fmt.Fprintf(w, "calls: %s\n", strings.Join(calls, ", ")); err != nil {
		return err
	}
	if a.Lost > 0 {
		if _, err := fmt.Fprintf(w, "warning: %d calls lost (the ring buffer was full, or no task storage): the counts are short\n", a.Lost); err != nil {
			return err
		}
	}
	return writeBlock(w, a.Block)
}

// writeBlock writes what was issued to the block devices during the
// trace (by every process: write-back and read-ahead come from kernel
// threads), devices with requests only.
func writeBlock(w io.Writer, devs []BlockIO) error {
	var parts []string
	for _, b := range devs {
		if b.Requests[0]+b.Requests[1]+b.Requests[2] == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s read %s in %d, wrote %s in %d, %d other", b.Dev,
			units.FormatSize(b.Bytes[0]), b.Requests[0], units.FormatSize(b.Bytes[1]), b.Requests[1], b.Requests[2]))
	}
	if len(parts) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "block devices, all processes, same interval (requests): %s\n", strings.Join(parts, "; "))
	return err
}

func commonSize(h [10]int64) string {
	best, bi := int64(0), -1
	for i, n := range h {
		if n > best {
			best, bi = n, i
		}
	}
	if bi < 0 {
		return "-"
	}
	return SizeBuckets[bi].Name
}

// DarshanMeta is the header of a Darshan text report.
type DarshanMeta struct {
	Exe        string
	Uid        int
	JobID      string
	Start, End time.Time
	Nprocs     int
}

// WriteDarshan writes the POSIX module's counters of every file in
// darshan-parser's text layout (one line per counter: module, rank,
// record id, counter, value, file name, mount point, fs type), so that
// scripts and habits built on darshan-parser apply. Record ids are 64-bit
// FNV-1a hashes of the path (Darshan's own hash differs); a file used by
// more than one process is a shared record (rank -1).
func WriteDarshan(w io.Writer, a *Aggregator, m DarshanMeta) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# darshan log version: 3.41 (written by iowarp trace from eBPF events)\n")
	fmt.Fprintf(bw, "# exe: %s\n# uid: %d\n# jobid: %s\n", m.Exe, m.Uid, m.JobID)
	fmt.Fprintf(bw, "# start_time: %d\n# end_time: %d\n# nprocs: %d\n# run time: %.4f\n",
		m.Start.Unix(), m.End.Unix(), m.Nprocs, m.End.Sub(m.Start).Seconds())
	fmt.Fprintf(bw, "\n# *******************************************************\n# POSIX module data\n")
	fmt.Fprintf(bw, "# *******************************************************\n\n")
	fmt.Fprintf(bw, "#<module>\t<rank>\t<record id>\t<counter>\t<value>\t<file name>\t<mount pt>\t<fs type>\n")
	mounts, _ := mountinfo.Mounts()
	for _, f := range a.Files() {
		if strings.HasPrefix(f.Path, "<") {
			continue
		}
		rank := 0
		if len(f.Pids) > 1 {
			rank = -1
		}
		h := fnv.New64a()
		h.Write([]byte(f.Path))
		id := h.Sum64()
		mnt, fstype := mountOf(mounts, f.Path)
		line := func(counter string, v any) {
			fmt.Fprintf(bw, "POSIX\t%d\t%d\t%s\t%v\t%s\t%s\t%s\n", rank, id, counter, v, f.Path, mnt, fstype)
		}
		for _, c := range []struct {
			name string
			v    int64
		}{
			{"POSIX_OPENS", f.Opens}, {"POSIX_READS", f.Reads}, {"POSIX_WRITES", f.Writes},
			{"POSIX_SEEKS", f.Seeks}, {"POSIX_STATS", f.Stats}, {"POSIX_MMAPS", f.Mmaps},
			{"POSIX_FSYNCS", f.Syncs}, {"POSIX_BYTES_READ", f.BytesRead}, {"POSIX_BYTES_WRITTEN", f.BytesWritten},
			{"POSIX_MAX_BYTE_READ", max(f.MaxReadEnd-1, 0)}, {"POSIX_MAX_BYTE_WRITTEN", max(f.MaxWriteEnd-1, 0)},
			{"POSIX_CONSEC_READS", f.ConsecReads}, {"POSIX_CONSEC_WRITES", f.ConsecWrite},
			{"POSIX_SEQ_READS", f.SeqReads}, {"POSIX_SEQ_WRITES", f.SeqWrites},
		} {
			line(c.name, c.v)
		}
		for i, b := range SizeBuckets {
			line("POSIX_SIZE_READ_"+b.Name, f.ReadSizes[i])
		}
		for i, b := range SizeBuckets {
			line("POSIX_SIZE_WRITE_"+b.Name, f.WriteSizes[i])
		}
		line("POSIX_F_READ_TIME", fmt.Sprintf("%.6f", f.ReadTime.Seconds()))
		line("POSIX_F_WRITE_TIME", fmt.Sprintf("%.6f", f.WriteTime.Seconds()))
		line("POSIX_F_META_TIME", fmt.Sprintf("%.6f", f.MetaTime.Seconds()))
	}
	return bw.Flush()
}

// mountOf is the mount point and fs type holding path.
func mountOf(ms []mountinfo.MountInfo, path string) (string, string) {
	best, fstype := "/", "unknown"
	for _, m := range ms {
		if (path == m.Point || strings.HasPrefix(path, strings.TrimSuffix(m.Point, "/")+"/")) && len(m.Point) >= len(best) {
			best, fstype = m.Point, m.FSType
		}
	}
	return best, fstype
}
