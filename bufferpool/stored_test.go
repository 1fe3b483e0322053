package bufferpool

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// demoteAll moves every blob of b on tier 0 to tier 1, as the organizer
// would.
func demoteAll(t *testing.T, b *Bucket) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var all []*blob
	for _, bl := range b.pages {
		all = append(all, bl)
	}
	for _, bl := range b.named {
		all = append(all, bl)
	}
	for _, bl := range all {
		if bl.tier == 0 {
			b.demoteLocked(bl, 0)
			if bl.tier != 1 {
				t.Fatalf("%s not demoted", bl.key())
			}
		}
	}
}

// promote moves blob bl of b to tier 0.
func promoteLocked(t *testing.T, b *Bucket, bl *blob) error {
	t.Helper()
	if !b.p.tiers[0].reserve(bl.alloc) {
		t.Fatal("no room in tier 0")
	}
	return b.moveLocked(bl, 0)
}

// corruptAt flips a byte of bucket b's segment on tier t at off, behind
// the pool's back (what a failing device does).
func corruptAt(t *testing.T, b *Bucket, tr int, off int64) {
	t.Helper()
	fd := b.segs[tr].seg.Fd()
	one := make([]byte, 1)
	if _, err := unix.Pread(fd, one, off); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x5a
	if _, err := unix.Pwrite(fd, one, off); err != nil {
		t.Fatal(err)
	}
}

// text returns n bytes that compress (a log-like text).
func text(n int, seed int) []byte {
	var buf bytes.Buffer
	for i := 0; buf.Len() < n; i++ {
		fmt.Fprintf(&buf, "step %d rank %d temperature=%.3f pressure=%.1f ok\n", i, seed, float64(i%97)/7, float64(i%13)*3)
	}
	return buf.Bytes()[:n]
}

func random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

const testPS = 4 * storedChunk // a page of four chunks

// TestChecksumCatchesCorruptTier: a page demoted to the file tier is
// checksummed; a byte flipped on the file tier behind the pool's back is
// caught by every read that touches its chunk (ErrCorrupt, counted), the
// other chunks still read, and the move back up refuses to carry it.
func TestChecksumCatchesCorruptTier(t *testing.T) {
	p := testPool(t, 8*testPS, 16*testPS)
	b := mustBucket(t, p, "f", testPS)
	pages := [][]byte{text(testPS, 0), random(testPS, 1)}
	for i, d := range pages {
		if err := b.PutPage(int64(i), d, false); err != nil {
			t.Fatal(err)
		}
	}
	demoteAll(t, b)
	if st := p.Stats().Tiers[1]; st.Checksummed != 2 || st.ChecksumErrors != 0 {
		t.Fatalf("file tier after demotion: %+v", st)
	}
	buf := make([]byte, testPS)
	for i, d := range pages {
		if _, err := b.ReadPage(int64(i), 0, buf, nil); err != nil {
			t.Fatal(err)
		}
		wantBytes(t, buf, d)
	}
	for i := range pages {
		corruptAt(t, b, 1, int64(i)*testPS+2*storedChunk+100) // chunk 2 of each page
	}
	for i, d := range pages {
		_, err := b.ReadPage(int64(i), 2*storedChunk+50, buf[:100], nil)
		wantErr(t, err, ErrCorrupt)
		_, err = b.ReadPage(int64(i), storedChunk-10, buf[:20], nil) // chunks 0..1: good
		if err != nil {
			t.Fatalf("page %d, good chunks: %v", i, err)
		}
		wantBytes(t, buf[:20], d[storedChunk-10:storedChunk+10])
		_, err = b.SnapshotDirty(int64(i), buf, nil)
		wantErr(t, err, ErrCorrupt)
	}
	if got := p.Stats().Tiers[1].ChecksumErrors; got != 2 {
		t.Fatalf("checksum errors %d, want 2 (two corrupt pages)", got)
	}
	b.mu.Lock()
	err := promoteLocked(t, b, b.pages[0])
	tierNow := b.pages[0].tier
	b.mu.Unlock()
	wantErr(t, err, ErrCorrupt)
	if tierNow != 1 {
		t.Fatalf("corrupt page moved to tier %d", tierNow)
	}
	// A write in part cannot keep the bad bytes' neighbours (page 1 is
	// raw: its form just goes); a write of the whole page replaces them.
	if _, err := b.WritePage(1, 0, []byte("x"), nil); err != nil {
		t.Fatalf("write in part of a raw checksummed page: %v", err)
	}
	if err := b.PutPage(0, pages[0], false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadPage(0, 0, buf, nil); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, buf, pages[0])
	checkAccounting(t, p)
}

// TestChecksumNamedBlob: the same for a named blob that is not a whole
// number of chunks.
func TestChecksumNamedBlob(t *testing.T) {
	p := testPool(t, 8*testPS, 16*testPS)
	b := mustBucket(t, p, "n", 0)
	data := random(3*storedChunk+777, 2)
	if err := b.Put("x", data); err != nil {
		t.Fatal(err)
	}
	demoteAll(t, b)
	got, err := b.Get("x")
	if err != nil {
		t.Fatal(err)
	}
	wantBytes(t, got, data)
	corruptAt(t, b, 1, b.named["x"].off+3*storedChunk+700) // the short last chunk
	_, err = b.Get("x")
	wantErr(t, err, ErrCorrupt)
	buf := make([]byte, 100)
	if _, err := b.PartialGet("x", 10, buf); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, buf, data[10:110])
	checkAccounting(t, p)
}

