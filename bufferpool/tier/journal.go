package tier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The journal of a file tier is an append-only log, in the instance
// directory, of what the tier's segment files hold that is not yet on the
// backing store: which bucket (and the owner's opaque tag for it), which
// page, where in which segment file, its version, its CRC-32C and the
// file's logical size. After a crash the next daemon reads it (Stale) and
// writes back what still checks out.
//
// Framing: each record is u32 body length, u32 CRC-32C of the body, body
// (little endian; the body a kind byte and uvarints). A torn or corrupt
// frame ends the log: nothing after it is trusted.

// RecordKind says what a journal record means.
type RecordKind uint8

const (
	// RecBucket names a bucket: Bucket, Tag, PageSize. Precedes the
	// bucket's other records in each journal.
	RecBucket RecordKind = iota + 1
	// RecPage: page Page of Bucket is dirty in segment file Segment at
	// Off, Len bytes with checksum CRC; the file's size was Size.
	RecPage
	// RecGone: page Page of Bucket is no longer dirty in this tier
	// (written back, moved, truncated or deleted).
	RecGone
	// RecSize: the logical size of Bucket's file is now Size.
	RecSize
	// RecDrop: Bucket is gone with all its pages.
	RecDrop
)

// Record is one journal entry; which fields matter depends on Kind.
type Record struct {
	Kind     RecordKind
	Bucket   uint64
	Tag      []byte
	PageSize int64
	Page     int64
	Version  uint64
	Segment  string
	Off, Len int64
	CRC      uint32
	Size     int64
}

// Castagnoli is the CRC-32C table (hardware accelerated on amd64/arm64).
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports a journal frame or a page that fails its checksum.
var ErrCorrupt = errors.New("tier: corrupt")

const (
	frameHeader = 8
	maxRecord   = 1 << 16
	journalName = "journal"
)

func (r *Record) appendBody(b []byte) []byte {
	b = append(b, byte(r.Kind))
	b = binary.AppendUvarint(b, r.Bucket)
	switch r.Kind {
	case RecBucket:
		b = binary.AppendUvarint(b, uint64(len(r.Tag)))
		b = append(b, r.Tag...)
		b = binary.AppendUvarint(b, uint64(r.PageSize))
	case RecPage:
		b = binary.AppendUvarint(b, uint64(r.Page))
		b = binary.AppendUvarint(b, r.Version)
		b = binary.AppendUvarint(b, uint64(len(r.Segment)))
		b = append(b, r.Segment...)
		b = binary.AppendUvarint(b, uint64(r.Off))
		b = binary.AppendUvarint(b, uint64(r.Len))
		b = binary.LittleEndian.AppendUint32(b, r.CRC)
		b = binary.AppendUvarint(b, uint64(r.Size))
	case RecGone:
		b = binary.AppendUvarint(b, uint64(r.Page))
	case RecSize:
		b = binary.AppendUvarint(b, uint64(r.Size))
	}
	return b
}

// AppendFrame appends r, framed, to b.
func AppendFrame(b []byte, r *Record) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeader)...)
	b = r.appendBody(b)
	body := b[start+frameHeader:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(body, Castagnoli))
	return b
}

// bodyReader decodes a record body; the first error sticks.
type bodyReader struct {
	b   []byte
	err error
}

