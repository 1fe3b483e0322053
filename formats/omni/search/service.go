package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/omni/view"
)

// Bounds of the service's work.
const (
	maxSyncLoads  = 256              // registry datasets (re)opened by one search
	maxFreshLoads = 16               // changed datasets reopened by one search
	saveEvery     = time.Second      // at most one write of the index file per this
	coordDeadline = 30 * time.Second // to read one dataset's coordinates
)

// ServiceOptions configure a Service.
type ServiceOptions struct {
	// File is where the index persists ("" = kept in memory only).
	File string
	// Registry lists the assimilated datasets (omni.Registry dir; "" = none).
	Registry string
	// Mount is the mount point the views are under ("" = none: hits name
	// their source instead of a view).
	Mount string
	Index Options
	Logf  func(format string, args ...any)
}

// IndexFile is where the daemon of mount keeps its index: next to the
// registry of assimilated datasets, one file per mount.
func IndexFile(registryDir, mount string) string {
	h := sha256.Sum256([]byte(mount))
	return filepath.Join(filepath.Dir(registryDir), "search", hex.EncodeToString(h[:8])+".json")
}

// Service keeps an Index of what a view engine opens and of the
// registry, for the daemon's control socket. OnLoad (the engine's hook)
// queues a dataset; one goroutine reads its coordinates and indexes it.
// Search first opens the assimilated datasets the index does not know
// (or that were assimilated again) and reopens changed datasets among
// its hits, so that answers follow the datasets. Safe for concurrent
// use; Close it.
type Service struct {
	opt ServiceOptions
	idx *Index

	mu sync.Mutex
	// guarded by mu:
	engine  *view.Engine
	pending map[string]job
	busy    bool
	closed  bool
	changed *sync.Cond // signalled when pending or busy change
	saved   time.Time

	wake chan struct{}
	done chan struct{}
}

type job struct {
	d *view.Dataset
	g *view.Generation
}

// NewService loads the index (a corrupt file is logged and starts an
// empty one) and starts the indexer.
func NewService(opt ServiceOptions) *Service {
	if opt.Logf == nil {
		opt.Logf = func(string, ...any) {}
	}
	idx := New(opt.Index)
	if opt.File != "" {
		Prune(filepath.Dir(opt.File), opt.File)
		var err error
		if idx, err = Load(opt.File, opt.Index); err != nil {
			opt.Logf("%v: starting an empty search index", err)
		}
	}
	s := &Service{opt: opt, idx: idx, pending: map[string]job{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.changed = sync.NewCond(&s.mu)
	go s.run()
	return s
}

// Index is the service's index.
func (s *Service) Index() *Index { return s.idx }

// SetEngine gives the engine whose datasets Search opens (the mount's,
// once it is mounted).
func (s *Service) SetEngine(e *view.Engine) {
	s.mu.Lock()
	s.engine = e
	s.mu.Unlock()
}

// OnLoad is the engine's hook (view.Options.OnLoad): it queues d.
func (s *Service) OnLoad(d *view.Dataset, g *view.Generation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.pending[d.Key()] = job{d, g}
	select { // under mu: Close closes wake under mu
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops the indexer and saves the index.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.pending = map[string]job{}
	close(s.wake)
	s.changed.Broadcast()
	s.mu.Unlock()
	<-s.done
	return s.save()
}

func (s *Service) run() {
	defer close(s.done)
	for range s.wake {
		for {
			s.mu.Lock()
			var j job
			var key string
			for key, j = range s.pending {
				break
			}
			if key == "" {
				s.busy = false
				s.changed.Broadcast()
				s.mu.Unlock()
				break
			}
			delete(s.pending, key)
			s.busy = true
			s.mu.Unlock()
			s.index(j)
		}
		s.mu.Lock()
		due := time.Since(s.saved) >= saveEvery
		s.mu.Unlock()
		if due {
			if err := s.save(); err != nil {
				s.opt.Logf("%v", err)
			}
		}
	}
}

func (s *Service) save() error {
	if s.opt.File == "" {
		return nil
	}
	s.mu.Lock()
	s.saved = time.Now()
	s.mu.Unlock()
	return s.idx.Save(s.opt.File, s.opt.Mount)
}

// index describes one dataset's generation and puts it in the index:
// once per registry name for a source outside the mount (each with its
// own view and dataset_filter), else under the engine's key.
func (s *Service) index(j job) {
	defer func() {
		if r := recover(); r != nil {
			s.opt.Logf("search index: %s: panic: %v", j.d.Name(), r)
		}
	}()
	st := j.g.Stat()
	base := Dataset{Size: st.Size, ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec), Updated: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), coordDeadline)
	defer cancel()
	Describe(&base, j.g.Model(), func(c *omni.Variable) ([]byte, error) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return j.g.ReadCoord(c)
	})
	for _, n := range s.names(j.d) {
		d := base
		d.Key, d.Name, d.Source, d.View = n.key, n.name, n.source, n.view
		if n.filter != "" {
			// The view of a dataset assimilated by a job shows only
			// what its dataset_filter keeps: so do the hits.
			d.Vars = nil
			for _, v := range base.Vars {
				if omni.MatchesFilter(v.Path, n.filter) {
					d.Vars = append(d.Vars, v)
				}
			}
		}
		s.idx.Update(d)
	}
}

