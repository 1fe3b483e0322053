package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fillBlobs puts count random blobs of size bytes on tn; all must stay
// there (it has room).
func fillBlobs(t testing.TB, tn *testNode, count, size int) [][]byte {
	t.Helper()
	ctx := context.Background()
	blobs := make([][]byte, count)
	for i := range blobs {
		blobs[i] = make([]byte, size)
		for j := range blobs[i] {
			blobs[i][j] = byte(rand.Uint32())
		}
		if where, err := tn.node.Put(ctx, "ckpt", blobName(i), blobs[i]); err != nil || where != tn.node.Name() {
			t.Fatalf("put %s: on %q, %v; want %s", blobName(i), where, err, tn.node.Name())
		}
	}
	return blobs
}

func blobName(i int) string { return fmt.Sprintf("b%03d", i) }

// holder is the node the placement map names for blob i.
func holder(t testing.TB, tn *testNode, i int) string {
	t.Helper()
	h, _, err := lookupBlob(context.Background(), tn.node.cli, tn.node.cfg, "ckpt", blobName(i))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// inPool reports whether tn's pool holds blob i.
func inPool(tn *testNode, i int) bool {
	b, err := tn.pool.LookupBucket("cluster:ckpt")
	if err != nil {
		return false
	}
	_, err = b.Stat(blobName(i))
	return err == nil
}

// TestOrganizerMovesColdBlobs: n1 filled past the high watermark (15 of
// 16 quarter-MiB slots) moves its least recently used blobs to n2 until
// it is below the low one; the three blobs put first but read since
// (hot) stay. Every blob reads the same from both nodes afterwards.
func TestOrganizerMovesColdBlobs(t *testing.T) {
	ns := startNodes(t, t.TempDir(), 2, 0) // 4 MiB of RAM each
	ctx := context.Background()
	const size = 256 << 10
	blobs := fillBlobs(t, ns[0], 15, size)
	for i := range 3 { // b000..b002: the oldest puts, read since
		if got, err := ns[1].node.Get(ctx, "ckpt", blobName(i)); err != nil || !bytes.Equal(got, blobs[i]) {
			t.Fatalf("touch %s: %d bytes, %v", blobName(i), len(got), err)
		}
	}
	r, err := ns[0].node.OrganizeBlobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pass: %+v (%.1f MiB/s)", r, float64(r.MovedBytes)/(1<<20)/r.Took.Seconds())
	low := int64(DefaultLow * float64(r.Capacity))
	if r.Moved != 4 || r.MovedBytes != 4*size || r.UsedAfter >= low || r.Failed+r.NoRoom+r.Dropped != 0 {
		t.Fatalf("pass %+v: want 4 blobs moved and use below %d", r, low)
	}
	if used, _ := ns[0].node.poolUse(); used >= low {
		t.Errorf("n1 uses %d bytes after the pass, want below %d", used, low)
	}
	for i := range blobs {
		want := "n1"
		if i >= 3 && i < 7 { // the four coldest
			want = "n2"
		}
		if h := holder(t, ns[0], i); h != want || inPool(ns[0], i) != (want == "n1") || inPool(ns[1], i) != (want == "n2") {
			t.Errorf("%s: map names %s, in n1's pool %v, in n2's %v; want only on %s",
				blobName(i), h, inPool(ns[0], i), inPool(ns[1], i), want)
		}
		for _, tn := range ns {
			if got, err := tn.node.Get(ctx, "ckpt", blobName(i)); err != nil || !bytes.Equal(got, blobs[i]) {
				t.Errorf("%s get %s: %d bytes, %v", tn.node.Name(), blobName(i), len(got), err)
			}
		}
	}
	if r, err := ns[0].node.OrganizeBlobs(ctx); err != nil || r.Moved != 0 {
		t.Errorf("second pass below the watermark: %+v, %v; want nothing moved", r, err)
	}
}

// TestOrganizerDropsUnnamedCopy: a blob put again on another node leaves
// a copy on the first that the map no longer names; a pass deletes it
// instead of moving it.
func TestOrganizerDropsUnnamedCopy(t *testing.T) {
	ns := startNodes(t, t.TempDir(), 2, 0)
	ctx := context.Background()
	fillBlobs(t, ns[0], 15, 256<<10)
	again := []byte("b000, put again on n2")
	if err := ns[1].node.putLocal(ctx, "ckpt", blobName(0), again); err != nil {
		t.Fatal(err)
	}
	r, err := ns[0].node.OrganizeBlobs(ctx)
	if err != nil || r.Dropped != 1 || r.Moved != 3 {
		t.Fatalf("pass %+v, %v: want b000 dropped and 3 blobs moved", r, err)
	}
	if inPool(ns[0], 0) {
		t.Error("n1 still holds its unnamed copy of b000")
	}
	if got, err := ns[0].node.Get(ctx, "ckpt", blobName(0)); err != nil || !bytes.Equal(got, again) {
		t.Errorf("get b000: %q, %v; want n2's", got, err)
	}
}

// TestOrganizerLoop: with an interval the node moves cold blobs on its
// own (while the puts go on, maybe: then the last puts may end above
// Low, never above High).
func TestOrganizerLoop(t *testing.T) {
	ns := startNodesWith(t, t.TempDir(), 2, nodeOpts{page: testPage, ram: 64 * testPage,
		organizer: Organizer{Interval: 100 * time.Millisecond, High: 0.5, Low: 0.25}})
	fillBlobs(t, ns[0], 10, 256<<10) // 2.5 of 4 MiB
	deadline := time.Now().Add(10 * time.Second)
	for {
		used, capacity := ns[0].node.poolUse()
		if used <= capacity/2 && inPool(ns[1], 0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n1 still uses %d of %d bytes: the organizer did not run", used, capacity)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGetDuringMoves: Gets on both nodes run while n1 moves hundreds of
// blobs to n2; every one returns the blob's bytes (a reader that read
// the map before a switch and asks n1 after its delete reads the map
// again).
func TestGetDuringMoves(t *testing.T) {
	ns := startNodes(t, t.TempDir(), 2, 0)
	ctx := context.Background()
	const count = 235 // 16 KiB each: 3.67 of 4 MiB
	blobs := fillBlobs(t, ns[0], count, 16<<10)
	stop := make(chan struct{})
	var gets atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, len(ns))
	for _, tn := range ns {
		wg.Go(func() {
			for i := 0; ; i = (i + 7) % count {
				select {
				case <-stop:
					return
				default:
				}
				got, err := tn.node.Get(ctx, "ckpt", blobName(i))
				if err != nil || !bytes.Equal(got, blobs[i]) {
					errc <- fmt.Errorf("%s get %s during the moves: %d bytes (equal: %v), %v", tn.node.Name(), blobName(i), len(got), bytes.Equal(got, blobs[i]), err)
					return
				}
				gets.Add(1)
			}
		})
	}
	before := gets.Load()
	r, err := ns[0].node.OrganizeBlobs(ctx)
	during := gets.Load() - before
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if err != nil || r.Moved < 50 || r.Failed != 0 {
		t.Fatalf("pass %+v, %v: want some 60 blobs moved", r, err)
	}
	if during == 0 {
		t.Fatal("no Get ran during the pass")
	}
	t.Logf("%d gets during a pass that moved %d blobs in %v", during, r.Moved, r.Took)
}

// TestGetRacingMove: a Get reads the map (n1), n1 moves the blob to n2
// and deletes its copy, then the Get asks n1: it reads the map again and
// gets the blob from n2.
func TestGetRacingMove(t *testing.T) {
	ns := startNodes(t, t.TempDir(), 2, 0)
	ctx := context.Background()
	blobs := fillBlobs(t, ns[0], 15, 256<<10)
	var asked []string
	conn := func(ctx context.Context, name string) (*grpc.ClientConn, error) {
		if len(asked) == 0 {
			if r, err := ns[0].node.OrganizeBlobs(ctx); err != nil || r.Moved != 4 {
				t.Fatalf("pass between the Get's map read and its ask: %+v, %v", r, err)
			}
		}
		asked = append(asked, name)
		return ns[1].node.conn(ctx, name)
	}
	got, err := getBlob(ctx, ns[1].node.cli, ns[1].node.cfg, "ckpt", blobName(2), conn)
	if err != nil || !bytes.Equal(got, blobs[2]) {
		t.Fatalf("get of a blob moved under it: %d bytes, %v (asked %v)", len(got), err, asked)
	}
	if len(asked) != 2 || asked[0] != "n1" || asked[1] != "n2" {
		t.Errorf("asked %v, want n1 (the old holder) then n2", asked)
	}
}

// TestMoveComparesRevision: a move whose revision is no longer the key's
// (the blob was put again meanwhile) is refused by the target, which
// keeps neither the bytes nor the key.
func TestMoveComparesRevision(t *testing.T) {
	ns := startNodes(t, t.TempDir(), 2, 0)
	ctx := context.Background()
	fillBlobs(t, ns[0], 1, 4096)
	_, rev, err := lookupBlob(ctx, ns[0].node.cli, ns[0].node.cfg, "ckpt", blobName(0))
	if err != nil {
		t.Fatal(err)
	}
	again := []byte("put again on n1")
	if err := ns[0].node.putLocal(ctx, "ckpt", blobName(0), again); err != nil {
		t.Fatal(err)
	}
	conn, err := ns[0].node.conn(ctx, "n2")
	if err != nil {
		t.Fatal(err)
	}
	h := blobHeader{Bucket: "ckpt", Blob: blobName(0), MoveRev: rev}
	_, err = call(ctx, conn, "BlobPut", rawFrame(encodeBlob(h, []byte("stale bytes"))))
	if status.Code(err) != codes.Aborted {
		t.Fatalf("move at an old revision: %v, want Aborted", err)
	}
	if holder(t, ns[0], 0) != "n1" || inPool(ns[1], 0) {
		t.Errorf("after the refused move: map names %s, n2 holds a copy: %v", holder(t, ns[0], 0), inPool(ns[1], 0))
	}
	if got, err := ns[1].node.Get(ctx, "ckpt", blobName(0)); err != nil || !bytes.Equal(got, again) {
		t.Errorf("get: %q, %v; want the second put's bytes", got, err)
	}
}

// TestOrganizerNoRoom: when no member has room below its high watermark,
// a full node keeps its blobs.
func TestOrganizerNoRoom(t *testing.T) {
	ns := startNodes(t, t.TempDir(), 2, 0)
	ctx := context.Background()
	fillBlobs(t, ns[1], 15, 256<<10)
	blobs := fillBlobs(t, ns[0], 15, 256<<10)     // the same names: n2's copies are no longer named
	if err := ns[1].node.register(); err != nil { // n2's record shows it full
		t.Fatal(err)
	}
	r, err := ns[0].node.OrganizeBlobs(ctx)
	if err != nil || r.Moved != 0 || r.NoRoom == 0 || r.UsedAfter != r.UsedBefore {
		t.Fatalf("pass %+v, %v: want nothing moved, no room", r, err)
	}
	for i := range blobs {
		if got, err := ns[1].node.Get(ctx, "ckpt", blobName(i)); err != nil || !bytes.Equal(got, blobs[i]) {
			t.Errorf("get %s: %d bytes, %v", blobName(i), len(got), err)
		}
	}
}
