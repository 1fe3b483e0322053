package fs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/runtime"
)

// FuzzReadStat: no panic; an error returns the zero Stat; a decoded Stat
// encodes back to its bytes.
func FuzzReadStat(f *testing.F) {
	w := runtime.NewArgWriter(nil)
	WriteStat(w, Stat{Mode: 0o100644, Size: 5, Nlink: 1, UID: 1000, GID: 1000, Ino: 42, Mtime: 1e18})
	f.Add(w.Bytes())
	f.Add(w.Bytes()[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		r := runtime.NewArgReader(b)
		st := ReadStat(r)
		if err := r.Err(); err != nil {
			if st != (Stat{}) {
				t.Fatalf("error %v with a partial stat %+v", err, st)
			}
			return
		}
		if r.Done() != nil {
			return
		}
		w := runtime.NewArgWriter(nil)
		WriteStat(w, st)
		if !bytes.Equal(w.Bytes(), b) {
			t.Fatalf("stat %+v does not encode back to %x", st, b)
		}
	})
}

// fuzzFS is one file system (over a backing dir holding "f", 5 bytes)
// and one read-write open of f, shared by the inputs of a process.
var fuzzFS struct {
	once sync.Once
	pool *bufferpool.Pool
	fs   *files.FS
	h    *files.Handle
	err  error
}

// closeFuzzFiles closes what fuzzFiles opened (TestMain).
func closeFuzzFiles() {
	if fuzzFS.h != nil {
		fuzzFS.h.Release()
	}
	if fuzzFS.fs != nil {
		fuzzFS.fs.Close()
	}
	if fuzzFS.pool != nil {
		fuzzFS.pool.Close()
	}
}

func fuzzFiles(t *testing.T) (*files.FS, *files.Handle) {
	fuzzFS.once.Do(func() {
		dir, err := os.MkdirTemp("", "iowarp-fsfuzz-") // outlives the first input's t.TempDir
		if err != nil {
			fuzzFS.err = err
			return
		}
		os.WriteFile(filepath.Join(dir, "f"), []byte("hello"), 0o644)
		pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
			{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 8 << 20}}})
		if err != nil {
			fuzzFS.err = err
			return
		}
		fuzzFS.pool = pool
		fuzzFS.fs, fuzzFS.err = files.New(pool, files.Options{Mode: files.Writethrough, Backing: dir})
		if fuzzFS.err == nil {
			fuzzFS.h, _, fuzzFS.err = fuzzFS.fs.Open("f", syscall.O_RDWR, 0, files.Cred{})
		}
	})
	if fuzzFS.err != nil {
		t.Fatal(fuzzFS.err)
	}
	return fuzzFS.fs, fuzzFS.h
}

var fuzzToken = bytes.Repeat([]byte{7}, 32)

func shimOpenArgs(grant uint64, off int64) []byte {
	w := runtime.NewArgWriter(nil)
	WriteShimOpen(w, ShimOpen{Grant: grant, Ino: 3, AccMode: syscall.O_RDWR, Token: [32]byte(fuzzToken)})
	return w.I64(off).Bytes()
}

// FuzzMethods runs one method of the module with the input as its
// arguments, from a session, over a file system whose shim resolver
// grants grant 1 with fuzzToken: no panic; arguments that do not decode
// (ErrBadArgs) leave no result and never reach the resolver; the file
// never grows through pwrite.
func FuzzMethods(f *testing.F) {
	ids := map[string]uint8{}
	for i, name := range New(nil).Names() {
		ids[name] = uint8(i)
	}
	f.Add(ids[MStat], runtime.NewArgWriter(nil).String("f").Bytes(), []byte{}, uint16(0))
	f.Add(ids[MStat], runtime.NewArgWriter(nil).String("../../etc").Bytes(), []byte{}, uint16(0))
	f.Add(ids[MSync], []byte{}, []byte{}, uint16(0))
	f.Add(ids[MStats], []byte{}, []byte{}, uint16(0))
	f.Add(ids[MPread], shimOpenArgs(1, 0), []byte{}, uint16(16))
	f.Add(ids[MPread], shimOpenArgs(1, -1), []byte{}, uint16(16))
	f.Add(ids[MPread], shimOpenArgs(2, 0), []byte{}, uint16(16))
	f.Add(ids[MPwrite], shimOpenArgs(1, 1), []byte("EL"), uint16(0))
	f.Add(ids[MPwrite], shimOpenArgs(1, 1<<62), []byte("x"), uint16(0))
	f.Add(ids[MPwrite], shimOpenArgs(1, 4), []byte("past"), uint16(0))
	f.Fuzz(func(t *testing.T, method uint8, args, in []byte, outLen uint16) {
		fsys, h := fuzzFiles(t)
		resolved := false
		m := New(fsys).WithShim(func(grant, ino uint64, pid, uid, acc uint32, token []byte, write bool) (*files.Handle, error) {
			resolved = true
			if grant != 1 || !bytes.Equal(token, fuzzToken) {
				return nil, syscall.EPERM
			}
			return h, nil
		})
		task := &runtime.Task{MethodID: uint32(method) % uint32(len(m.MethodTable)), Args: args, In: in,
			Out: make([]byte, outLen), Session: runtime.NewSession(1, 100, 1000, 1000)}
		res, err := m.Run(context.Background(), task)
		if errors.Is(err, runtime.ErrBadArgs) && (res != (runtime.Result{}) || resolved) {
			t.Fatalf("undecodable arguments (%v): result %+v, resolver called %v", err, res, resolved)
		}
		if res.N > len(task.Out) {
			t.Fatalf("result of %d bytes in %d", res.N, len(task.Out))
		}
		if st, err := h.Getattr(); err != nil || st.Size != 5 {
			t.Fatalf("file size %d (%v) after a shim pwrite, want 5", st.Size, err)
		}
	})
}
