package files

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Access histories: what the learned prefetch (learned.go) learns from.
//
// A history is the pages of one file in the order a session read them
// (a session: from the first open of the file to the last close), a page
// read again appearing again, consecutive reads of one page once. It is
// kept per file, keyed by the backing directory and the mount-relative
// path, and valid only for the size and mtime the backing file had when
// it was recorded: a changed input (written, replaced, touched) discards
// it. There is no per-job key: the daemon sees opens and reads, not the
// job behind them (FUSE gives a pid, the shim nothing more), so the same
// input read by two jobs in two orders keeps the last one's.
//
// Histories are files in one directory (Options.HistoryDir: "history"
// under the first file tier), one per file, named after a hash of the
// key, written (to a temporary name, then renamed) when the session
// ends. They are hints: nothing is fsynced, a history that does not parse
// is logged once, removed and ignored.
//
// Encoding (all integers varints, encoding/binary):
//
//	"IWPH" 0x01 | uvarint len(path) | path | varint size | varint mtime (ns)
//	| uvarint page size | uvarint n | n × varint (page - previous page,
//	the previous of the first is 0) | crc32c of everything before, 4 bytes LE
//
// Bounds: Options.HistoryPages pages per history (the first ones of a
// longer session are kept) and Options.HistoryFiles histories in the
// directory (the least recently written go first).

const (
	historyMagic   = "IWPH"
	historyVersion = 1
	historyExt     = ".hist"
	maxHistoryPath = 4096

	// DefaultHistoryPages is Options.HistoryPages' default: 64 GiB read
	// in 1 MiB pages, about 130 KiB of history.
	DefaultHistoryPages = 1 << 16
	// DefaultHistoryFiles is Options.HistoryFiles' default.
	DefaultHistoryFiles = 1024
)

// errHistory is the error of a history that does not parse.
var errHistory = errors.New("files: malformed access history")

// history is one recorded session of reads of a file.
type history struct {
	path     string // mount-relative
	size     int64  // the backing file's size and mtime when recorded
	mtime    int64  // unix ns
	pageSize int64
	seq      []int64 // pages in the order read
}

// encode returns h in the history encoding.
func (h *history) encode() []byte {
	b := append([]byte(historyMagic), historyVersion)
	b = binary.AppendUvarint(b, uint64(len(h.path)))
	b = append(b, h.path...)
	b = binary.AppendVarint(b, h.size)
	b = binary.AppendVarint(b, h.mtime)
	b = binary.AppendUvarint(b, uint64(h.pageSize))
	b = binary.AppendUvarint(b, uint64(len(h.seq)))
	prev := int64(0)
	for _, p := range h.seq {
		b = binary.AppendVarint(b, p-prev)
		prev = p
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// historyReader reads the fields of an encoded history; the first error
// sticks.
type historyReader struct {
	b   []byte
	err error
}

func (r *historyReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errHistory, what)
	}
}

func (r *historyReader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *historyReader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// parseHistory decodes b; maxPages bounds the sequence. An error leaves
// no partial result.
func parseHistory(b []byte, maxPages int) (*history, error) {
	if len(b) < len(historyMagic)+1+4 || string(b[:len(historyMagic)]) != historyMagic {
		return nil, fmt.Errorf("%w: bad magic", errHistory)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", errHistory)
	}
	if body[len(historyMagic)] != historyVersion {
		return nil, fmt.Errorf("%w: version %d", errHistory, body[len(historyMagic)])
	}
	r := &historyReader{b: body[len(historyMagic)+1:]}
	h := &history{}
	if n := r.uvarint("path length"); n > maxHistoryPath || n > uint64(len(r.b)) {
		r.fail("path length")
	} else {
		h.path, r.b = string(r.b[:n]), r.b[n:]
	}
	h.size, h.mtime = r.varint("size"), r.varint("mtime")
	h.pageSize = int64(r.uvarint("page size"))
	n := r.uvarint("count")
	if r.err != nil {
		return nil, r.err
	}
	if err := h.checkHeader(n, maxPages, len(r.b)); err != nil {
		return nil, err
	}
	if err := h.readSeq(r, int(n)); err != nil {
		return nil, err
	}
	return h, nil
}

// checkHeader checks the fields before the sequence of n pages, of which
// rest bytes are left (each takes one at least).
func (h *history) checkHeader(n uint64, maxPages, rest int) error {
	switch {
	case h.size < 0:
		return fmt.Errorf("%w: size %d", errHistory, h.size)
	case h.pageSize < 4096 || h.pageSize > 1<<30:
		return fmt.Errorf("%w: page size %d", errHistory, h.pageSize)
	case n > uint64(maxPages) || n > uint64(rest):
		return fmt.Errorf("%w: %d pages", errHistory, n)
	}
	return nil
}

// readSeq decodes n page deltas; every page must lie inside the size.
func (h *history) readSeq(r *historyReader, n int) error {
	pages := (h.size + h.pageSize - 1) / h.pageSize
	seq := make([]int64, 0, n)
	prev := int64(0)
	for range n {
		d := r.varint("page")
		p := prev + d
		if r.err != nil || p < 0 || p >= pages { // prev >= 0: only a d > 0 can overflow, to p < 0
			return fmt.Errorf("%w: page %d of %d", errHistory, len(seq), n)
		}
		seq = append(seq, p)
		prev = p
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the pages", errHistory, len(r.b))
	}
	h.seq = seq
	return nil
}

// historyStore is the directory of histories. Safe for concurrent use
// (each history is one file written by rename).
type historyStore struct {
	dir      string // "": histories are off
	root     string // the backing directory: part of each key
	maxPages int
	maxFiles int

	mu    sync.Mutex
	count int // histories in dir as last counted, plus those added since; -1: not counted
}

// newHistoryStore is the store Options ask for, in the FS whose
// namespace is root (off in Scratch mode: every file there is new).
func newHistoryStore(opts Options, root string) *historyStore {
	s := &historyStore{dir: opts.HistoryDir, root: root, maxPages: opts.HistoryPages, maxFiles: opts.HistoryFiles, count: -1}
	if opts.Mode == Scratch {
		s.dir = ""
	}
	if s.maxPages <= 0 {
		s.maxPages = DefaultHistoryPages
	}
	if s.maxFiles <= 0 {
		s.maxFiles = DefaultHistoryFiles
	}
	return s
}

// name is the file holding the history of the file at path.
func (s *historyStore) name(path string) string {
	sum := sha256.Sum256([]byte(s.root + "\x00" + path))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16])+historyExt)
}

