package bufferpool

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Versions of named blobs. PutVersion(name, data) makes data version n+1
// of the blob, where n is the version of its current bytes (0 for a blob
// never versioned, or absent). The bytes it replaces are kept, without a
// copy: the blob itself is renamed to a hidden key (name, NUL, its
// version) that List, Query and the blob API never show, and a new blob
// takes the name. A bucket keeps the last KeepVersions versions of each
// blob, the current one included; PutVersion drops the oldest past that.
// Kept versions are ordinary blobs to the organizer (cold ones go down a
// tier), keep no tags (tags stay with the current blob), and are durable
// when the write that made them was.
//
// Put and PartialPut change the current version's bytes in place (its
// version number stays); Delete removes the blob and every kept version.

// DefaultKeepVersions is BucketOptions.KeepVersions when zero.
const DefaultKeepVersions = 4

// VersionInfo describes one version of a blob.
type VersionInfo struct {
	Version  uint64
	Size     int64
	Modified time.Time
	Current  bool
	Durable  bool
}

func versionKey(name string, v uint64) string { return name + "\x00" + strconv.FormatUint(v, 10) }

// PutVersion stores data as a new version of blob name and returns its
// version number. When it is durable (o.Durable, or a durable bucket) the
// store's side of it (the new bytes, the kept bytes under their
// version's key, the versions pruned) is one commit.
func (b *Bucket) PutVersion(name string, data []byte, o PutOptions) (uint64, error) {
	if err := b.checkNamed("put version", name, 0); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return 0, err
	}
	old := b.named[name]
	gen := b.lastKeptLocked(name) // numbering goes on after the kept versions
	var tags map[string]string
	var store []func(*bolt.Tx) error // the store's side, committed below
	if old != nil {
		gen = b.genLocked(old)
		// Keep the current bytes under their version's key.
		key := versionKey(name, gen)
		if prev := b.named[key]; prev != nil { // a stale one (cannot happen twice)
			b.unstoreBlobLocked(prev)
			b.removeLocked(prev)
		}
		b.p.cat.untagAll(b, old)
		tags, old.tags = old.tags, nil
		delete(b.named, name)
		old.name = key
		old.gen = gen
		b.named[key] = old
		b.keepCountLocked(key, 1)
		if b.moveStoredLocked(name, key) {
			store = append(store, b.renameStoredTx(name, key))
		}
	}
	if err := b.putLocked("put version", name, 0, data, false); err != nil {
		b.unkeepLocked(name, old, tags)
		return 0, err
	}
	bl := b.named[name]
	bl.gen = gen + 1
	for k, v := range tags {
		if bl.tags == nil {
			bl.tags = make(map[string]string, len(tags))
		}
		bl.tags[k] = v
		b.p.cat.tag(b, bl, k, v)
	}
	pruned := b.storedKeysLocked(b.pruneKeysLocked(name)...)
	if len(pruned) > 0 {
		store = append(store, b.deleteStoredTx(pruned))
	}
	if err := b.storeVersionLocked(bl, o.Durable || b.Durable(), store, pruned); err != nil {
		return 0, fmt.Errorf("put version of %q: %w", name, err)
	}
	return bl.gen, b.pruneLocked(name)
}

// storeVersionLocked commits the store's side of a PutVersion: with the
// new bytes if durable. If storing them fails, the rest is committed
// alone (the store then matches the pool, the new bytes not durable).
func (b *Bucket) storeVersionLocked(bl *blob, durable bool, store []func(*bolt.Tx) error, pruned []string) error {
	var err error
	if durable {
		if err = b.storeBlobLocked(bl, store...); err == nil {
			store = nil
		}
	}
	if cerr := b.commitLocked(store); cerr != nil {
		return cmpErr(err, cerr)
	}
	for _, k := range pruned {
		b.forgetStoredLocked(k)
	}
	return err
}

// unkeepLocked undoes the rename of a failed PutVersion.
func (b *Bucket) unkeepLocked(name string, old *blob, tags map[string]string) {
	if old == nil {
		return
	}
	key := old.name
	delete(b.named, key)
	b.keepCountLocked(key, -1)
	b.moveStoredLocked(key, name)
	old.name = name
	old.tags = tags
	b.named[name] = old
	for k, v := range tags {
		b.p.cat.tag(b, old, k, v)
	}
}

