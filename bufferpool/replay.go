package bufferpool

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

// ReplayFile is a file the journal of a dead pool holds dirty pages of.
type ReplayFile struct {
	Tag      []byte // what the owner passed to SetJournalTag
	PageSize int64
	Size     int64 // the file's logical size as last logged
	// Pages lists the pages, ascending; each is handed to the writer with
	// its valid bytes (the last one cut at Size).
	Pages []int64
}

// ReplayReport says what Replay found and did.
type ReplayReport struct {
	Dirs    int   `json:"dirs"`    // instance directories of dead daemons found
	Files   int   `json:"files"`   // files written back
	Pages   int   `json:"pages"`   // pages written back
	Bytes   int64 `json:"bytes"`   // bytes written back
	Skipped int   `json:"skipped"` // pages not written back (bad checksum, segment gone)
	Failed  int   `json:"failed"`  // files the writer failed on
	Kept    int   `json:"kept"`    // directories kept for a later daemon (a writer failed)
	// Reclaimed is the bytes of tier files removed.
	Reclaimed int64 `json:"reclaimed_bytes"`
	// Messages has one line per skipped page, failed file, torn journal
	// (the first maxMessages; then one line saying how many more).
	Messages []string `json:"messages,omitempty"`
	more     int
}

const maxMessages = 64

func (r *ReplayReport) note(msg string) {
	if len(r.Messages) < maxMessages {
		r.Messages = append(r.Messages, msg)
	} else {
		r.more++
	}
}

// ReplayOpener opens the file of f for Replay to write its pages back.
// An error that wraps ErrNotFound drops the file (it is gone); any other
// keeps the dead daemon's directory for a later try.
type ReplayOpener func(f *ReplayFile) (ReplaySink, error)

// ReplaySink takes one file's pages.
type ReplaySink interface {
	// WritePage writes the valid bytes of page i (data is reused after
	// the call).
	WritePage(i int64, data []byte) error
	// Close is called after the last page, or after a failure (err
	// non-nil): set the size, sync, close.
	Close(err error) error
}

// staleDir is the directory of a dead daemon on tier t, whose bytes are
// counted in the tier's used bytes until removed.
type staleDir struct {
	t int
	s *tier.Stale
}

// Replay hands the dirty pages that the journals of dead pools (found in
// the file tiers' directories at New) still hold, and that match their
// checksum, to write, file by file, oldest daemon first; then removes
// those daemons' files, giving their space back. Without Config.Journal,
// New already removed them and Replay has nothing to do. Call it once,
// before serving.
func (p *Pool) Replay(open ReplayOpener) ReplayReport {
	p.staleMu.Lock()
	stale := p.stale
	p.stale = nil
	p.staleMu.Unlock()
	var rep ReplayReport
	slices.SortFunc(stale, func(x, y staleDir) int { return cmp.Compare(x.s.Started(), y.s.Started()) })
	for _, sd := range stale {
		rep.Dirs++
		keep := p.replayDir(sd.s, open, &rep)
		if keep {
			rep.Kept++
			continue // still counted against the tier until Close
		}
		if err := sd.s.Remove(); err != nil {
			rep.note(fmt.Sprintf("remove %s: %v", sd.s.Dir(), err))
		}
		p.tiers[sd.t].release(sd.s.Bytes)
		rep.Reclaimed += sd.s.Bytes
	}
	if rep.more > 0 {
		rep.Messages = append(rep.Messages, fmt.Sprintf("... and %d more", rep.more))
	}
	return rep
}

// discardStale removes the dead daemons' directories unreplayed.
func (p *Pool) discardStale() {
	for _, ts := range p.tiers {
		for _, s := range ts.dev.Stale() {
			s.Remove()
		}
	}
}

// replayFile is the folded journal state of one bucket.
type replayFile struct {
	ReplayFile
	recs map[int64]tier.Record
}

