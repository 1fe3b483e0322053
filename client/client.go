// Package client is the Go client library of iowarp: it connects to the
// per-node daemon over runtime/ipc (a Unix-socket handshake, then shared
// memory rings) and exposes the Context Transfer Engine: buckets of named
// blobs with Put, Get, PartialPut, PartialGet, Delete, List, Stat, tags,
// versions, durable puts, metadata queries, and asynchronous variants
// that return a Task (its State is Running, Completed or Failed).
//
//	c, err := client.Connect(client.Options{})
//	b, err := c.Bucket("results")
//	err = b.Put("step-1", data)
//	data, err = b.Get("step-1")
//
// # Buckets
//
// A bucket name is a path ("simulation/run1/temperature": no empty
// component, no "." or "..", no leading or trailing '/'; a first
// component holding ':' is the daemon's). Bucket and BucketWith open a
// bucket, creating it owned by this process's uid and primary gid with
// BucketOptions.Mode (default 0600) and KeepVersions (default 4); an
// existing bucket keeps its own. BucketsUnder("sim/run1") lists the
// buckets named sim/run1 or below it (not sim/run10), Buckets all those
// this client may read, StatBucket the owner, group and mode, Chmod
// changes the mode (owner or root only), DeleteBucket drops a bucket
// (owner or root only).
//
// # Access
//
// The daemon checks every request against the bucket's owner, group and
// mode with the uid and gid the kernel reports for the connection
// (SO_PEERCRED): r to read (Get, PartialGet, List, Stat, GetVersion,
// ListVersions, and to see the bucket in Buckets and Query), w to write
// (Put, PartialPut, Delete, tags, PutVersion); root may do everything.
// A refusal wraps ErrPermission. A handle grants nothing by itself: a
// Chmod takes effect on the next request of every client.
//
// # Tags and queries
//
// SetTag, DeleteTag and Tags keep key/value metadata on a blob. Query
// selects blobs across the buckets this client may read by bucket prefix,
// tag equality or range (TagFilter: numbers compare numerically), size and
// modification time; the daemon answers from its tag and name indexes.
//
//	res, err := c.Query(client.Query{Prefix: "sim",
//		Tags: []client.TagFilter{{Key: "step", Range: true, Min: "10", Max: "20"}}})
//
// # Versions
//
// PutVersion stores data as version n+1 of a blob and keeps the bytes it
// replaces as version n; the bucket keeps its last KeepVersions versions
// of each blob (the current one included). GetVersion(blob, v) reads one
// (0: the current), ListVersions lists them oldest first. Put and
// PartialPut change the current version in place; Delete removes all.
//
// # Durable blobs and buckets
//
// PutWith(blob, data, PutOptions{Durable: true}) returns once the blob is
// in the daemon's blob store on its file tier and the store is synced: it
// survives kill -9 of the daemon, and a daemon restarted on the same tier
// directory serves it again, bit for bit, with its bucket's owner and
// mode, its tags and its kept versions. In a plain bucket a blob survives
// when its last write was durable: a later plain Put, PartialPut or
// Delete drops its stored copy.
//
// A durable bucket keeps all of itself: BucketWith(name,
// BucketOptions{Durable: true}) creates one (an existing bucket keeps its
// own options), Bucket(name, Durable()) or Bucket.SetDurable(true) makes
// an existing one durable (storing what it holds; the owner or root
// only). Every write to a durable bucket, plain or not (Put; PartialPut,
// which the daemon makes by storing the whole blob again, so its cost
// grows with the blob; PutVersion; SetTag, DeleteTag; Delete; Chmod),
// returns once the store has it, synced; after kill -9 and a restart the
// bucket has exactly the blobs, bytes, versions and tags of the calls
// that returned (the one in flight may or may not be there, never torn).
// StatBucket says DurableBucket. `iowarp put --durable` creates the bucket
// durable when it does not exist yet. Without a file tier a durable put
// or bucket fails with ErrInvalid; a daemon older than durable buckets
// refuses BucketOptions.Durable (runtime.ErrBadArgs) rather than create a
// plain bucket.
//
// Data crosses through the client's shared segment: Put copies the caller's
// bytes into it once, and the daemon copies them into the pool's tier once;
// Get is the same the other way. Buffers from Alloc (PutBuffer, GetBuffer)
// skip the client's copy: the one copy left is the daemon's, between the
// segment and the tier. Large copies are made in cache-sized pieces
// (copy.go), so that the second copy reads from the cache, not from DRAM.
//
// Errors wrap the sentinels below (errors.Is). If the daemon dies every
// waiting call returns an error wrapping ErrDaemonGone.
//
// A Client and its Buckets are safe for concurrent use.
package client

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/ipc"
	"github.com/iowarp/iowarp/runtime/modules/cte"
)