// shown is how one indexed dataset is shown.
type shown struct {
	key, name, source, view, filter string
}

// names returns how a dataset is shown: for a file of the mount, its
// mount-relative path and view; for a source outside, each registry
// entry that names it ("r:" keys: its name, view and dataset_filter).
func (s *Service) names(d *view.Dataset) []shown {
	key := d.Key()
	if rel, ok := strings.CutPrefix(key, "m:"); ok {
		return []shown{{key, rel, filepath.Join(s.opt.Mount, rel), filepath.Join(s.opt.Mount, ".omni", rel), ""}}
	}
	abs := strings.TrimPrefix(key, "x:")
	var out []shown
	if s.opt.Registry != "" {
		entries, _ := omni.Registry{Dir: s.opt.Registry}.List()
		for _, e := range entries {
			if filepath.Clean(e.Source) == abs {
				v := abs
				if s.opt.Mount != "" {
					v = filepath.Join(s.opt.Mount, ".omni", e.Name)
				}
				out = append(out, shown{"r:" + e.Name, e.Name, abs, v, e.Filter})
			}
		}
	}
	if len(out) == 0 {
		out = append(out, shown{key, abs, abs, abs, ""})
	}
	return out
}

// Flush waits until every queued dataset is indexed (or ctx ends).
func (s *Service) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for (len(s.pending) > 0 || s.busy) && ctx.Err() == nil && !s.closed {
		s.changed.Wait()
	}
	return ctx.Err()
}

// Result is the answer of Search.
type Result struct {
	Hits      []Hit `json:"hits"`
	Datasets  int   `json:"datasets"`  // indexed
	Variables int   `json:"variables"` // indexed
}

// ErrNoEngine: the daemon serves no views (no mount, or views off).
var ErrNoEngine = errors.New("search: no OMNI views on this daemon")

// Search answers q over an index brought up to date: the registry's
// datasets it lacks are opened, and indexed datasets whose source changed
// are reopened (at most maxFreshLoads per search; the others at the next)
// or dropped when their source is gone.
func (s *Service) Search(ctx context.Context, q Query) (Result, error) {
	s.mu.Lock()
	e := s.engine
	s.mu.Unlock()
	if e != nil {
		s.sync(ctx, e)
		s.refresh(e)
	}
	if err := s.Flush(ctx); err != nil {
		return Result{}, fmt.Errorf("search: waiting for the indexer: %w", err)
	}
	hits := s.idx.Search(q)
	n, v := s.idx.Len()
	return Result{Hits: hits, Datasets: n, Variables: v}, nil
}

// sync opens the registry's datasets that the index lacks or holds in
// an older state than the registry records.
func (s *Service) sync(ctx context.Context, e *view.Engine) {
	if s.opt.Registry == "" {
		return
	}
	entries, err := omni.Registry{Dir: s.opt.Registry}.List()
	if err != nil {
		s.opt.Logf("search: registry: %v", err)
		return
	}
	loads := 0
	for _, en := range entries {
		if ctx.Err() != nil || loads >= maxSyncLoads {
			return
		}
		d := e.DatasetOf(en.Source)
		key := d.Key()
		if strings.HasPrefix(key, "x:") {
			key = "r:" + en.Name
		}
		got, ok := s.idx.Get(key)
		if ok && got.Size == en.Size && !got.ModTime.Before(en.ModTime) && !got.Updated.Before(en.Assimilated) {
			continue
		}
		loads++
		// A source that fails to open is logged by the engine, which
		// remembers the failure (RetryAfter).
		if g, err := d.Current(); err == nil && !s.pendingKey(d.Key()) {
			// Current did not reload (the source is unchanged; it
			// was assimilated again, or under another name).
			s.OnLoad(d, g)
		}
	}
}

func (s *Service) pendingKey(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[key]
	return ok
}

// refresh reopens the indexed datasets whose source changed since they
// were indexed, and drops those whose source is gone (one stat each: the
// file layer's for files of the mount).
func (s *Service) refresh(e *view.Engine) {
	loads := 0
	for _, key := range s.idx.Keys() {
		d := s.datasetOf(e, key)
		if d == nil {
			s.idx.Remove(key) // no longer assimilated, or a key of another version
			continue
		}
		st, err := d.Lstat()
		if err != nil {
			s.idx.Remove(key)
			continue
		}
		got, ok := s.idx.Get(key)
		if !ok || (got.Size == st.Size && got.ModTime.Equal(time.Unix(st.Mtim.Sec, st.Mtim.Nsec))) {
			continue
		}
		if loads++; loads > maxFreshLoads {
			return
		}
		if _, err := d.Current(); err != nil {
			s.idx.Remove(key) // no longer opens; the engine logged why
		}
	}
}

func (s *Service) datasetOf(e *view.Engine, key string) *view.Dataset {
	if rel, ok := strings.CutPrefix(key, "m:"); ok {
		return e.DatasetAt(rel)
	}
	if name, ok := strings.CutPrefix(key, "r:"); ok {
		en, err := omni.Registry{Dir: s.opt.Registry}.Get(name)
		if err != nil || s.opt.Registry == "" {
			return nil // no longer assimilated
		}
		return e.DatasetOf(en.Source)
	}
	if abs, ok := strings.CutPrefix(key, "x:"); ok {
		return e.DatasetOf(abs)
	}
	return nil
}