// TestCompressPerBucket: each codec compresses a bucket's pages and
// named blobs when they move to the file tier (the capacity saved shows
// in TierStats), reads (whole, partial, across chunks) return the bytes
// written, a write in place decompresses first, and the move back to
// RAM is raw. Random bytes are not compressed (the first chunk says it
// does not pay) but are checksummed; a bucket without a codec is raw.
func TestCompressPerBucket(t *testing.T) {
	for _, name := range []string{CompressZstd, CompressS2, CompressLZ4} {
		t.Run(name, func(t *testing.T) {
			p := testPool(t, 8*testPS, 16*testPS)
			b, err := p.Bucket("f", BucketOptions{PageSize: testPS, Compress: name})
			if err != nil {
				t.Fatal(err)
			}
			if b.Compress() != name {
				t.Fatalf("compress %q", b.Compress())
			}
			pages := [][]byte{text(testPS, 0), random(testPS, 3), text(testPS, 1)}
			for i, d := range pages {
				if err := b.PutPage(int64(i), d, i == 2); err != nil {
					t.Fatal(err)
				}
			}
			nb, err := p.Bucket("n", BucketOptions{Compress: name})
			if err != nil {
				t.Fatal(err)
			}
			blobData := text(2*storedChunk+5, 9)
			if err := nb.Put("x", blobData); err != nil {
				t.Fatal(err)
			}
			demoteAll(t, b)
			demoteAll(t, nb)
			st := p.Stats().Tiers[1]
			if st.Compressed != 3 || st.Checksummed != 4 || st.SavedBytes <= 0 || st.Ratio() < 2 {
				t.Fatalf("file tier: %+v (ratio %.2f)", st, st.Ratio())
			}
			if b.pages[1].st.c != nil {
				t.Fatal("random page compressed")
			}
			checkAccounting(t, p)
			buf := make([]byte, testPS)
			for i, d := range pages {
				if _, err := b.ReadPage(int64(i), 0, buf, nil); err != nil {
					t.Fatal(err)
				}
				wantBytes(t, buf, d)
				part := buf[:storedChunk+3]
				if _, err := b.ReadPage(int64(i), storedChunk-1, part, nil); err != nil {
					t.Fatal(err)
				}
				wantBytes(t, part, d[storedChunk-1:2*storedChunk+2])
			}
			got, err := nb.Get("x")
			if err != nil {
				t.Fatal(err)
			}
			wantBytes(t, got, blobData)
			// In place on the file tier: decompressed first.
			if _, err := b.WritePage(0, 10, []byte("XYZ"), nil); err != nil {
				t.Fatal(err)
			}
			copy(pages[0][10:], "XYZ")
			if b.pages[0].st != nil || b.pages[0].tier != 1 {
				t.Fatalf("page 0 after a write in place: tier %d stored %v", b.pages[0].tier, b.pages[0].st)
			}
			if err := nb.PartialPut("x", 1, []byte("Q")); err != nil {
				t.Fatal(err)
			}
			blobData[1] = 'Q'
			checkAccounting(t, p)
			b.mu.Lock()
			err = promoteLocked(t, b, b.pages[2])
			b.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if b.pages[2].st != nil || b.pages[2].tier != 0 {
				t.Fatal("promoted page not raw in RAM")
			}
			for i, d := range pages {
				if _, err := b.ReadPage(int64(i), 0, buf, nil); err != nil {
					t.Fatal(err)
				}
				wantBytes(t, buf, d)
			}
			if got, _ := nb.Get("x"); !bytes.Equal(got, blobData) {
				t.Fatal("named blob after partial put")
			}
			if st := p.Stats().Tiers[1]; st.Compressed != 0 || st.SavedBytes != 0 {
				t.Fatalf("file tier after writes and promotion: %+v", st)
			}
			checkAccounting(t, p)
			p.DeleteBucket("f")
			p.DeleteBucket("n")
			if st := p.Stats().Tiers[1]; st.Used != 0 || st.Checksummed != 0 {
				t.Fatalf("file tier after delete: %+v", st)
			}
		})
	}
	p := testPool(t, 8*testPS, 16*testPS)
	b := mustBucket(t, p, "plain", testPS)
	b.PutPage(0, text(testPS, 0), false)
	demoteAll(t, b)
	if st := p.Stats().Tiers[1]; st.Compressed != 0 || st.Checksummed != 1 {
		t.Fatalf("bucket without a codec: %+v", st)
	}
	if _, err := p.Bucket("bad", BucketOptions{Compress: "gzip"}); err == nil {
		t.Fatal("unknown codec accepted")
	}
}