// Sentinel errors (aliases of the runtime's, which the wire preserves).
var (
	ErrNotFound    = runtime.ErrNoEntry
	ErrInvalid     = runtime.ErrInvalid
	ErrNoSpace     = runtime.ErrNoSpace
	ErrExist       = runtime.ErrExist
	ErrNoModule    = runtime.ErrNoModule
	ErrNoMethod    = runtime.ErrNoMethod
	ErrDaemonGone  = ipc.ErrDaemonGone
	ErrClosed      = ipc.ErrClosed
	ErrShortBuffer = runtime.ErrShortBuffer
	// ErrCorrupt: the blob's bytes failed their checksum on a slower tier
	// of the daemon (EIO); nothing of them was returned.
	ErrCorrupt = runtime.ErrCorrupt
)

// Env names the environment variables Connect reads.
const (
	EnvSocket     = "IOWARP_IPC_SOCKET"  // the ipc socket path
	EnvControlDir = "IOWARP_CONTROL_DIR" // directory of the daemon's sockets
	EnvMount      = "IOWARP_MOUNT"       // the daemon's mount point
)

// DefaultMount is the mount point whose daemon Connect finds by default.
const DefaultMount = "/iowarp"

// Options say which daemon to connect to and how.
type Options struct {
	// Socket is the ipc socket; "" derives it from ControlDir and Mount
	// (or $IOWARP_IPC_SOCKET).
	Socket string
	// ControlDir is the daemon's socket directory ("" = $IOWARP_CONTROL_DIR
	// or the per-user default).
	ControlDir string
	// Mount is the mount point the daemon serves ("" = $IOWARP_MOUNT, or
	// /iowarp, or if no daemon listens for /iowarp, the daemon without a
	// mount).
	Mount string
	// SegmentSize of the shared segment (default 64 MiB); bounds the
	// largest single transfer to a bit under half of it.
	SegmentSize int64
	// Spin before sleeping while waiting for the daemon (default: the
	// ring's; negative: never spin).
	Spin time.Duration
	// DaemonSleeps asks the daemon to sleep at once between this client's
	// requests rather than spin (see ipc.DialOptions).
	DaemonSleeps bool
}

// SocketPath resolves the socket Connect would use.
func (o Options) SocketPath() string {
	if o.Socket != "" {
		return o.Socket
	}
	if s := os.Getenv(EnvSocket); s != "" && o.ControlDir == "" && o.Mount == "" {
		return s
	}
	dir, mnt := o.ControlDir, o.Mount
	if dir == "" {
		dir = os.Getenv(EnvControlDir)
	}
	if mnt == "" {
		mnt = os.Getenv(EnvMount)
	}
	if mnt != "" {
		p := ipc.SocketPath(dir, mnt)
		if _, err := os.Lstat(p); err != nil && o.ControlDir == "" {
			if u := RootUserSocket("", mnt); u != "" {
				return u
			}
		}
		return p
	}
	// Nothing named: the daemon of /iowarp, or else a daemon without a
	// mount (config mount: ""), or else this user's socket of a root
	// daemon serving several users.
	def := ipc.SocketPath(dir, DefaultMount)
	if _, err := os.Lstat(def); err != nil {
		if alt := ipc.SocketPath(dir, ""); alt != def {
			if _, err := os.Lstat(alt); err == nil {
				return alt
			}
		}
		if o.ControlDir == "" {
			for _, m := range []string{DefaultMount, ""} {
				if u := RootUserSocket("", m); u != "" {
					return u
				}
			}
		}
	}
	return def
}

// RootDir is the socket directory of a root daemon.
const RootDir = "/run/iowarp"

// RootUserSocket returns this user's socket of the root daemon serving
// mount (ipc.UserSocketPath in dir, "" = RootDir) if it exists, else "".
// A root daemon serves other users there when started with
// IOWARP_IPC_USERS (see the README).
func RootUserSocket(dir, mount string) string {
	if dir == "" {
		dir = RootDir
	}
	uid := os.Geteuid()
	if uid == 0 {
		return ""
	}
	p := ipc.UserSocketPath(dir, mount, uint32(uid))
	if _, err := os.Lstat(p); err != nil {
		return ""
	}
	return p
}

// Client is a connection to the daemon.
type Client struct {
	c *ipc.Client
}

