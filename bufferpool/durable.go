package bufferpool

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

// Durable named blobs and buckets. A Put with PutOptions.Durable writes
// the blob into the pool as any Put does, then copies it into the blob
// store, a bbolt database (StoreFile) in the first file tier's directory,
// and returns once that transaction is committed and fsynced. A pool
// opened on the same directory after a crash, kill -9 included, finds the
// store at New and puts every stored blob back into its bucket (owner,
// group, mode, tags, versions), each checked against the CRC-32C recorded
// with it, so that a recovered blob is the durable write bit for bit or
// is reported and skipped, never half old.
//
// In a plain bucket a blob survives a restart when its last write was
// durable: a later non-durable Put, PartialPut or Delete of it removes its
// stored copy in the same call (a restart never brings back bytes that
// were overwritten), and deleting the bucket removes the bucket from the
// store. Tags and the mode of a stored blob or bucket are written
// through. Close leaves the store as it is: the next pool recovers it.
//
// A durable bucket (BucketOptions.Durable at creation, or SetDurable;
// BucketMeta.Durable, kept in the store) is recorded in the store when it
// is made, before Bucket returns it, so that it comes back empty or not;
// every write to it is durable whatever its options say: Put; PartialPut,
// which copies the whole blob as it now is into the store (the simplest
// correct form: the cost of a partial put grows with its blob, see
// BenchmarkPartialPutDurable); PutVersion; SetTag and DeleteTag (written
// through); Delete; Chmod and Chown. Each returns once its commit is
// fsynced, so after kill -9 the bucket has exactly the blobs, bytes,
// versions and tags of the calls that returned, plus or minus the call
// in flight. The store's side of one call is one commit: PutVersion's
// new bytes, the kept bytes renamed to their version's key and the
// versions it prunes; Delete's blob and all its kept versions. A durable
// write whose commit fails returns the error with the pool holding the
// new bytes and the store the old ones (a restart brings back the old).
// SetDurable(true) on a bucket with blobs stores each one not stored yet
// (one commit each) before it records the bucket durable; SetDurable(false)
// makes later writes plain, leaving the copies already stored as a
// durable Put's are. A durable bucket cannot be renamed (RenameBucket
// refuses any stored bucket) and cannot be a page bucket. Its codec
// (SetCompress) is not recorded.
//
// Why bbolt and not a journal of our own: a durable put is two writes that
// must land together (the bytes and the metadata: size, checksum, tags,
// version), and deletes must never be undone by a replay. bbolt gives
// that atomically (copy-on-write B+tree, a commit is one fsync of the
// data pages then one of the meta page), needs no recovery code after
// kill -9 (the last committed meta page wins), and is already in the
// module graph of the cluster work through etcd (go.mod has bbolt
// v1.5.0, the line etcd v3.6 builds with). Its cost is a copy of each
// durable blob in the store file, counted in the file tier's capacity
// (TierStats.Stored, part of Used: a durable put that does not fit fails
// with ErrNoSpace; a restart counts what the store holds), and a commit
// per durable write (two fdatasyncs), made while the bucket is
// write-locked: durable writes to one bucket are serialised, those to
// different buckets wait on bbolt's writer lock.
//
// The store's file is flock'ed: a second pool on the same directory gets
// no store (its durable puts and durable buckets fail with ErrBusy) and
// recovers nothing.
//
// Lock order: the pool's lock (only to record a durable bucket being
// created, which nobody else can hold yet), a bucket's lock, then the
// store's transaction (bbolt's own lock); the store never calls back into
// the pool.

// StoreFile is the name of the blob store in the first file tier's
// directory.
const StoreFile = "iowarp-blobs.db"

// Top-level bbolt buckets: bucket name -> BucketMeta JSON, and a nested
// bucket per pool bucket, keyed by name and incarnation (storeKey),
// holding "d" (blob -> bytes) and "m" (blob -> storedBlob JSON).
var (
	keyBuckets = []byte("buckets")
	keyBlobs   = []byte("blobs")
	keyData    = []byte("d")
	keyMeta    = []byte("m")
)