// TestCompressCorruptChunk: a byte flipped in a compressed chunk is
// caught (by the codec or the checksum).
func TestCompressCorruptChunk(t *testing.T) {
	for _, name := range []string{CompressZstd, CompressS2, CompressLZ4} {
		t.Run(name, func(t *testing.T) {
			p := testPool(t, 8*testPS, 16*testPS)
			b, _ := p.Bucket("f", BucketOptions{PageSize: testPS, Compress: name})
			b.PutPage(0, text(testPS, 0), false)
			demoteAll(t, b)
			st := b.pages[0].st
			corruptAt(t, b, 1, int64(st.offs[1]+st.offs[2])/2) // inside chunk 1
			_, err := b.ReadPage(0, storedChunk, make([]byte, 10), nil)
			wantErr(t, err, ErrCorrupt)
		})
	}
}

// TestPinStored: a page in a stored form is not handed out raw for a
// zero-copy read (its bytes are compressed, or must be checked).
func TestPinStored(t *testing.T) {
	p := testPool(t, 8*testPS, 16*testPS)
	b, _ := p.Bucket("f", BucketOptions{PageSize: testPS, Compress: CompressS2})
	b.PutPage(0, text(testPS, 0), false)
	if _, _, unpin, ok := b.PinPage(0, 0, 100); !ok {
		t.Fatal("RAM page not pinned")
	} else {
		unpin()
	}
	demoteAll(t, b)
	if _, _, _, ok := b.PinPage(0, 0, 100); ok {
		t.Fatal("compressed page pinned")
	}
}

// TestCorruptCompressedOverwrite: a compressed page that failed its
// checksum is counted once however often it is read, the organizer's
// moves leave it alone, a write in part fails (its other bytes are
// lost), and a write of the whole page replaces it.
func TestCorruptCompressedOverwrite(t *testing.T) {
	p := testPool(t, 8*testPS, 16*testPS)
	b, _ := p.Bucket("f", BucketOptions{PageSize: testPS, Compress: CompressZstd})
	page := text(testPS, 0)
	b.PutPage(0, page, false)
	demoteAll(t, b)
	corruptAt(t, b, 1, int64(b.pages[0].st.offs[1])/2)
	buf := make([]byte, 10)
	for range 3 {
		_, err := b.ReadPage(0, 0, buf, nil)
		wantErr(t, err, ErrCorrupt)
	}
	if got := p.Stats().Tiers[1].ChecksumErrors; got != 1 {
		t.Fatalf("checksum errors %d, want 1", got)
	}
	b.mu.Lock()
	err := promoteLocked(t, b, b.pages[0])
	b.mu.Unlock()
	wantErr(t, err, ErrCorrupt)
	_, err = b.WritePage(0, 5, []byte("x"), nil)
	wantErr(t, err, ErrCorrupt)
	if err := b.PutPage(0, page, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadPage(0, 0, buf, nil); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, buf, page[:10])
	checkAccounting(t, p)
}

// TestStoredConcurrent: readers of pages that move up and down (stored
// compressed on the file tier, raw in RAM) and writers replacing them
// with the same bytes, at once: every read returns the page's bytes.
func TestStoredConcurrent(t *testing.T) {
	p := testPool(t, 8*testPS, 32*testPS, func(c *Config) { c.PromoteReads = 1 })
	b, _ := p.Bucket("f", BucketOptions{PageSize: testPS, Compress: CompressLZ4})
	const n = 8
	pages := make([][]byte, n)
	for i := range pages {
		pages[i] = text(testPS, i)
		if err := b.PutPage(int64(i), pages[i], false); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 3000)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (k + r) % n
				off := int64((k * 7919) % (testPS - len(buf)))
				if _, err := b.ReadPage(int64(i), off, buf, nil); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf, pages[i][off:off+int64(len(buf))]) {
					errs <- fmt.Errorf("page %d at %d: wrong bytes", i, off)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := b.PutPage(int64(k%n), pages[k%n], false); err != nil {
				errs <- err
				return
			}
		}
	}()
	var compressed int64
	for range 30 {
		p.Shed(0)
		compressed = max(compressed, p.Stats().Tiers[1].Compressed)
		p.Unshed()
		p.Organize()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if compressed == 0 {
		t.Fatal("no page was ever stored compressed")
	}
	checkAccounting(t, p)
}

// TestDecodeInPlaceLarge: a compressed named blob of several batches,
// written in part on the file tier, is decompressed in its place, batch
// by batch, with every byte kept.
func TestDecodeInPlaceLarge(t *testing.T) {
	p := testPool(t, 8<<20, 64<<20)
	b, _ := p.Bucket("n", BucketOptions{Compress: CompressS2})
	data := text(5*storedBatch/2+12345, 4)
	if err := b.Put("big", data); err != nil {
		t.Fatal(err)
	}
	demoteAll(t, b)
	if st := b.named["big"].st; st == nil || st.c == nil {
		t.Fatal("not compressed")
	}
	if err := b.PartialPut("big", 3, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	copy(data[3:], "abc")
	if b.named["big"].st != nil {
		t.Fatal("still in a stored form after a write in place")
	}
	got, err := b.Get("big")
	if err != nil {
		t.Fatal(err)
	}
	wantBytes(t, got, data)
	checkAccounting(t, p)
}