// Connect connects to the daemon.
func Connect(o Options) (*Client, error) {
	c, err := ipc.Dial(o.SocketPath(), ipc.DialOptions{SegmentSize: o.SegmentSize, Spin: o.Spin,
		DaemonSleeps: o.DaemonSleeps})
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

// Close hangs up; the daemon closes this client's bucket handles.
func (c *Client) Close() error { return c.c.Close() }

// IPC is the underlying transport (for benchmarks and tests).
func (c *Client) IPC() *ipc.Client { return c.c }

// Buffer is memory in the shared segment (see Alloc).
type Buffer = ipc.Buffer

// Alloc returns a buffer in the shared segment; data written there is
// sent without a copy by PutBuffer, and GetBuffer reads into it. Free it.
func (c *Client) Alloc(n int) (*Buffer, error) { return c.c.Alloc(n) }

// call is one request being prepared: arguments, input and output share
// one allocation in the segment.
type call struct {
	c    *Client
	m    ipc.Method
	buf  *Buffer
	args ipc.Span
	in   ipc.Span
	out  ipc.Span
}

// newCall lays out args, a copy of in, and outLen bytes of output.
func (c *Client) newCall(module, method string, args []byte, in []byte, outLen int) (*call, error) {
	m, err := c.c.Resolve(module, method)
	if err != nil {
		return nil, err
	}
	a := align(len(args))
	i := align(len(in))
	total := a + i + outLen
	k := &call{c: c, m: m}
	if total == 0 {
		return k, nil
	}
	// Not zeroed: args and in are overwritten here, and the daemon
	// writes the output (only its first N bytes are ever read).
	buf, err := c.c.AllocUninit(total)
	if err != nil {
		return nil, err
	}
	k.buf = buf
	b := buf.Bytes()
	copy(b, args)
	copyCached(b[a:], in)
	k.args = spanOf(buf, 0, len(args))
	k.in = spanOf(buf, a, len(in))
	k.out = spanOf(buf, a+i, outLen)
	return k, nil
}

func align(n int) int { return (n + 63) &^ 63 }

func spanOf(b *Buffer, off, n int) ipc.Span {
	if n == 0 {
		return ipc.Span{}
	}
	return b.Slice(off, n)
}

// do runs the call and frees its buffer after fn looked at the output.
func (k *call) do(fn func(res runtime.Result, out []byte) error) error {
	defer k.buf.Free()
	res, err := k.c.c.Do(k.m, k.args, k.in, k.out)
	if err != nil {
		return err
	}
	if fn == nil {
		return nil
	}
	return fn(res, k.out.Bytes()[:res.N])
}

// Call runs any module method with copies of args and in, and an output
// buffer of outLen bytes, and returns the result and the output.
func (c *Client) Call(module, method string, args, in []byte, outLen int) (runtime.Result, []byte, error) {
	k, err := c.newCall(module, method, args, in, outLen)
	if err != nil {
		return runtime.Result{}, nil, err
	}
	var res runtime.Result
	var out []byte
	err = k.do(func(r runtime.Result, o []byte) error {
		res, out = r, append([]byte(nil), o...)
		return nil
	})
	return res, out, err
}

// Noop calls admin.noop: one empty round trip.
func (c *Client) Noop() error {
	k, err := c.newCall(runtime.AdminModule, "noop", nil, nil, 0)
	if err != nil {
		return err
	}
	return k.do(nil)
}

// Status returns the daemon's admin.status as a JSON-decoded object.
func (c *Client) Status() (*runtime.Status, error) {
	_, out, err := c.Call(runtime.AdminModule, "status", nil, nil, 1<<20)
	if err != nil {
		return nil, err
	}
	var st runtime.Status
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	return &st, nil
}

// Stop asks the daemon to drain and exit (admin.stop); it returns once
// the daemon accepted the request, not when it is gone.
func (c *Client) Stop() error {
	_, _, err := c.Call(runtime.AdminModule, "stop", nil, nil, 4096)
	return err
}

// Modules lists the daemon's modules and their methods.
func (c *Client) Modules() ([]runtime.ModuleInfo, error) { return c.c.Modules() }

// Buckets lists the daemon's buckets.
func (c *Client) Buckets() ([]string, error) {
	_, out, err := c.Call(cte.Name, cte.MBuckets, nil, nil, 1<<20)
	if err != nil {
		return nil, err
	}
	return decodeBuckets(out)
}

// decodeBuckets decodes the reply of cte.buckets.
func decodeBuckets(b []byte) ([]string, error) {
	r := runtime.NewArgReader(b)
	n := r.U32()
	names := make([]string, 0, min(n, 1<<16))
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		names = append(names, r.String(cte.MaxName))
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return names, nil
}

// DeleteBucket drops a bucket and its blobs.
func (c *Client) DeleteBucket(name string) error {
	_, _, err := c.Call(cte.Name, cte.MDeleteBucket, runtime.NewArgWriter(nil).String(name).Bytes(), nil, 4096)
	return err
}