// keepCountLocked adds (d > 0) or removes key to or from the kept
// versions of its blob (a no-op for a key that is not a kept version).
func (b *Bucket) keepCountLocked(key string, d int) {
	name, vs, ok := strings.Cut(key, "\x00")
	if !ok {
		return
	}
	v, err := strconv.ParseUint(vs, 10, 64)
	if err != nil {
		return
	}
	if b.kept == nil {
		b.kept = make(map[string][]uint64)
	}
	gens := b.kept[name]
	i, found := slices.BinarySearch(gens, v)
	switch {
	case d > 0 && !found:
		b.kept[name] = slices.Insert(gens, i, v)
	case d < 0 && found:
		if gens = slices.Delete(gens, i, i+1); len(gens) == 0 {
			delete(b.kept, name)
		} else {
			b.kept[name] = gens
		}
	}
}

// lastKeptLocked is the newest kept version of name (0: none).
func (b *Bucket) lastKeptLocked(name string) uint64 {
	if gens := b.kept[name]; len(gens) > 0 {
		return gens[len(gens)-1]
	}
	return 0
}

// genLocked is the version of current blob bl: the one PutVersion gave
// it, or for bytes never versioned the one after the kept versions (1 if
// none).
func (b *Bucket) genLocked(bl *blob) uint64 {
	if bl.gen > 0 {
		return bl.gen
	}
	return b.lastKeptLocked(bl.name) + 1
}

// keptLocked returns the kept (not current) versions of name, oldest
// first.
func (b *Bucket) keptLocked(name string) []*blob {
	var out []*blob
	for _, v := range b.kept[name] {
		if bl := b.named[versionKey(name, v)]; bl != nil {
			out = append(out, bl)
		}
	}
	return out
}

// pruneKeysLocked returns the keys of the oldest kept versions past
// KeepVersions.
func (b *Bucket) pruneKeysLocked(name string) []string {
	kept := b.keptLocked(name)
	extra := min(len(kept)+1-b.Meta().KeepVersions, len(kept))
	var keys []string
	for i := 0; i < extra; i++ {
		keys = append(keys, kept[i].name)
	}
	return keys
}

// pruneLocked drops the oldest kept versions past KeepVersions, and their
// stored copies in one commit.
func (b *Bucket) pruneLocked(name string) error {
	keys := b.pruneKeysLocked(name)
	first := b.unstoreKeysLocked(keys)
	for _, k := range keys {
		first = cmpErr(first, b.removeLocked(b.named[k]))
	}
	return first
}

// deleteVersionsLocked drops every kept version of name (their stored
// copies are the caller's: deleteNamedLocked drops them with the
// current one's, in one commit).
func (b *Bucket) deleteVersionsLocked(name string) error {
	var first error
	for _, bl := range b.keptLocked(name) {
		first = cmpErr(first, b.removeLocked(bl))
	}
	return first
}

// GetVersion returns a copy of version v of blob name (0: the current).
func (b *Bucket) GetVersion(name string, v uint64) ([]byte, error) {
	if err := b.checkNamed("get version", name, 0); err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	b.mu.RLock()
	defer b.mu.RUnlock()
	bl, err := b.versionLocked(name, v)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, bl.size)
	if err := b.readLocked(bl, 0, buf); err != nil {
		return nil, err
	}
	bl.touch(now, true)
	return buf, nil
}

// versionLocked finds version v (0: current) of name. Kept versions are
// found even if the current blob is gone (its last write was not durable
// and the daemon restarted).
func (b *Bucket) versionLocked(name string, v uint64) (*blob, error) {
	if err := b.checkLocked(); err != nil {
		return nil, err
	}
	if v != 0 {
		if bl := b.named[versionKey(name, v)]; bl != nil {
			return bl, nil
		}
	}
	cur := b.named[name]
	if cur != nil && (v == 0 || v == b.genLocked(cur)) {
		return cur, nil
	}
	return nil, fmt.Errorf("version %d of %q in bucket %s: %w", v, name, b.Name(), ErrNotFound)
}

// ListVersions describes the versions of blob name kept, oldest first,
// the current one last.
func (b *Bucket) ListVersions(name string) ([]VersionInfo, error) {
	if err := b.checkNamed("list versions", name, 0); err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.checkLocked(); err != nil {
		return nil, err
	}
	all := b.keptLocked(name)
	cur := b.named[name]
	if cur != nil {
		all = append(all, cur)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("list versions of %q in bucket %s: %w", name, b.Name(), ErrNotFound)
	}
	var out []VersionInfo
	for _, bl := range all {
		v := bl.gen
		if bl == cur {
			v = b.genLocked(cur)
		}
		out = append(out, VersionInfo{Version: v, Size: bl.size, Modified: time.Unix(0, bl.mtime),
			Current: bl == cur, Durable: bl.durable})
	}
	return out, nil
}
