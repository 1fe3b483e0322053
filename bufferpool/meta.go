package bufferpool

import (
	"fmt"
	"strings"
	"time"
)

// Bucket names, owners and modes.
//
// A named bucket's name is a path: components separated by '/', none
// empty, "." or "..", no NUL, no leading or trailing '/'
// ("simulation/run1/temperature"). The hierarchy is only in the names:
// "a/b" exists without "a". A first component holding ':' is reserved for
// the daemon's own buckets (file:N of bufferpool/files, omni:NAME of the
// OMNI views), which ValidBucketName refuses.
//
// Each bucket has an owner uid, a group gid and a mode, as a file does.
// The pool stores them; the door that knows who asks (the cte module, from
// the ipc connection's SO_PEERCRED) enforces them with Permits:
//
//	r (4): Get, PartialGet, List, Stat, versions, the bucket in queries
//	w (2): Put, PartialPut, Delete, tags, PutVersion
//	x (1): kept and shown, grants nothing
//
// The owner's bits apply to the owner, the group's to a caller whose
// primary gid is the bucket's group (SO_PEERCRED carries no supplementary
// groups), the others' to everyone else. Changing the mode or deleting
// the bucket is the owner's (and root's). Root (uid 0) is granted
// everything, as CAP_DAC_OVERRIDE grants it on files.

// DefaultBucketMode is the mode of a bucket created without one: read
// and write for its owner only.
const DefaultBucketMode = 0o600

// Access bits for Permits.
const (
	AccessRead  uint32 = 4
	AccessWrite uint32 = 2
)

// MaxBucketName bounds a bucket name in bytes.
const MaxBucketName = 4096

// ValidBucketName checks a bucket name a client chose (see above).
func ValidBucketName(name string) error {
	if name == "" || len(name) > MaxBucketName {
		return fmt.Errorf("bucket name %q: empty or longer than %d bytes: %w", name, MaxBucketName, ErrInvalid)
	}
	comps := strings.Split(name, "/")
	for _, c := range comps {
		switch {
		case c == "":
			return fmt.Errorf("bucket name %q: empty component (leading, trailing or double '/'): %w", name, ErrInvalid)
		case c == "." || c == "..":
			return fmt.Errorf("bucket name %q: component %q: %w", name, c, ErrInvalid)
		case strings.IndexByte(c, 0) >= 0:
			return fmt.Errorf("bucket name %q: NUL byte: %w", name, ErrInvalid)
		}
	}
	if strings.IndexByte(comps[0], ':') >= 0 {
		return fmt.Errorf("bucket name %q: a first component with ':' is reserved for the daemon's buckets: %w", name, ErrInvalid)
	}
	return nil
}

// BucketMeta is who owns a bucket and how others may use it.
type BucketMeta struct {
	Owner   uint32    `json:"owner"`
	Group   uint32    `json:"group"`
	Mode    uint32    `json:"mode"` // permission bits, 0o777 at most
	Created time.Time `json:"created"`
	// KeepVersions is how many versions of a blob PutVersion keeps,
	// the current one included.
	KeepVersions int `json:"keep_versions"`
	// Incarnation tells the bucket from earlier ones of the same name
	// (when it was made, in unix ns): the blob store keys by it, so that
	// a bucket deleted while a new one of its name is being stored never
	// takes the new one's blobs with it.
	Incarnation uint64 `json:"incarnation"`
	// Durable: every write to the bucket goes through the blob store
	// (BucketOptions.Durable, Bucket.SetDurable; durable.go).
	Durable bool `json:"durable,omitempty"`
}

// Permits reports whether uid (primary group gid) may use the bucket for
// want (AccessRead, AccessWrite or both).
func (m BucketMeta) Permits(uid, gid, want uint32) bool {
	if uid == 0 {
		return true
	}
	var bits uint32
	switch {
	case uid == m.Owner:
		bits = m.Mode >> 6
	case gid == m.Group:
		bits = m.Mode >> 3
	default:
		bits = m.Mode
	}
	return bits&7&want == want
}

// OwnedBy reports whether uid may change the mode or delete the bucket.
func (m BucketMeta) OwnedBy(uid uint32) bool { return uid == 0 || uid == m.Owner }

// Meta returns the bucket's owner, group and mode.
func (b *Bucket) Meta() BucketMeta { return *b.meta.Load() }

// Stored reports whether the durable store holds the bucket (durable.go).
func (b *Bucket) Stored() bool { return b.storedFlag.Load() }

// Durable reports whether every write to the bucket is durable
// (BucketOptions.Durable, SetDurable).
func (b *Bucket) Durable() bool { return b.meta.Load().Durable }

// Chmod sets the bucket's permission bits.
func (b *Bucket) Chmod(mode uint32) error {
	if mode&^0o777 != 0 {
		return fmt.Errorf("chmod bucket %s: mode %#o: %w", b.Name(), mode, ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return err
	}
	m := b.Meta()
	m.Mode = mode
	b.meta.Store(&m)
	return b.storeMetaLocked()
}

// Chown sets the bucket's owner and group (callers allow it to root only).
func (b *Bucket) Chown(uid, gid uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return err
	}
	m := b.Meta()
	m.Owner, m.Group = uid, gid
	b.meta.Store(&m)
	return b.storeMetaLocked()
}

// metaOf is the meta of a new bucket made with opts.
func metaOf(opts BucketOptions, now time.Time) BucketMeta {
	m := BucketMeta{Owner: opts.Owner, Group: opts.Group, Mode: opts.Mode & 0o777, Created: now,
		KeepVersions: opts.KeepVersions, Incarnation: uint64(now.UnixNano()), Durable: opts.Durable}
	if opts.Mode == 0 {
		m.Mode = DefaultBucketMode
	}
	if m.KeepVersions <= 0 {
		m.KeepVersions = DefaultKeepVersions
	}
	return m
}