// foldJournal replays the records: the latest state of each bucket.
func foldJournal(recs []tier.Record) []*replayFile {
	files := make(map[uint64]*replayFile)
	var order []uint64
	for _, r := range recs {
		f := files[r.Bucket]
		switch r.Kind {
		case tier.RecBucket:
			if f == nil {
				f = &replayFile{recs: make(map[int64]tier.Record)}
				files[r.Bucket] = f
				order = append(order, r.Bucket)
			}
			f.Tag, f.PageSize = r.Tag, r.PageSize
		case tier.RecDrop:
			delete(files, r.Bucket)
		}
		if f == nil || f.PageSize <= 0 {
			continue
		}
		switch r.Kind {
		case tier.RecPage:
			f.recs[r.Page] = r
			f.Size = r.Size
		case tier.RecGone:
			delete(f.recs, r.Page)
		case tier.RecSize:
			f.Size = r.Size
		}
	}
	var out []*replayFile
	for _, id := range order {
		f := files[id]
		if f == nil {
			continue
		}
		for i := range f.recs {
			if i*f.PageSize >= f.Size {
				delete(f.recs, i)
			}
		}
		if len(f.recs) > 0 {
			f.Pages = slices.Sorted(mapKeys(f.recs))
			out = append(out, f)
		}
	}
	return out
}

func mapKeys(m map[int64]tier.Record) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// replayDir replays one dead daemon's journal; keep reports a writer
// failure that is worth a later try.
func (p *Pool) replayDir(s *tier.Stale, open ReplayOpener, rep *ReplayReport) (keep bool) {
	recs, rest, err := s.ReadJournal()
	if err != nil {
		rep.note(err.Error())
		return false
	}
	if rest > 0 {
		rep.note(fmt.Sprintf("journal in %s: %d bytes of a torn or corrupt tail ignored", s.Dir(), rest))
	}
	for _, f := range foldJournal(recs) {
		if err := replayOne(s, f, open, rep); err != nil {
			rep.Failed++
			rep.note(fmt.Sprintf("replay of %s from %s: %v", f.Tag, s.Dir(), err))
			if !errors.Is(err, ErrNotFound) {
				keep = true
			}
		}
	}
	return keep
}

// replayOne verifies and writes back the pages of one file.
func replayOne(s *tier.Stale, f *replayFile, open ReplayOpener, rep *ReplayReport) error {
	sink, err := open(&f.ReplayFile)
	if err != nil {
		return err
	}
	buf := make([]byte, f.PageSize)
	var pages int
	var bytes int64
	for _, i := range f.Pages {
		data, err := readChecked(s, f.recs[i], buf)
		if err != nil {
			rep.Skipped++
			rep.note(fmt.Sprintf("page %d of %s skipped, not written back: %v", i, f.Tag, err))
			continue
		}
		data = data[:min(int64(len(data)), f.Size-i*f.PageSize)]
		if err := sink.WritePage(i, data); err != nil {
			return sink.Close(err)
		}
		pages++
		bytes += int64(len(data))
	}
	if err := sink.Close(nil); err != nil {
		return err
	}
	rep.Files++
	rep.Pages += pages
	rep.Bytes += bytes
	return nil
}

// readChecked reads a journaled page and checks it against its CRC-32C.
func readChecked(s *tier.Stale, r tier.Record, buf []byte) ([]byte, error) {
	if r.Len != int64(len(buf)) {
		return nil, fmt.Errorf("journal record of %d bytes, page size %d: %w", r.Len, len(buf), tier.ErrCorrupt)
	}
	if err := s.ReadSegment(r.Segment, r.Off, buf); err != nil {
		return nil, err
	}
	if got := crc32.Checksum(buf, tier.Castagnoli); got != r.CRC {
		return nil, fmt.Errorf("segment %s at %d: checksum %08x, journal says %08x: %w", r.Segment, r.Off, got, r.CRC, tier.ErrCorrupt)
	}
	return buf, nil
}
