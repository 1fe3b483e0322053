package integration

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// slowFS is a slow backing store: a FUSE loopback file system, served by
// the test process over a directory, whose writes are paced to a
// bandwidth (the daemon's write-back meets it as it would a congested
// parallel file system: each write(2) waits for the FUSE server).
type slowFS struct {
	mu   sync.Mutex
	next time.Time // when the store is free again
	bps  float64
}

// pace blocks for the time n bytes take at the bandwidth.
func (s *slowFS) pace(n int) {
	s.mu.Lock()
	now := time.Now()
	if s.next.Before(now) {
		s.next = now
	}
	s.next = s.next.Add(time.Duration(float64(n) / s.bps * float64(time.Second)))
	wait := s.next.Sub(now)
	s.mu.Unlock()
	time.Sleep(wait)
}

type slowNode struct {
	fs.LoopbackNode
	slow *slowFS
}

type slowFile struct {
	*fs.LoopbackFile
	slow *slowFS
}

var (
	_ fs.NodeOpener   = (*slowNode)(nil)
	_ fs.NodeCreater  = (*slowNode)(nil)
	_ fs.FileWriter   = (*slowFile)(nil)
	_ fs.FileReleaser = (*slowFile)(nil)
)

func (f *slowFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.slow.pace(len(data))
	return f.LoopbackFile.Write(ctx, data, off)
}

func (f *slowFile) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	f.slow.pace(n)
	return f.LoopbackFile.Writev(ctx, data, off)
}

// PassthroughFd refuses kernel passthrough: the writes must come here.
func (f *slowFile) PassthroughFd() (int, bool) { return -1, false }

func (n *slowNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &slowFile{fh.(*fs.LoopbackFile), n.slow}, fl, 0
}

func (n *slowNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ino, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ino, &slowFile{fh.(*fs.LoopbackFile), n.slow}, fl, 0
}

// mountSlowFS mounts a slow store over a new directory, writes paced to
// bps bytes/s, and returns its mount point; t's cleanup unmounts it.
func mountSlowFS(t *testing.T, bps float64) string {
	t.Helper()
	base := t.TempDir()
	under, mnt := filepath.Join(base, "under"), filepath.Join(base, "slow")
	for _, d := range []string{under, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(under, &st); err != nil {
		t.Fatal(err)
	}
	slow := &slowFS{bps: bps}
	root := &fs.LoopbackRoot{Path: under, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &slowNode{LoopbackNode: fs.LoopbackNode{RootData: r}, slow: slow}
	}
	rootNode := &slowNode{LoopbackNode: fs.LoopbackNode{RootData: root}, slow: slow}
	root.RootNode = rootNode
	srv, err := fs.Mount(mnt, rootNode, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMount: true, FsName: "slowfs", Name: "slowfs", AllowOther: true}})
	if err != nil {
		t.Skipf("mount the slow store: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount the slow store: %v", err)
			lazyUnmount(mnt)
		}
	})
	return mnt
}
