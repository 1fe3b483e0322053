package files

// STUB of the contract used by fusefs (and later runtime/ipc). Bodies are
// being written in this package; signatures are fixed.

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// Mode is the write-back policy of a mount.
type Mode string

const (
	// Writeback absorbs writes in the tiers and drains them to the backing
	// store in the background; fsync/fdatasync/syncfs wait for it.
	Writeback Mode = "writeback"
	// Writethrough returns from a write once it is on the backing store.
	Writethrough Mode = "writethrough"
	// Scratch never writes data back; the namespace is private and is
	// removed when the file system closes.
	Scratch Mode = "scratch"
)

// ErrNoSpace is returned (wrapped) when the pool stays full after draining
// and evicting clean pages for Options.NoSpaceWait. Doors map it to ENOSPC.
var ErrNoSpace = bufferpool.ErrNoSpace

// ErrPastEOF is returned by Handle.WriteInside for a write that would end
// past the file's size: nothing was written.
var ErrPastEOF = errors.New("files: write past the end of the file")

// ErrClosed: the file system is shut down.
var ErrClosed = errors.New("files: closed")

// Options configure an FS.
type Options struct {
	Backing      string // directory mirrored by the mount (required unless Mode == Scratch)
	Mode         Mode   // "" = Writeback
	PageSize     int64  // 0 = 1 MiB
	FlushOnClose bool   // close(2) waits for the file's write-back
	Flushers     int    // background write-back workers; 0 = 4
	// BackingBandwidth throttles write-back to this many bytes/s (0 =
	// unlimited). Emulates a slow parallel file system in tests/benchmarks.
	BackingBandwidth int64
	// ScratchDir holds the private namespace in Scratch mode ("" = a
	// directory under os.TempDir()).
	ScratchDir string
	// NoSpaceWait bounds how long a write waits for drain when the pool is
	// full before failing with ErrNoSpace. 0 = 30s.
	NoSpaceWait time.Duration
	// MaxIdleFiles bounds the clean files kept cached (with their fds)
	// while no handle holds them; 0 = DefaultMaxIdleFiles.
	MaxIdleFiles int
	// DrainTimeout bounds how long Close keeps retrying the write-back
	// while the backing store fails (0 = DefaultDrainTimeout, < 0: one
	// attempt). A slow store that makes progress is waited for.
	DrainTimeout time.Duration
	// Readahead is the largest read-ahead window of one open file in
	// bytes (prefetch.go): 0 = DefaultReadahead, < 0 = no read-ahead.
	Readahead int64
	// BufferedStageIn reads every stage-in through the kernel's page
	// cache; by default a page the page cache does not hold is read with
	// O_DIRECT (direct.go).
	BufferedStageIn bool
	// Compress chooses the codec of a file's pages on slower tiers by
	// path (compress.go): the first rule that matches wins.
	Compress []CompressRule
	// HistoryDir holds the access histories of the learned prefetch
	// (learned.go, history.go); "" turns it off (so does Readahead < 0,
	// and Scratch mode). HistoryPages bounds one history (0 =
	// DefaultHistoryPages), HistoryFiles the histories kept (0 =
	// DefaultHistoryFiles).
	HistoryDir   string
	HistoryPages int
	HistoryFiles int
}

// DefaultDrainTimeout is Options.DrainTimeout's default.
const DefaultDrainTimeout = 30 * time.Second

// Cred is the caller's identity; new files and directories get its owner.
type Cred struct{ Uid, Gid uint32 }

// DirEntry is one readdir entry.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode uint32 // S_IFMT bits only
}

// TimeSpec is a utimens argument: Omit leaves the time alone, Now uses
// the current time, otherwise Time.
type TimeSpec struct {
	Omit bool
	Now  bool
	Time time.Time
}

// SetAttr is a setattr request; nil fields are left alone.
type SetAttr struct {
	Mode         *uint32 // permission bits (and suid/sgid/sticky)
	Uid, Gid     *uint32
	Size         *int64
	Atime, Mtime *TimeSpec
}