func (d *bodyReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = ErrCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int is a non-negative int64 (offsets, sizes, indices).
func (d *bodyReader) int() int64 {
	v := d.uvarint()
	if v > 1<<62 {
		d.err = ErrCorrupt
	}
	return int64(v)
}

func (d *bodyReader) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = ErrCorrupt
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *bodyReader) u32() uint32 {
	if d.err != nil || len(d.b) < 4 {
		d.err = ErrCorrupt
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

// decodeBody parses one record body.
func decodeBody(body []byte) (Record, error) {
	if len(body) == 0 {
		return Record{}, ErrCorrupt
	}
	r := Record{Kind: RecordKind(body[0])}
	d := &bodyReader{b: body[1:]}
	r.Bucket = d.uvarint()
	switch r.Kind {
	case RecBucket:
		r.Tag = d.bytes()
		r.PageSize = d.int()
	case RecPage:
		r.Page = d.int()
		r.Version = d.uvarint()
		r.Segment = string(d.bytes())
		r.Off = d.int()
		r.Len = d.int()
		r.CRC = d.u32()
		r.Size = d.int()
	case RecGone:
		r.Page = d.int()
	case RecSize:
		r.Size = d.int()
	case RecDrop:
	default:
		return Record{}, ErrCorrupt
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = ErrCorrupt
	}
	return r, d.err
}

// ParseJournal decodes the records of a journal's bytes. It stops at the
// first torn or corrupt frame and reports how many bytes it left unread
// there (0 for a clean log).
func ParseJournal(b []byte) (recs []Record, rest int) {
	for len(b) > 0 {
		if len(b) < frameHeader {
			return recs, len(b)
		}
		n := binary.LittleEndian.Uint32(b)
		if n > maxRecord || int(n) > len(b)-frameHeader {
			return recs, len(b)
		}
		body := b[frameHeader : frameHeader+n]
		if crc32.Checksum(body, Castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
			return recs, len(b)
		}
		r, err := decodeBody(body)
		if err != nil {
			return recs, len(b)
		}
		recs = append(recs, r)
		b = b[frameHeader+n:]
	}
	return recs, 0
}

// Journal appends records to a file tier's journal. Safe for concurrent
// use.
//
// Compaction (StartCompact, AppendNext, FinishCompact): while it runs,
// Append writes to the old journal and to the next one; the owner
// appends a snapshot of what still matters to the next one only, and
// FinishCompact syncs it and renames it over the old one. Records of a
// bucket that reach the next journal before its snapshot (no RecBucket
// yet there) are ignored by a replay, and the snapshot, taken later,
// already holds their effect.
type Journal struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	next  *os.File // during a compaction
	buf   []byte
	dirty bool  // appended since the last Sync
	size  int64 // bytes in f
}

// Append writes recs to the journal in one write(2): once it returns they
// survive the death of the process (the page cache keeps them); Sync makes
// them survive a power loss.
func (j *Journal) Append(recs ...Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = j.buf[:0]
	for i := range recs {
		j.buf = AppendFrame(j.buf, &recs[i])
	}
	if _, err := j.f.Write(j.buf); err != nil {
		return fmt.Errorf("append journal %s: %w", j.f.Name(), err)
	}
	j.size += int64(len(j.buf))
	j.dirty = true
	if j.next != nil {
		if _, err := j.next.Write(j.buf); err != nil {
			return fmt.Errorf("append journal %s: %w", j.next.Name(), err)
		}
	}
	return nil
}

// Size is the bytes appended to the journal file (since its compaction).
func (j *Journal) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size
}

// StartCompact opens the next journal; Append writes to both from now.
func (j *Journal) StartCompact() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.next != nil {
		return fmt.Errorf("journal %s: compaction already running: %w", j.f.Name(), ErrInvalid)
	}
	f, err := os.OpenFile(j.path+".next", os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("compact journal: %w", err)
	}
	j.next = f
	return nil
}

// AppendNext writes recs to the next journal only (the snapshot).
func (j *Journal) AppendNext(recs ...Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = j.buf[:0]
	for i := range recs {
		j.buf = AppendFrame(j.buf, &recs[i])
	}
	if _, err := j.next.Write(j.buf); err != nil {
		return fmt.Errorf("compact journal %s: %w", j.next.Name(), err)
	}
	return nil
}

// FinishCompact makes the next journal the journal (ok), or drops it.
func (j *Journal) FinishCompact(ok bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	next := j.next
	j.next = nil
	if !ok {
		next.Close()
		return os.Remove(next.Name())
	}
	err := unix.Fdatasync(int(next.Fd()))
	if err == nil {
		err = os.Rename(next.Name(), j.path)
	}
	if err != nil {
		next.Close()
		os.Remove(next.Name())
		return fmt.Errorf("compact journal: %w", err)
	}
	j.f.Close()
	j.f = next
	st, err := next.Stat()
	if err == nil {
		j.size = st.Size()
	}
	return err
}

// Sync makes what was appended durable (fdatasync); the owner syncs the
// segment files the records point into first (Segment.Sync). A no-op
// when nothing was appended.
func (j *Journal) Sync() error {
	j.mu.Lock()
	dirty := j.dirty
	j.dirty = false
	j.mu.Unlock()
	if !dirty {
		return nil
	}
	if err := unix.Fdatasync(int(j.f.Fd())); err != nil {
		return fmt.Errorf("sync journal %s: %w", j.f.Name(), err)
	}
	return nil
}

// Close closes the journal file (the instance directory removes it).
func (j *Journal) Close() error { return j.f.Close() }