// load returns the history of path recorded for a backing file of size
// and mtime, or nil: none, stale (removed) or malformed (logged by the
// caller through err, and removed).
func (s *historyStore) load(path string, size, mtime, pageSize int64) (*history, error) {
	name := s.name(path)
	b, err := readBounded(name, s.maxBytes())
	if errors.Is(err, errHistory) {
		os.Remove(name)
		return nil, fmt.Errorf("access history %s of %s: %w", name, path, err)
	}
	if err != nil {
		return nil, nil // none yet (or unreadable: as good as none)
	}
	h, err := parseHistory(b, s.maxPages)
	if err != nil {
		os.Remove(name)
		return nil, fmt.Errorf("access history %s of %s: %w", name, path, err)
	}
	if h.path != path || h.size != size || h.mtime != mtime || h.pageSize != pageSize {
		if h.path == path {
			os.Remove(name) // the file changed: what it read no longer says anything
		}
		return nil, nil
	}
	return h, nil
}

// maxBytes bounds an encoded history of at most maxPages pages: header,
// path, and a varint of at most 10 bytes a page.
func (s *historyStore) maxBytes() int64 {
	return int64(len(historyMagic)+1+4+5*binary.MaxVarintLen64+maxHistoryPath) + int64(s.maxPages)*binary.MaxVarintLen64
}

// readBounded reads the file name if it holds at most limit bytes; a
// larger one is errHistory (never read into memory).
func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: over %d bytes", errHistory, limit)
	}
	return b, nil
}

// save writes h (replacing the file's last history) and keeps the
// directory within maxFiles histories.
func (s *historyStore) save(h *history) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("access history: %w", err)
	}
	name := s.name(h.path)
	_, statErr := os.Stat(name)
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("access history: %w", err)
	}
	_, err = tmp.Write(h.encode())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("access history of %s: %w", h.path, err)
	}
	if statErr != nil {
		s.added()
	}
	return nil
}

// added counts a new history and prunes the directory when that makes
// more than maxFiles: one readdir per start and per prune, not per save.
func (s *historyStore) added() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count >= 0 && s.count < s.maxFiles {
		s.count++
		return
	}
	s.count = s.prune()
}

// prune removes the least recently written histories past maxFiles and
// returns how many are left.
func (s *historyStore) prune() int {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return 0
	}
	type aged struct {
		name string
		mod  int64
	}
	var hs []aged
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), historyExt) {
			continue
		}
		if info, err := e.Info(); err == nil {
			hs = append(hs, aged{e.Name(), info.ModTime().UnixNano()})
		}
	}
	if len(hs) <= s.maxFiles {
		return len(hs)
	}
	slices.SortFunc(hs, func(a, b aged) int { return cmp.Compare(a.mod, b.mod) })
	for _, h := range hs[:len(hs)-s.maxFiles] {
		os.Remove(filepath.Join(s.dir, h.name))
	}
	return s.maxFiles
}
