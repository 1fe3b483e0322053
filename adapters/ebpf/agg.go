package ebpf

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// SizeBuckets are Darshan's access-size buckets: the upper bound of each
// (the last is open-ended).
var SizeBuckets = []struct {
	Name string
	Max  int64
}{
	{"0_100", 100}, {"100_1K", 1 << 10}, {"1K_10K", 10 << 10}, {"10K_100K", 100 << 10},
	{"100K_1M", 1 << 20}, {"1M_4M", 4 << 20}, {"4M_10M", 10 << 20}, {"10M_100M", 100 << 20},
	{"100M_1G", 1 << 30}, {"1G_PLUS", 1<<63 - 1},
}

func bucketOf(n int64) int {
	for i, b := range SizeBuckets {
		if n <= b.Max {
			return i
		}
	}
	return len(SizeBuckets) - 1
}

// FileStats is what the traced processes did to one file, with Darshan's
// POSIX module's counters in mind.
type FileStats struct {
	Path                     string
	Opens, Closes            int64
	Reads, Writes            int64
	BytesRead, BytesWritten  int64
	SeqReads, SeqWrites      int64 // at or after the previous access's end
	ConsecReads, ConsecWrite int64 // exactly at the previous access's end
	Seeks, Syncs, Stats      int64
	Mmaps                    int64
	ReadTime, WriteTime      time.Duration
	MetaTime                 time.Duration
	ReadSizes, WriteSizes    [10]int64 // by SizeBuckets
	MaxReadEnd, MaxWriteEnd  int64     // highest byte offset accessed + 1
	First, Last              time.Duration
	Pids                     map[int]bool
	// lastRead, lastWrite are the last byte of the previous access (0
	// before the first), as Darshan keeps them.
	lastRead, lastWrite int64
}

// Sequential is the fraction of reads and writes that were sequential.
func (f *FileStats) Sequential() float64 {
	n := f.Reads + f.Writes
	if n == 0 {
		return 0
	}
	return float64(f.SeqReads+f.SeqWrites) / float64(n)
}

// IOTime is the time spent in the file's reads, writes and metadata calls.
func (f *FileStats) IOTime() time.Duration { return f.ReadTime + f.WriteTime + f.MetaTime }

// fdState is one open file descriptor of a traced process.
type fdState struct {
	file *FileStats
	pos  int64
	// placeholder: the fd was first seen in use, not opened, and /proc
	// no longer knew it (a child that inherited it and exited before its
	// events were read); its fork, seen later, names the file.
	placeholder bool
}

// merge adds g's counts into f.
func (f *FileStats) merge(g *FileStats) {
	f.Opens += g.Opens
	f.Closes += g.Closes
	f.Reads += g.Reads
	f.Writes += g.Writes
	f.BytesRead += g.BytesRead
	f.BytesWritten += g.BytesWritten
	f.SeqReads += g.SeqReads
	f.SeqWrites += g.SeqWrites
	f.ConsecReads += g.ConsecReads
	f.ConsecWrite += g.ConsecWrite
	f.Seeks += g.Seeks
	f.Syncs += g.Syncs
	f.Stats += g.Stats
	f.Mmaps += g.Mmaps
	f.ReadTime += g.ReadTime
	f.WriteTime += g.WriteTime
	f.MetaTime += g.MetaTime
	for i := range f.ReadSizes {
		f.ReadSizes[i] += g.ReadSizes[i]
		f.WriteSizes[i] += g.WriteSizes[i]
	}
	f.MaxReadEnd = max(f.MaxReadEnd, g.MaxReadEnd)
	f.MaxWriteEnd = max(f.MaxWriteEnd, g.MaxWriteEnd)
	if g.First != 0 && (f.First == 0 || g.First < f.First) {
		f.First = g.First
	}
	f.Last = max(f.Last, g.Last)
	for p := range g.Pids {
		f.Pids[p] = true
	}
}

// forked gives child a copy of parent's fds (a fork copies the fd
// table). The child's events may have come first (a vfork parent returns
// only once its child has exec'd or exited): what they counted on
// placeholder fds moves to the parent's files.
func (a *Aggregator) forked(parent, child int) {
	for k, st := range a.fds {
		if k[0] != parent {
			continue
		}
		ck := [2]int{child, k[1]}
		cst := a.fds[ck]
		switch {
		case cst == nil:
			a.fds[ck] = &fdState{file: st.file, pos: st.pos}
		case cst.placeholder:
			st.file.merge(cst.file)
			delete(a.files, cst.file.Path)
			if a.Timeline != nil {
				a.Timeline.rename(child, cst.file.Path, st.file.Path)
			}
			a.fds[ck] = &fdState{file: st.file, pos: cst.pos}
		}
	}
}