// Stats is a snapshot for `iowarp stat`.
type Stats struct {
	Pool         bufferpool.Stats `json:"pool"`
	Mode         Mode             `json:"mode"`
	OpenFiles    int64            `json:"open_files"`
	DirtyBytes   int64            `json:"dirty_bytes"`
	FlushedBytes uint64           `json:"flushed_bytes"`
	StagedBytes  uint64           `json:"staged_bytes"`
	// StagedDirect is the part of StagedBytes read with O_DIRECT
	// (direct.go).
	StagedDirect uint64 `json:"staged_direct_bytes"`
	// ReadAround counts small reads of absent pages served straight from
	// the backing file, StagedBehind the pages then staged in behind them
	// in the background (file.readAround).
	ReadAround   uint64 `json:"read_around"`
	StagedBehind uint64 `json:"staged_behind_pages"`
	// Checksums (checksum.go): BackingChecksumErrors counts whole-page
	// stage-ins whose bytes did not match the crc32c the write-back
	// recorded (EIO); TierChecksumErrors reads of pages on slower tiers
	// that did not match the pool's, of which Repaired were clean and
	// staged in again from the backing file (the rest were EIO);
	// ChecksumsNotStored the records too large for the backing store's
	// xattrs (kept in memory only).
	BackingChecksumErrors uint64 `json:"backing_checksum_errors"`
	TierChecksumErrors    uint64 `json:"tier_checksum_errors"`
	Repaired              uint64 `json:"checksum_repaired_pages"`
	ChecksumsNotStored    uint64 `json:"checksums_not_stored"`
	// ChecksumsVerified counts the stage-ins checked against a record
	// (the rest had none, or the file had changed since).
	ChecksumsVerified uint64 `json:"checksums_verified"`
	FlushErrors       uint64 `json:"flush_errors"`
	FlushBacklog      int64  `json:"flush_backlog_files"`
	// FailingFiles are the files whose write-back is failing (sorted by
	// path, the first 64), FailingCount how many there are, and
	// StuckDirtyBytes their dirty data, held in the pool until the
	// backing store takes them.
	FailingFiles    []FailingFile `json:"failing_files"`
	FailingCount    int           `json:"failing_files_count"`
	StuckDirtyBytes int64         `json:"stuck_dirty_bytes"`
	// LongestWriteBack is the write-back running longest (nil: none runs).
	LongestWriteBack *WriteBackInFlight `json:"longest_write_back,omitempty"`
	ReadHits         uint64             `json:"read_hits"`
	ReadMisses       uint64             `json:"read_misses"`
	BytesRead        uint64             `json:"bytes_read"`
	BytesWritten     uint64             `json:"bytes_written"`
	// DirSyncs counts fsyncs of backing directories (Fsyncdir).
	DirSyncs uint64 `json:"dir_syncs"`
	// Read-ahead: pages (and bytes) staged in ahead of sequential and
	// strided readers, the reads that found such a page (or waited for
	// its stage-in), and the pages evicted or dropped before any read.
	PrefetchedPages uint64 `json:"prefetched_pages"`
	PrefetchedBytes uint64 `json:"prefetched_bytes"`
	PrefetchHits    uint64 `json:"prefetch_hits"`
	PrefetchWasted  uint64 `json:"prefetch_wasted"`
	// Replay is what start-up wrote back from the file tier of a killed
	// daemon (nil: none found).
	Replay *bufferpool.ReplayReport `json:"replay,omitempty"`
	// PassthroughOpens counts the opens handed to the kernel
	// (Handle.PassthroughFd): their reads never reach this layer.
	PassthroughOpens uint64 `json:"passthrough_opens"`
	// Learned is the learned prefetch's work (learned.go).
	Learned LearnedStats `json:"learned_prefetch"`
}

// LearnedStats counts what the learned prefetch did: the histories it
// replayed (found valid at a file's first open), saved (at its last
// close) and discarded as malformed; the pages it staged in ahead of a
// replayed reader, the reads that found one (or waited for its
// stage-in), and the pages installed hot (re-read last time: fastest tier
// first).
type LearnedStats struct {
	HistoriesLoaded    uint64 `json:"histories_loaded"`
	HistoriesSaved     uint64 `json:"histories_saved"`
	HistoriesDiscarded uint64 `json:"histories_discarded"`
	StagedPages        uint64 `json:"staged_pages"`
	Hits               uint64 `json:"hits"`
	HotPages           uint64 `json:"hot_pages"`
}

// Errors returned by FS methods wrap a syscall.Errno when they come from
// the namespace (ENOENT, EEXIST, ENOTEMPTY, EACCES ...), or ErrNoSpace /
// ErrClosed; test with errors.As / errors.Is. Paths are relative to the
// mount root, "/"-separated, without a leading slash; "" is the root.

var _ = unix.Stat_t{}
