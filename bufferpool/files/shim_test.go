package files

import (
	"os"
	"testing"
	"time"
)

// TestShimUnmapRacesGrant: the end of a file's last read-write grant
// (the kernel's release of the fd, sent in the background) while the next
// open of the file is granted its maps: the new grant keeps the lease and
// the read-write table it was given, and gives the lease back at its own
// end.
func TestShimUnmapRacesGrant(t *testing.T) {
	fs := newTestFS(t, Writeback, 256*testPage, 64*testPage, nil)
	h1 := mustOpen(t, fs, "f", os.O_RDWR|os.O_CREATE)
	defer h1.Release()
	if _, _, err := h1.ShimMaps(true, nil); err != nil {
		t.Fatal(err)
	}
	h2 := mustOpen(t, fs, "f", os.O_RDWR)
	defer h2.Release()
	granted := make(chan error, 1)
	testHookShimUnmap = func() {
		go func() {
			_, _, err := h2.ShimMaps(true, nil)
			granted <- err
		}()
		// The grant runs inside the window, or waits for its end.
		select {
		case err := <-granted:
			granted <- err
		case <-time.After(100 * time.Millisecond):
		}
	}
	h1.ShimUnmap()
	testHookShimUnmap = nil
	if err := <-granted; err != nil {
		t.Fatal(err)
	}
	b := h2.f.bucket
	if pages, _ := b.ShimLease(); pages == 0 {
		t.Fatalf("the new grant lost its lease to the old one's end")
	}
	b.ReturnShimLease()
	if pages := b.RefillShimLease(8); pages == 0 {
		t.Fatalf("the new grant's table is no longer read-write: no refill")
	}
	h2.ShimUnmap()
	if st := fs.pool.Stats(); st.LeaseBytes != 0 {
		t.Fatalf("%d bytes leased after the last grant ended", st.LeaseBytes)
	}
}