// Aggregator joins events into per-file statistics: it follows each
// process's fds (from their opens, or /proc on first sight), their
// positions (reads, writes and seeks move them), and counts per path.
// Not safe for concurrent use.
type Aggregator struct {
	files map[string]*FileStats
	fds   map[[2]int]*fdState // pid, fd
	cwd   map[int]string
	// Calls counts every traced call by name; Bytes the bytes of reads
	// and writes, per process.
	Calls map[string]int64
	Procs map[int]*ProcStats
	// Timeline, when set, keeps every call attributed to a file, for
	// the picture (Timeline.WriteHTML).
	Timeline *Timeline
	// Block is what was issued to the block devices during the trace,
	// by every process (the tracer's Block record).
	Block []BlockIO
	// Lost is the calls the kernel could not pass on or follow: the
	// counts are short by them.
	Lost uint64
	// forks are the children the kernel's fork records named: their
	// fds were copied then, not at the fork syscall's return; parent is
	// each one's parent, whose fd of the same number names an fd the
	// child inherited once the child is gone from /proc.
	forks  map[int]bool
	parent map[int]int
}

// ProcStats is what one process did.
type ProcStats struct {
	Pid                     int
	Calls                   int64
	BytesRead, BytesWritten int64
}

// NewAggregator returns an empty aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{files: map[string]*FileStats{}, fds: map[[2]int]*fdState{}, cwd: map[int]string{},
		Calls: map[string]int64{}, Procs: map[int]*ProcStats{}, forks: map[int]bool{}, parent: map[int]int{}}
}