// storedBlob is the metadata of a stored blob.
type storedBlob struct {
	Size  int64             `json:"size"`
	CRC   uint32            `json:"crc32c"`
	MTime int64             `json:"mtime"`
	Gen   uint64            `json:"gen,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
}

// StoreReport says what New recovered from the blob store.
type StoreReport struct {
	Path    string   `json:"path,omitempty"`
	Buckets int      `json:"buckets"`
	Blobs   int      `json:"blobs"`
	Bytes   int64    `json:"bytes"`
	Skipped int      `json:"skipped"` // bad checksum or no room in the pool
	Errors  []string `json:"errors,omitempty"`
}

// blobStore is the pool's durable store; db is nil until the first
// durable put or while another pool holds the file.
type blobStore struct {
	mu   sync.Mutex // guards db's opening
	path string     // "" without a file tier
	tier int        // the file tier it is on, whose capacity its copies take
	db   *bolt.DB
	err  error // why db could not be opened
	rep  StoreReport
}

// openStore finds the store path and, if a store exists there, opens it
// and recovers its blobs.
func (p *Pool) openStore() error {
	for _, ts := range p.tiers {
		if ts.cfg.Kind == KindFile {
			p.st.path = filepath.Join(ts.cfg.Dir, StoreFile)
			p.st.tier = ts.idx
			break
		}
	}
	if p.st.path == "" {
		return nil
	}
	if _, err := os.Stat(p.st.path); err != nil {
		return nil // created by the first durable put
	}
	db, err := p.st.open()
	if err != nil {
		// Durable puts will fail saying why; the daemon logs it now.
		p.st.rep = StoreReport{Path: p.st.path, Errors: []string{err.Error()}}
		return nil
	}
	p.st.rep = p.recoverStore(db)
	return nil
}

// open opens (creating) the store file.
func (s *blobStore) open() (*bolt.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db != nil {
		return s.db, nil
	}
	if s.path == "" {
		return nil, fmt.Errorf("durable put: no file tier to keep blobs on: %w", ErrNotSupported)
	}
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			err = fmt.Errorf("blob store %s is held by another daemon: %w", s.path, ErrBusy)
		}
		s.err = err
		return nil, fmt.Errorf("open blob store: %w", err)
	}
	s.db, s.err = db, nil
	return db, nil
}

// cur returns the open db or nil.
func (s *blobStore) cur() *bolt.DB {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db
}

func (s *blobStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// StoreReport returns what New recovered from the blob store.
func (p *Pool) StoreReport() StoreReport {
	r := p.st.rep
	if r.Path == "" {
		r.Path = p.st.path
	}
	return r
}

// storeKey names the nested bbolt bucket of a pool bucket's blobs.
func storeKey(name string, inc uint64) string { return name + "\x00" + strconv.FormatUint(inc, 16) }

func (b *Bucket) storeKey() string { return storeKey(b.Name(), b.Meta().Incarnation) }

// blobsOf returns the data and meta buckets of the nested bucket key
// (storeKey) in tx, creating them if create.
func blobsOf(tx *bolt.Tx, key string, create bool) (data, meta *bolt.Bucket, err error) {
	top := tx.Bucket(keyBlobs)
	if top == nil {
		if !create {
			return nil, nil, nil
		}
		if top, err = tx.CreateBucket(keyBlobs); err != nil {
			return nil, nil, err
		}
	}
	nb := top.Bucket([]byte(key))
	if nb == nil {
		if !create {
			return nil, nil, nil
		}
		if nb, err = top.CreateBucket([]byte(key)); err != nil {
			return nil, nil, err
		}
	}
	if !create {
		if data, meta = nb.Bucket(keyData), nb.Bucket(keyMeta); data == nil || meta == nil {
			return nil, nil, nil
		}
		return data, meta, nil
	}
	if data, err = nb.CreateBucketIfNotExists(keyData); err != nil {
		return nil, nil, err
	}
	meta, err = nb.CreateBucketIfNotExists(keyMeta)
	return data, meta, err
}

// putMetaTx records the bucket's meta, unless a later incarnation of its
// name is recorded (this one is being deleted: its blobs go with it).
func (b *Bucket) putMetaTx(tx *bolt.Tx) error {
	top, err := tx.CreateBucketIfNotExists(keyBuckets)
	if err != nil {
		return err
	}
	m := b.meta.Load()
	if old := top.Get([]byte(b.Name())); old != nil {
		var om BucketMeta
		if json.Unmarshal(old, &om) == nil && om.Incarnation > m.Incarnation {
			return nil
		}
	}
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return top.Put([]byte(b.Name()), js)
}

func (bl *blob) stored(crc uint32) storedBlob {
	return storedBlob{Size: bl.size, CRC: crc, MTime: bl.mtime, Gen: bl.gen, Tags: bl.tags}
}

// storeBlobLocked copies bl's bytes into the store and commits (fsync).
// The also functions run in the same transaction (PutVersion's rename of
// the bytes it keeps and its pruning: one commit, so that a crash leaves
// the store before the call or after it, never between).
func (b *Bucket) storeBlobLocked(bl *blob, also ...func(*bolt.Tx) error) error {
	db, err := b.p.st.open()
	if err != nil {
		return err
	}
	buf := make([]byte, bl.size)
	if err := b.readLocked(bl, 0, buf); err != nil {
		return err
	}
	js, err := json.Marshal(bl.stored(crc32.Checksum(buf, tier.Castagnoli)))
	if err != nil {
		return err
	}
	// The copy costs its size rounded up on the store's tier.
	n := roundUp(bl.size)
	grow, shrink := max(n-b.stored[bl.name], 0), max(b.stored[bl.name]-n, 0)
	if !b.p.st.reserve(b.p, grow) {
		return fmt.Errorf("durable put %q of bucket %s: %d bytes in the blob store: %w", bl.name, b.Name(), n, ErrNoSpace)
	}
	key := []byte(bl.name)
	err = db.Update(func(tx *bolt.Tx) error {
		if err := b.putMetaTx(tx); err != nil {
			return err
		}
		for _, f := range also {
			if err := f(tx); err != nil {
				return err
			}
		}
		data, meta, err := blobsOf(tx, b.storeKey(), true)
		if err != nil {
			return err
		}
		if err := data.Put(key, buf); err != nil {
			return err
		}
		return meta.Put(key, js)
	})
	if err != nil {
		b.p.st.release(b.p, grow)
		return fmt.Errorf("durable put %q of bucket %s: %w", bl.name, b.Name(), err)
	}
	b.p.st.release(b.p, shrink)
	b.storedFlag.Store(true)
	bl.durable = true
	if b.stored == nil {
		b.stored = make(map[string]int64)
	}
	b.stored[bl.name] = n
	return nil
}

// unstoreBlobLocked removes the stored copy of bl's name, if there is one.
func (b *Bucket) unstoreBlobLocked(bl *blob) error {
	if err := b.unstoreKeysLocked([]string{bl.name}); err != nil {
		return err
	}
	bl.durable = false
	return nil
}

// storedKeysLocked returns those of keys with a copy in the store.
func (b *Bucket) storedKeysLocked(keys ...string) []string {
	var out []string
	for _, k := range keys {
		if _, ok := b.stored[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// unstoreKeysLocked removes the stored copies of keys (blob names, kept
// versions' keys) in one commit; a key without one is skipped, and
// nothing at all is committed if none has one.
func (b *Bucket) unstoreKeysLocked(keys []string) error {
	keys = b.storedKeysLocked(keys...)
	db := b.p.st.cur()
	if len(keys) == 0 || db == nil {
		return nil
	}
	if err := db.Update(b.deleteStoredTx(keys)); err != nil {
		return fmt.Errorf("remove %q of bucket %s from the blob store: %w", keys, b.Name(), err)
	}
	for _, k := range keys {
		b.forgetStoredLocked(k)
	}
	return nil
}

// deleteStoredTx deletes keys from the bucket's stored blobs.
func (b *Bucket) deleteStoredTx(keys []string) func(*bolt.Tx) error {
	sk := b.storeKey()
	return func(tx *bolt.Tx) error {
		data, meta, err := blobsOf(tx, sk, false)
		if err != nil || data == nil {
			return err
		}
		for _, k := range keys {
			if err := data.Delete([]byte(k)); err != nil {
				return err
			}
			if err := meta.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	}
}

// forgetStoredLocked drops key's stored copy from the accounting (the
// store no longer has it).
func (b *Bucket) forgetStoredLocked(key string) {
	n, ok := b.stored[key]
	if !ok {
		return
	}
	delete(b.stored, key)
	b.p.st.release(b.p, n)
	if bl := b.named[key]; bl != nil {
		bl.durable = false
	}
}

// moveStoredLocked moves the accounting of the stored copy of from to
// key to (a kept version, or back); renameStoredTx moves the copy. It
// reports whether there was one.
func (b *Bucket) moveStoredLocked(from, to string) bool {
	n, inStore := b.stored[from]
	if !inStore {
		return false
	}
	delete(b.stored, from)
	b.stored[to] = n
	return true
}

// renameStoredTx moves the stored copy of from to key to.
func (b *Bucket) renameStoredTx(from, to string) func(*bolt.Tx) error {
	sk := b.storeKey()
	return func(tx *bolt.Tx) error {
		data, meta, err := blobsOf(tx, sk, false)
		if err != nil || data == nil {
			return err
		}
		for _, bk := range []*bolt.Bucket{data, meta} {
			v := bk.Get([]byte(from))
			if v == nil {
				continue
			}
			if err := bk.Put([]byte(to), append([]byte(nil), v...)); err != nil {
				return err
			}
			if err := bk.Delete([]byte(from)); err != nil {
				return err
			}
		}
		return nil
	}
}

// commitLocked runs fs in one store transaction (none if fs is empty).
func (b *Bucket) commitLocked(fs []func(*bolt.Tx) error) error {
	db := b.p.st.cur()
	if len(fs) == 0 || db == nil {
		return nil
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, f := range fs {
			if err := f(tx); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordDurable records a new durable bucket (not yet visible to anyone)
// in the store.
func (b *Bucket) recordDurable() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.recordMetaLocked()
}

// recordMetaLocked writes the bucket's meta to the store, opening
// (creating) it.
func (b *Bucket) recordMetaLocked() error {
	db, err := b.p.st.open()
	if err != nil {
		return err
	}
	if err := db.Update(b.putMetaTx); err != nil {
		return fmt.Errorf("record bucket %s in the blob store: %w", b.Name(), err)
	}
	b.storedFlag.Store(true)
	return nil
}

// SetDurable makes every later write to the named bucket durable (on),
// or plain again (off: the copies stored so far stay until their blobs
// are written plainly or deleted, as a durable Put's do). Turning it on
// first stores each blob and kept version not stored yet, one commit
// each, then the bucket's meta: when it returns the whole bucket would
// come back after a restart.
func (b *Bucket) SetDurable(on bool) error {
	if b.pageSize > 0 {
		return fmt.Errorf("durable bucket %s: a page bucket: %w", b.Name(), ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return err
	}
	m := b.Meta()
	if m.Durable == on {
		return nil
	}
	if on {
		keys := slices.Sorted(maps.Keys(b.named))
		for _, k := range keys {
			if bl := b.named[k]; !bl.durable {
				if err := b.storeBlobLocked(bl); err != nil {
					return fmt.Errorf("make bucket %s durable: %w", b.Name(), err)
				}
			}
		}
	}
	m.Durable = on
	b.meta.Store(&m)
	if !on && !b.storedFlag.Load() {
		return nil
	}
	if err := b.recordMetaLocked(); err != nil {
		m.Durable = !on
		b.meta.Store(&m)
		return err
	}
	return nil
}

// storeBlobMetaLocked writes bl's tags through to the store.
func (b *Bucket) storeBlobMetaLocked(bl *blob) error {
	db := b.p.st.cur()
	if !bl.durable || db == nil {
		return nil
	}
	key := []byte(bl.name)
	return db.Update(func(tx *bolt.Tx) error {
		_, meta, err := blobsOf(tx, b.storeKey(), false)
		if err != nil || meta == nil {
			return err
		}
		var sb storedBlob
		if err := json.Unmarshal(meta.Get(key), &sb); err != nil {
			return fmt.Errorf("stored meta of %q: %w", bl.name, err)
		}
		sb.Tags = bl.tags
		js, err := json.Marshal(sb)
		if err != nil {
			return err
		}
		return meta.Put(key, js)
	})
}

// storeMetaLocked writes the bucket's meta through to the store.
func (b *Bucket) storeMetaLocked() error {
	if b.Durable() {
		return b.recordMetaLocked()
	}
	db := b.p.st.cur()
	if !b.storedFlag.Load() || db == nil {
		return nil
	}
	return db.Update(b.putMetaTx)
}

// unstoreBucketLocked removes the bucket from the store (DeleteBucket).
func (b *Bucket) unstoreBucketLocked() error {
	db := b.p.st.cur()
	if !b.storedFlag.Load() || db == nil {
		return nil
	}
	name, key, inc := []byte(b.Name()), []byte(b.storeKey()), b.Meta().Incarnation
	err := db.Update(func(tx *bolt.Tx) error {
		if top := tx.Bucket(keyBuckets); top != nil {
			var om BucketMeta
			if v := top.Get(name); v != nil && (json.Unmarshal(v, &om) != nil || om.Incarnation == inc) {
				if err := top.Delete(name); err != nil {
					return err
				}
			}
		}
		if top := tx.Bucket(keyBlobs); top != nil && top.Bucket(key) != nil {
			return top.DeleteBucket(key)
		}
		return nil
	})
	b.storedFlag.Store(false)
	if err == nil {
		for _, n := range b.stored {
			b.p.st.release(b.p, n)
		}
		b.stored = nil
	}
	return err
}

// recoverStore puts every stored bucket and blob back into the pool.
func (p *Pool) recoverStore(db *bolt.DB) StoreReport {
	rep := StoreReport{Path: p.st.path}
	note := func(format string, a ...any) {
		rep.Skipped++
		if len(rep.Errors) < maxMessages {
			rep.Errors = append(rep.Errors, fmt.Sprintf(format, a...))
		}
	}
	live := map[string]bool{}
	err := db.View(func(tx *bolt.Tx) error {
		top := tx.Bucket(keyBuckets)
		if top == nil {
			return nil
		}
		return top.ForEach(func(k, v []byte) error {
			var m BucketMeta
			if err := json.Unmarshal(v, &m); err != nil {
				note("bucket %q: meta: %v", k, err)
				return nil
			}
			b, err := p.Bucket(string(k), BucketOptions{Owner: m.Owner, Group: m.Group, Mode: m.Mode,
				KeepVersions: m.KeepVersions})
			if err != nil {
				note("bucket %q: %v", k, err)
				return nil
			}
			b.meta.Store(&m) // the mode may be 0, which BucketOptions cannot say
			b.storedFlag.Store(true)
			rep.Buckets++
			live[storeKey(string(k), m.Incarnation)] = true
			data, meta, err := blobsOf(tx, storeKey(string(k), m.Incarnation), false)
			if err != nil || data == nil {
				return err
			}
			return meta.ForEach(func(name, mv []byte) error {
				var sb storedBlob
				if err := json.Unmarshal(mv, &sb); err != nil {
					note("blob %q of %q: meta: %v", name, k, err)
					return nil
				}
				d := data.Get(name)
				if int64(len(d)) != sb.Size || crc32.Checksum(d, tier.Castagnoli) != sb.CRC {
					note("blob %q of %q: %d bytes, checksum does not match: %v", name, k, len(d), tier.ErrCorrupt)
					b.countStored(string(name), int64(len(d)))
					return nil
				}
				b.countStored(string(name), sb.Size)
				if err := b.restore(string(name), d, sb); err != nil {
					note("blob %q of %q: %v", name, k, err)
					return nil
				}
				rep.Blobs++
				rep.Bytes += sb.Size
				return nil
			})
		})
	})
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		return rep
	}
	// Blobs of buckets no record names (deleted while being stored).
	err = db.Update(func(tx *bolt.Tx) error {
		top := tx.Bucket(keyBlobs)
		if top == nil {
			return nil
		}
		var orphans [][]byte
		top.ForEachBucket(func(k []byte) error {
			if !live[string(k)] {
				orphans = append(orphans, append([]byte(nil), k...))
			}
			return nil
		})
		for _, k := range orphans {
			if err := top.DeleteBucket(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	return rep
}

// countStored records a stored blob found by recovery, put back or not
// (one recovery skipped stays in the store for a later daemon unless this
// one overwrites or deletes it), and counts it against the store's tier.
func (b *Bucket) countStored(name string, size int64) {
	n := roundUp(size)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stored == nil {
		b.stored = make(map[string]int64)
	}
	b.stored[name] = n
	b.p.st.release(b.p, -n) // already there: counted even past the capacity
}

// reserve takes n bytes of the store tier's capacity.
func (s *blobStore) reserve(p *Pool, n int64) bool {
	if n <= 0 {
		return true
	}
	ts := p.tiers[s.tier]
	if !ts.reserve(n) {
		return false
	}
	ts.stored.Add(n)
	return true
}

// release gives back n bytes of the store tier (negative: takes them
// without a check).
func (s *blobStore) release(p *Pool, n int64) {
	if n == 0 {
		return
	}
	ts := p.tiers[s.tier]
	ts.release(n)
	ts.stored.Add(-n)
}

// restore puts a recovered blob into the bucket, marked durable.
func (b *Bucket) restore(name string, data []byte, sb storedBlob) error {
	if err := b.put("restore", name, 0, data, false, putRestore); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bl := b.named[name]
	bl.mtime, bl.gen, bl.durable = sb.MTime, sb.Gen, true
	if _, v, ok := strings.Cut(name, "\x00"); ok {
		// A kept version: its key says which (the record may be from
		// when it was the current bytes).
		bl.gen, _ = strconv.ParseUint(v, 10, 64)
	}
	for k, v := range sb.Tags {
		if bl.tags == nil {
			bl.tags = make(map[string]string)
		}
		bl.tags[k] = v
		if !hiddenName(name) {
			b.p.cat.tag(b, bl, k, v)
		}
	}
	return nil
}