// Files returns the files, most bytes first.
func (a *Aggregator) Files() []*FileStats {
	out := make([]*FileStats, 0, len(a.files))
	for _, f := range a.files {
		out = append(out, f)
	}
	slices.SortFunc(out, func(x, y *FileStats) int {
		bx, by := x.BytesRead+x.BytesWritten, y.BytesRead+y.BytesWritten
		if bx != by {
			if bx > by {
				return -1
			}
			return 1
		}
		return compareStrings(x.Path, y.Path)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (a *Aggregator) file(path string) *FileStats {
	f := a.files[path]
	if f == nil {
		f = &FileStats{Path: path, Pids: map[int]bool{}}
		a.files[path] = f
	}
	return f
}

// abs resolves p for process pid (relative paths against its cwd, read
// once from /proc; "" when it is gone).
func (a *Aggregator) abs(pid int, dirfd int64, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	base := ""
	if dirfd != atFDCWD {
		if st := a.fds[[2]int{pid, int(dirfd)}]; st != nil {
			base = st.file.Path
		}
	}
	if base == "" {
		c, ok := a.cwd[pid]
		if !ok {
			c, _ = os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
			a.cwd[pid] = c
		}
		base = c
	}
	if base == "" {
		return p
	}
	return filepath.Join(base, p)
}

const atFDCWD = -100

// fd returns the state of fd in pid, resolving an fd not seen opened
// through /proc; when that fails (the process is gone), a placeholder
// named by pid and fd if placeholder, else nil.
func (a *Aggregator) fd(pid, fd int, placeholder bool) *fdState {
	if fd < 0 {
		return nil
	}
	k := [2]int{pid, fd}
	if st := a.fds[k]; st != nil {
		return st
	}
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		p, err = a.inherited(pid, fd)
	}
	if err != nil {
		if !placeholder {
			return nil
		}
		st := &fdState{file: a.file(fmt.Sprintf("<pid %d fd %d>", pid, fd)), placeholder: true}
		a.fds[k] = st
		return st
	}
	st := &fdState{file: a.file(p)}
	a.fds[k] = st
	return st
}

func (a *Aggregator) proc(pid int) *ProcStats {
	ps := a.Procs[pid]
	if ps == nil {
		ps = &ProcStats{Pid: pid}
		a.Procs[pid] = ps
	}
	return ps
}

// inherited names fd of pid, gone, by its ancestors' fd of that number
// (the one it inherited, unless the child or the parent changed it).
func (a *Aggregator) inherited(pid, fd int) (string, error) {
	err := os.ErrNotExist
	for p, n := a.parent[pid], 0; p != 0 && n < 64; p, n = a.parent[p], n+1 {
		if st := a.fds[[2]int{p, fd}]; st != nil && !st.placeholder {
			return st.file.Path, nil
		}
		var path string
		if path, err = os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", p, fd)); err == nil {
			return path, nil
		}
	}
	return "", err
}

// Add accounts one event.
func (a *Aggregator) Add(e Event) {
	fd := int(int32(e.Args[0]))
	switch {
	case e.Fork:
		a.forks[int(e.Ret)] = true
		a.parent[int(e.Ret)] = e.Pid
		a.forked(e.Pid, int(e.Ret))
		return
	case e.Counts != nil:
		a.counted(e, fd)
		return
	case e.Block != nil:
		a.Block = append(a.Block, e.Block...)
		a.Lost += e.Lost
		return
	case e.Sample:
		if st := a.fd(e.Pid, fd, true); st != nil {
			a.touch(st.file, e)
		}
		return
	}
	a.Calls[e.Call.Name]++
	ps := a.proc(e.Pid)
	ps.Calls++
	switch e.Call.Kind {
	case KindOpen:
		if e.Ret < 0 {
			return
		}
		dirfd := int64(atFDCWD)
		if e.Call.Path == 2 {
			dirfd = int64(int32(e.Args[0]))
		}
		f := a.file(a.abs(e.Pid, dirfd, e.Path))
		f.Opens++
		a.touch(f, e)
		f.MetaTime += e.Latency
		a.fds[[2]int{e.Pid, int(e.Ret)}] = &fdState{file: f}
	case KindClose:
		if st := a.fds[[2]int{e.Pid, fd}]; st != nil {
			st.file.Closes++
			st.file.MetaTime += e.Latency
			delete(a.fds, [2]int{e.Pid, fd})
		}
	case KindDup:
		if st := a.fd(e.Pid, fd, false); st != nil && e.Ret >= 0 {
			a.fds[[2]int{e.Pid, int(e.Ret)}] = &fdState{file: st.file, pos: st.pos}
		}
	case KindRead, KindPRead, KindWrite, KindPWrite:
		a.access(e, fd, ps)
	case KindCopy:
		a.copied(e, ps)
	case KindFork:
		if e.Ret > 0 && !a.forks[int(e.Ret)] {
			a.forked(e.Pid, int(e.Ret))
		}
	case KindSeek:
		if st := a.fd(e.Pid, fd, false); st != nil && e.Ret >= 0 {
			st.pos = e.Ret
			st.file.Seeks++
			a.touch(st.file, e)
		}
	case KindSync:
		if st := a.fd(e.Pid, fd, true); st != nil {
			st.file.Syncs++
			st.file.WriteTime += e.Latency
			a.touch(st.file, e)
		}
	case KindMmap:
		if mfd := int(int32(e.Args[4])); mfd >= 0 && e.Ret > 0 {
			if st := a.fd(e.Pid, mfd, false); st != nil {
				st.file.Mmaps++
			}
		}
	case KindMeta:
		if e.Path != "" {
			dirfd := int64(atFDCWD)
			if e.Call.Path == 2 {
				dirfd = int64(int32(e.Args[0]))
			}
			f := a.file(a.abs(e.Pid, dirfd, e.Path))
			f.Stats++
			f.MetaTime += e.Latency
			a.touch(f, e)
		} else if st := a.fd(e.Pid, fd, false); st != nil && e.Call.Name != "getdents64" {
			st.file.Stats++
			st.file.MetaTime += e.Latency
		}
	}
}

func (a *Aggregator) touch(f *FileStats, e Event) {
	if a.Timeline != nil {
		a.Timeline.Add(e, f.Path)
	}
	f.Pids[e.Pid] = true
	start := e.Time - e.Latency
	if f.First == 0 || start < f.First {
		f.First = start
	}
	f.Last = max(f.Last, e.Time)
}

// access accounts a read or write of e.Ret bytes on fd.
func (a *Aggregator) access(e Event, fd int, ps *ProcStats) {
	st := a.fd(e.Pid, fd, true)
	if st == nil || e.Ret < 0 {
		return
	}
	f, n := st.file, e.Ret
	off := st.pos
	positioned := e.Call.Kind == KindPRead || e.Call.Kind == KindPWrite
	if positioned && (e.Call.Name == "preadv2" || e.Call.Name == "pwritev2") && int64(e.Args[3]) == -1 {
		positioned = false // offset -1: at (and moving) the file position
	}
	switch {
	case e.Off >= 0: // the kernel's
		off = e.Off
		if !positioned {
			st.pos = off + n
		}
	case positioned:
		off = int64(e.Args[3])
	default:
		st.pos += n
	}
	a.touch(f, e)
	d := direction{&f.Writes, &f.BytesWritten, &f.SeqWrites, &f.ConsecWrite, &f.lastWrite, &f.MaxWriteEnd,
		&ps.BytesWritten, &f.WriteTime, &f.WriteSizes}
	if e.Call.Kind == KindRead || e.Call.Kind == KindPRead {
		d = direction{&f.Reads, &f.BytesRead, &f.SeqReads, &f.ConsecReads, &f.lastRead, &f.MaxReadEnd,
			&ps.BytesRead, &f.ReadTime, &f.ReadSizes}
	}
	d.count(off, n, e.Latency)
}

// direction is the counters of one direction (reads or writes) of a file
// and of its process.
type direction struct {
	calls, bytes, seq, consec, last, maxEnd, procBytes *int64
	time                                               *time.Duration
	sizes                                              *[10]int64
}

// count accounts an access of n bytes at off that took lat, with
// Darshan's rules: sequential past the previous access's last byte,
// consecutive right after it.
func (d direction) count(off, n int64, lat time.Duration) {
	*d.calls++
	*d.bytes += n
	*d.procBytes += n
	*d.time += lat
	d.sizes[bucketOf(n)]++
	if off > *d.last {
		*d.seq++
	}
	if off == *d.last+1 {
		*d.consec++
	}
	*d.last = off + n - 1
	*d.maxEnd = max(*d.maxEnd, off+n)
}

// counted adds a Counts record of the kernel (pid's reads and writes on
// fd) to the fd's file. The kernel keeps the previous offset per fd, not
// per file as Darshan does: the record's first access is judged again
// against the file's previous one, but a file accessed through two fds
// at once counts its sequential accesses per fd.
func (a *Aggregator) counted(e Event, fd int) {
	c := e.Counts
	st := a.fd(e.Pid, fd, true)
	if st == nil {
		return
	}
	f, ps := st.file, a.proc(e.Pid)
	var calls [2]int64
	for i, n := range c.Calls {
		if n > 0 {
			a.Calls[RWSyscalls[i]] += n
			calls[i/5] += n
		}
	}
	ps.Calls += calls[0] + calls[1]
	ps.BytesRead += c.Bytes[0]
	ps.BytesWritten += c.Bytes[1]
	f.Reads += calls[0]
	f.Writes += calls[1]
	f.BytesRead += c.Bytes[0]
	f.BytesWritten += c.Bytes[1]
	f.SeqReads += c.Seq[0] + rejudge(c.FirstOff[0], f.lastRead, false)
	f.SeqWrites += c.Seq[1] + rejudge(c.FirstOff[1], f.lastWrite, false)
	f.ConsecReads += c.Consec[0] + rejudge(c.FirstOff[0], f.lastRead, true)
	f.ConsecWrite += c.Consec[1] + rejudge(c.FirstOff[1], f.lastWrite, true)
	f.ReadTime += c.Time[0]
	f.WriteTime += c.Time[1]
	for b := range f.ReadSizes {
		f.ReadSizes[b] += c.Sizes[0][b]
		f.WriteSizes[b] += c.Sizes[1][b]
	}
	f.MaxReadEnd = max(f.MaxReadEnd, c.MaxEnd[0])
	f.MaxWriteEnd = max(f.MaxWriteEnd, c.MaxEnd[1])
	if calls[0] > 0 {
		f.lastRead = c.LastOff[0]
	}
	if calls[1] > 0 {
		f.lastWrite = c.LastOff[1]
	}
	if calls[0]+calls[1] > 0 {
		f.Pids[e.Pid] = true
		if f.First == 0 || c.First < f.First {
			f.First = c.First
		}
		f.Last = max(f.Last, c.Last)
	}
}

// rejudge corrects the kernel's verdict on a record's first access
// (offset firstOff-1, judged against an fd with no previous access: last
// byte 0) to Darshan's against the file's previous access (last): +1, 0
// or -1 to the sequential count, or with consec to the consecutive one.
func rejudge(firstOff, last int64, consec bool) int64 {
	if firstOff <= 0 {
		return 0
	}
	off := firstOff - 1
	b := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	if consec {
		return b(off == last+1) - b(off == 1)
	}
	return b(off > last) - b(off > 0)
}

// copied accounts copy_file_range(in, off_in, out, off_out, len) and
// sendfile(out, in, off, count): ret bytes read from in and written to
// out, at the fds' positions unless an offset pointer was given (whose
// value the tracer does not read: the access then counts at the fd's
// position, which does not move).
func (a *Aggregator) copied(e Event, ps *ProcStats) {
	if e.Ret <= 0 {
		return
	}
	in, out := int(int32(e.Args[0])), int(int32(e.Args[2]))
	inOff, outOff := e.Args[1] != 0, e.Args[3] != 0
	if e.Call.Name == "sendfile" {
		in, out = int(int32(e.Args[1])), int(int32(e.Args[0]))
		inOff, outOff = e.Args[2] != 0, false
	}
	for _, side := range []struct {
		fd     int
		kind   Kind
		pinned bool
	}{{in, KindRead, inOff}, {out, KindWrite, outOff}} {
		st := a.fd(e.Pid, side.fd, true)
		if st == nil {
			continue
		}
		pos := st.pos
		e2 := e
		e2.Call.Kind = side.kind
		a.access(e2, side.fd, ps)
		if side.pinned {
			st.pos = pos
		}
	}
}
