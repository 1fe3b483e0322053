package view

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/iowarp/iowarp/formats/omni"
)

// PageSize is the page size of the views' buckets in the pool.
const PageSize = 1 << 20

const (
	// maxPlans bounds the views resolved and kept per Generation; past
	// it a view is resolved again at each use.
	maxPlans = 4096
	// maxStringElems bounds a variable-length string variable read whole.
	maxStringElems = 16 << 20
	// maxPlanMem bounds the string views' bytes a Generation keeps in
	// cached plans; past it a string view is read again at each use.
	maxPlanMem = 256 << 20
	// prefetchBlocks is how far ahead a sequential reader is read.
	prefetchBlocks = 2
)

// Plan is a resolved view (a variable and a hyperslab of it) and the
// layout of its raw C-order bytes in blocks: a block is the unit of one
// helper request and of caching. Blocks are hyperslabs contiguous in the
// output: count 1 on the axes before axis, a run of indices on axis,
// everything after it; runs follow the variable's chunks on axis, so a
// whole-variable read decompresses every chunk once. Block j occupies
// ppb pages of the Generation's bucket from base+j*ppb.
type Plan struct {
	g     *Generation
	v     *omni.Variable
	h     omni.Hyperslab
	dtype omni.DType // of the bytes served (S<n> for variable-length strings)
	// dec decodes the stored values as xarray does by default (CF
	// masking, scaling, time); Identity for a raw plan (data.raw).
	dec   omni.Decoding
	raw   bool
	shape []int64 // the selection's shape
	size  int64   // raw bytes
	hdr   []byte  // NumPy header; nil when NumPy has no dtype for it
	mem   []byte  // variable-length strings: the whole selection, fixed width

	axis                   int
	row, run               int64 // bytes per index on axis; indices per block
	lineBytes, runsPerLine int64
	nblocks, ppb, base     int64
	// stage is the staging bytes a block needs: its stored bytes, which
	// are decoded in place, may be more than its pages hold.
	stage int64

	csvOnce sync.Once
	csv     *omni.CSVTable
	csvErr  error

	csvMu sync.Mutex
	// csvIdx is the row index of data.csv once sized (nil before): a
	// generation is immutable, so it never changes.
	csvIdx *csvIndex

	failMu sync.Mutex
	// failed remembers blocks a helper could not read in this Generation,
	// so a bad chunk costs one request and one log line per RetryAfter.
	failed map[int64]failure
}

// failure is a failed block read and when it may be tried again.
type failure struct {
	err     error
	retryAt time.Time
}

// Plan resolves the view name in group (a variable, a slice or a
// coordinate filter) and returns its plan, cached per Generation. The
// plan serves the values decoded as xarray decodes them by default
// (omni.Decoding); RawPlan serves the stored values.
func (g *Generation) Plan(group, name string) (*Plan, error) { return g.plan(group, name, false) }

// RawPlan is Plan serving the stored values, undecoded (data.raw).
func (g *Generation) RawPlan(group, name string) (*Plan, error) { return g.plan(group, name, true) }

func (g *Generation) plan(group, name string, raw bool) (*Plan, error) {
	key := group + "\x00" + name
	if raw {
		key += "\x00raw"
	}
	return g.cachedPlan(key, raw, func() (*omni.Variable, omni.Hyperslab, error) {
		view, err := omni.ParseView(name)
		if err != nil {
			return nil, omni.Hyperslab{}, err
		}
		return g.ds.Resolve(group, view, g.readCoord)
	})
}

// AttrPlan is the plan of the value of attribute name of the object at
// model path obj when the dataset omitted it (too large to hold: its
// omni.Attribute has Elems): its stored values, flattened, read on demand
// like a variable's (omni.AttrVar).
func (g *Generation) AttrPlan(obj, name string) (*Plan, error) {
	return g.cachedPlan("attr\x00"+obj+"\x00"+name, true, func() (*omni.Variable, omni.Hyperslab, error) {
		v, err := g.ds.Var(omni.AttrVar(obj, omni.Attribute{Name: name}).Path)
		if err != nil {
			return nil, omni.Hyperslab{}, err
		}
		return v, omni.All(v.Shape), nil
	})
}

// cachedPlan returns the plan cached under key, else resolves and lays
// out a new one (and caches it while there is room).
func (g *Generation) cachedPlan(key string, raw bool, resolve func() (*omni.Variable, omni.Hyperslab, error)) (*Plan, error) {
	g.mu.Lock()
	p := g.plans[key]
	g.mu.Unlock()
	if p != nil {
		return p, nil
	}
	v, h, err := resolve()
	if err != nil {
		return nil, err
	}
	if err := h.Check(v.Shape); err != nil {
		return nil, err
	}
	p = &Plan{g: g, v: v, h: h, dtype: v.DType, shape: h.Count, raw: raw}
	if !raw {
		if p.dec = omni.DecodingOf(v); !p.dec.Identity() {
			p.dtype = p.dec.Out
		}
	}
	if v.DType == omni.String {
		if err := p.readStrings(); err != nil {
			return nil, err
		}
	}
	p.layout(g.d.o.opt.BlockSize)
	if p.hdr, err = omni.NPYHeader(p.dtype, p.shape); err != nil {
		p.hdr = nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.plans[key]; old != nil {
		return old, nil
	}
	p.base = g.d.nextPage.Add(p.nblocks*p.ppb) - p.nblocks*p.ppb
	if len(g.plans) < maxPlans && g.memBytes+int64(len(p.mem)) <= maxPlanMem {
		g.plans[key] = p
		g.memBytes += int64(len(p.mem))
	}
	return p, nil
}

// ReadCoord reads the raw values of a coordinate variable as the
// coordinate filters of views do (the search index keeps them).
func (g *Generation) ReadCoord(c *omni.Variable) ([]byte, error) { return g.readCoord(c) }

// readCoord reads a coordinate variable for a coordinate filter.
func (g *Generation) readCoord(c *omni.Variable) ([]byte, error) {
	if c.External {
		return nil, fmt.Errorf("coordinate %s is stored in other files: %w", c.Path, omni.ErrNotSupported)
	}
	return g.readAll(g.d.confined(), c)
}

// readStrings reads a variable-length string selection whole and keeps
// it as fixed-width strings (what NumPy and CSV want).
func (p *Plan) readStrings() error {
	if p.v.Len() > maxStringElems {
		return fmt.Errorf("%s: %d strings: %w", p.v.Path, p.v.Len(), omni.ErrNotSupported)
	}
	if p.v.External {
		return fmt.Errorf("%s: strings stored in other files: %w", p.v.Path, omni.ErrNotSupported)
	}
	raw, err := p.g.readAll(p.g.d.confined(), p.v)
	if err != nil {
		return fmt.Errorf("read %s of %s: %w", p.v.Path, p.g.d.Name(), err)
	}
	ss, err := omni.DecodeStrings(raw)
	if err != nil {
		return err
	}
	if int64(len(ss)) != p.v.Len() {
		return fmt.Errorf("%s: %d strings for %d elements: %w", p.v.Path, len(ss), p.v.Len(), omni.ErrCorrupt)
	}
	dt, fixed, err := omni.FixStrings(omni.EncodeStrings(selectStrings(ss, p.v.Shape, p.h)))
	if err != nil {
		return err
	}
	p.dtype, p.mem = dt, fixed
	return nil
}

// selectStrings picks the elements of h from ss (C order over shape).
func selectStrings(ss []string, shape []int64, h omni.Hyperslab) []string {
	n := len(shape)
	out := make([]string, 0, h.Len())
	if h.Len() == 0 {
		return out
	}
	idx := make([]int64, n)
	for {
		flat := int64(0)
		for i := range n {
			flat = flat*shape[i] + h.Start[i] + idx[i]*h.StrideAt(i)
		}
		out = append(out, ss[flat])
		i := n - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < h.Count[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}

// layout splits the selection into blocks of about target bytes.
func (p *Plan) layout(target int64) {
	es := int64(p.dtype.Size())
	n := len(p.shape)
	p.size = omni.NumElements(p.shape) * es
	if p.size == 0 || p.mem != nil {
		return
	}
	if n == 0 {
		p.axis, p.row, p.run, p.lineBytes, p.runsPerLine, p.nblocks, p.ppb = -1, es, 1, es, 1, 1, 1
		p.stage = PageSize
		return
	}
	row := make([]int64, n)
	for k, r := n-1, es; k >= 0; k-- {
		row[k] = r
		r *= p.shape[k]
	}
	maxBlock := 8 * target
	k, unit := p.blockAxis(row, maxBlock)
	run := max(unit, target/(row[k]*unit)*unit)
	run = min(run, p.shape[k])
	outer := omni.NumElements(p.shape[:k])
	p.axis, p.row, p.run = k, row[k], run
	p.lineBytes = p.shape[k] * row[k]
	p.runsPerLine = (p.shape[k] + run - 1) / run
	p.nblocks = outer * p.runsPerLine
	p.ppb = (run*row[k] + PageSize - 1) / PageSize
	p.stage = p.ppb * PageSize
	if !p.dec.Identity() {
		stored := run * row[k] / es * int64(p.dec.Raw.Size())
		p.stage = max(p.stage, (stored+PageSize-1)/PageSize*PageSize)
	}
}

// storedLen is the bytes the helper writes for a block of blen served
// bytes.
func (p *Plan) storedLen(blen int64) int64 {
	if p.dec.Identity() {
		return blen
	}
	return blen / int64(p.dtype.Size()) * int64(p.dec.Raw.Size())
}

// decode turns the stored bytes of a block of blen served bytes at the
// start of mem into served bytes, and zeroes what follows them.
func (p *Plan) decode(mem []byte, blen int64) error {
	if p.dec.Identity() {
		return nil
	}
	if err := p.dec.DecodeInPlace(mem, blen/int64(p.dtype.Size())); err != nil {
		return fmt.Errorf("decode %s: %w", p.v.Path, err)
	}
	clear(mem[blen:])
	return nil
}

// blockAxis picks the outermost axis where a chunk-aligned run fits in
// maxBlock; else the outermost where one index does (unit 1).
func (p *Plan) blockAxis(row []int64, maxBlock int64) (axis int, unit int64) {
	for k := range row {
		unit = 1
		if k < len(p.v.Chunks) && len(p.v.Chunks) == len(p.shape) && p.h.StrideAt(k) == 1 && p.v.Chunks[k] > 0 {
			unit = min(p.v.Chunks[k], p.shape[k])
		}
		if row[k]*unit <= maxBlock {
			return k, unit
		}
	}
	for k := range row {
		if row[k] <= maxBlock {
			return k, 1
		}
	}
	return len(row) - 1, 1
}

// block returns the hyperslab of block j, its offset in the raw data and
// its length.
func (p *Plan) block(j int64) (omni.Hyperslab, int64, int64) {
	n := len(p.shape)
	h := omni.Hyperslab{Start: make([]int64, n), Count: make([]int64, n), Stride: p.h.Strides()}
	if p.axis < 0 {
		return h, 0, p.row
	}
	l, r := j/p.runsPerLine, j%p.runsPerLine
	k := p.axis
	for i, rem := k-1, l; i >= 0; i-- {
		h.Start[i] = p.h.Start[i] + (rem%p.shape[i])*h.Stride[i]
		h.Count[i] = 1
		rem /= p.shape[i]
	}
	first := r * p.run
	h.Start[k] = p.h.Start[k] + first*h.Stride[k]
	h.Count[k] = min(p.run, p.shape[k]-first)
	for i := k + 1; i < n; i++ {
		h.Start[i], h.Count[i] = p.h.Start[i], p.shape[i]
	}
	return h, l*p.lineBytes + first*p.row, h.Count[k] * p.row
}

// blockLen is the length of block j (block's third result, without
// building its hyperslab: readAt asks it for every block it crosses).
func (p *Plan) blockLen(j int64) int64 {
	if p.axis < 0 {
		return p.row
	}
	first := j % p.runsPerLine * p.run
	return min(p.run, p.shape[p.axis]-first) * p.row
}

// blockAt returns the block holding raw offset off and the offset in it.
func (p *Plan) blockAt(off int64) (j, in int64) {
	if p.axis < 0 {
		return 0, off
	}
	l, rem := off/p.lineBytes, off%p.lineBytes
	r := rem / (p.run * p.row)
	return l*p.runsPerLine + r, rem - r*p.run*p.row
}

// Cursor is the read position of one open data file: reads that follow
// it start the prefetch of the next blocks.
type Cursor struct{ last atomic.Int64 }

func NewCursor() *Cursor {
	c := &Cursor{}
	c.last.Store(-1)
	return c
}

// ReadAt reads raw bytes of the selection at off, fetching missing
// blocks through a helper.
func (p *Plan) ReadAt(ctx context.Context, dst []byte, off int64, c *Cursor) (int, error) {
	if off >= p.size {
		return 0, nil
	}
	dst = dst[:min(int64(len(dst)), p.size-off)]
	if p.mem != nil {
		return copy(dst, p.mem[off:]), nil
	}
	n := 0
	for n < len(dst) {
		j, in := p.blockAt(off + int64(n))
		m := int(min(int64(len(dst)-n), p.blockLen(j)-in))
		if err := p.readBlock(ctx, j, in, dst[n:n+m], c); err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// readBlock reads buf at in of block j: from the pool, else by a fetch
// (shared with concurrent readers of the same block).
func (p *Plan) readBlock(ctx context.Context, j, in int64, buf []byte, c *Cursor) error {
	if p.v.External {
		return p.readPrivate(ctx, j, in, buf)
	}
	err := p.readBlockData(ctx, j, in, buf)
	if c != nil && err == nil {
		// A reader moving forward block by block: keep the helpers busy
		// on the next blocks while it consumes this one.
		if last := c.last.Swap(j); j == last+1 || j == last+2 {
			p.prefetch(j)
		}
	}
	return err
}

func (p *Plan) readBlockData(ctx context.Context, j, in int64, buf []byte) error {
	o := p.g.d.o
	if p.readPages(j, in, buf) {
		o.stats.blockHits.Add(1)
		return nil
	}
	f, owner := p.g.startFetch(p, j)
	if owner {
		p.runFetch(f, j)
	} else {
		select {
		case <-f.done:
		case <-ctx.Done():
			go func() { <-f.done; f.unref() }()
			return ctx.Err()
		}
	}
	defer f.unref()
	if f.err != nil {
		return f.err
	}
	copy(buf, f.data[in:])
	return nil
}

// readPrivate reads buf at in of block j through a helper running as the
// caller, for data stored in other files: such a read is neither cached
// nor shared, since what it may read depends on who asks.
func (p *Plan) readPrivate(ctx context.Context, j, in int64, buf []byte) error {
	g := p.g
	if err := g.Fresh(); err != nil {
		return err
	}
	actx, err := g.d.asCaller(ctx)
	if err != nil {
		return err
	}
	// The files the data are stored in may have dirty pages: the helper
	// reads them on the backing store (prepare wrote back only the
	// Dataset's own file).
	if fsys := g.d.o.opt.Files; fsys != nil && !g.d.o.ThroughMount() {
		if err := fsys.WriteBackAll(); err != nil {
			return fmt.Errorf("write back before reading %s: %w", p.v.Path, err)
		}
	}
	slab, _, blen := p.block(j)
	st, err := g.d.o.staging.get(p.stage)
	if err != nil {
		return err
	}
	defer g.d.o.staging.put(st)
	clear(st.mem[:p.stage])
	n, err := g.readTo(actx, p.v, slab, st.f)
	if err == nil && n != p.storedLen(blen) {
		err = fmt.Errorf("helper wrote %d bytes for %d: %w", n, p.storedLen(blen), omni.ErrCorrupt)
	}
	if err == nil {
		err = p.decode(st.mem[:p.stage], blen)
	}
	if err != nil {
		err = fmt.Errorf("read %s%v of %s: %w", p.v.Path, slab.Start, g.d.Name(), err)
		g.d.o.logf(err)
		return err
	}
	copy(buf, st.mem[in:blen])
	return nil
}

// readPages copies buf from the pool; false if a page is missing.
func (p *Plan) readPages(j, in int64, buf []byte) bool {
	b := p.g.bucket
	for len(buf) > 0 {
		page := p.base + j*p.ppb + in/PageSize
		poff := in % PageSize
		m := min(int64(len(buf)), PageSize-poff)
		found, err := b.ReadPage(page, poff, buf[:m], nil)
		if !found || err != nil {
			return false
		}
		buf, in = buf[m:], in+m
	}
	return true
}

// resident reports whether every page of block j is in the pool.
func (p *Plan) resident(j int64) bool {
	first := p.base + j*p.ppb
	return p.g.bucket.HasPage(first) && p.g.bucket.HasPage(first+p.ppb-1)
}

// prefetch starts reading the blocks after j that are neither resident
// nor being read, at most prefetchBlocks of them.
func (p *Plan) prefetch(j int64) {
	for k := j + 1; k <= j+prefetchBlocks && k < p.nblocks; k++ {
		if p.resident(k) {
			continue
		}
		if f, owner := p.g.startFetch(p, k); owner {
			go func() { p.runFetch(f, k); f.unref() }()
		} else {
			f.unref()
		}
	}
}

// fetch is one block being read by a helper. Readers that share it hold
// a reference; the staging memory goes back when the last lets go.
type fetch struct {
	done chan struct{}
	err  error
	data []byte
	st   *staging
	refs atomic.Int32
	o    *Engine
}

func (f *fetch) unref() {
	if f.refs.Add(-1) == 0 && f.st != nil {
		f.o.staging.put(f.st)
	}
}

// startFetch returns the fetch of block j, with a reference; owner is
// true when the caller must run it.
func (g *Generation) startFetch(p *Plan, j int64) (f *fetch, owner bool) {
	key := p.base + j*p.ppb
	g.mu.Lock()
	defer g.mu.Unlock()
	if f := g.fetching[key]; f != nil {
		f.refs.Add(1)
		return f, false
	}
	f = &fetch{done: make(chan struct{}), o: g.d.o}
	f.refs.Store(1)
	g.fetching[key] = f
	return f, true
}

// runFetch reads block j through a helper into staging memory, keeps its
// pages in the pool (clean: the pool may evict them) and wakes the
// readers waiting for it.
func (p *Plan) runFetch(f *fetch, j int64) {
	g := p.g
	var st *staging
	defer func() {
		// A bug (or a reader's answer that slipped past the checks) must
		// cost this block an EIO, never the daemon: prefetches run in
		// goroutines of their own, where a panic would take the process.
		if r := recover(); r != nil {
			f.err = p.record(j, fmt.Errorf("read %s block %d of %s: panic: %v: %w", p.v.Path, j, g.d.Name(), r, syscall.EIO))
			if st != nil && f.st == nil {
				g.d.o.staging.put(st)
			}
			f.data = nil
		}
		g.mu.Lock()
		delete(g.fetching, p.base+j*p.ppb)
		g.mu.Unlock()
		close(f.done)
	}()
	if f.err = p.failure(j); f.err != nil {
		return
	}
	if f.err = g.Fresh(); f.err != nil {
		return
	}
	slab, _, blen := p.block(j)
	st, err := g.d.o.staging.get(p.stage)
	if err != nil {
		st = nil
		f.err = err
		return
	}
	// Zeroed first: staging memory is reused, and bytes a helper did not
	// write must never be another block's (or another file's).
	clear(st.mem[:p.stage])
	n, err := g.readTo(g.d.confined(), p.v, slab, st.f)
	if err == nil && n != p.storedLen(blen) {
		err = fmt.Errorf("helper wrote %d bytes for %d: %w", n, p.storedLen(blen), omni.ErrCorrupt)
	}
	if err == nil {
		err = p.decode(st.mem[:p.stage], blen)
	}
	if err != nil {
		g.d.o.staging.put(st)
		st = nil
		f.err = p.fail(j, err)
		return
	}
	g.d.o.stats.blockReads.Add(1)
	first := p.base + j*p.ppb
	for i := range p.ppb {
		// A full pool or a superseded bucket only costs the cache.
		g.bucket.PutPage(first+i, st.mem[i*PageSize:(i+1)*PageSize], false)
	}
	f.st, f.data = st, st.mem[:blen]
}

func (p *Plan) failure(j int64) error {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	f, ok := p.failed[j]
	if !ok || time.Now().After(f.retryAt) {
		return nil
	}
	return f.err
}

// fail records and logs the failure of block j.
func (p *Plan) fail(j int64, err error) error {
	slab, _, _ := p.block(j)
	return p.record(j, fmt.Errorf("read %s%v of %s: %w", p.v.Path, slab.Start, p.g.d.Name(), err))
}

// record remembers and logs err, the failure of block j, until RetryAfter.
func (p *Plan) record(j int64, err error) error {
	p.failMu.Lock()
	if p.failed == nil {
		p.failed = map[int64]failure{}
	}
	p.failed[j] = failure{err, time.Now().Add(p.g.d.o.opt.RetryAfter)}
	p.failMu.Unlock()
	p.g.d.o.logf(err)
	return err
}

// ReadAll reads the whole selection (for data.csv).
func (p *Plan) ReadAll(ctx context.Context) ([]byte, error) {
	buf := make([]byte, p.size)
	n, err := p.ReadAt(ctx, buf, 0, nil)
	return buf[:n], err
}

// Generation is the generation the plan was resolved in.
func (p *Plan) Generation() *Generation { return p.g }

// Variable is the variable the view selects from.
func (p *Plan) Variable() *omni.Variable { return p.v }

// Hyperslab is the view's selection of the variable.
func (p *Plan) Hyperslab() omni.Hyperslab { return p.h }

// DType is the type of the bytes served (S<n> for variable-length strings).
func (p *Plan) DType() omni.DType { return p.dtype }

// Shape is the selection's shape.
func (p *Plan) Shape() []int64 { return p.shape }

// Size is the selection's raw bytes (C order, native byte order).
func (p *Plan) Size() int64 { return p.size }

// NPYHeader is the NumPy 1.0 header of data.npy; nil when NumPy has no
// dtype for the view.
func (p *Plan) NPYHeader() []byte { return p.hdr }

// Raw reports a plan serving the stored values (data.raw).
func (p *Plan) Raw() bool { return p.raw }

// Decoding is how the plan decodes the stored values (Identity for a
// raw plan or a variable without CF decoding).
func (p *Plan) Decoding() omni.Decoding { return p.dec }

// Each calls fn with the selection block by block, in output order: the
// block's selection of the variable and its raw bytes (valid only during
// the call). Blocks come from the pool or are read through a helper, with
// the read-ahead of a sequential reader, so a selection of any size
// streams in bounded memory.
func (p *Plan) Each(ctx context.Context, fn func(h omni.Hyperslab, raw []byte) error) error {
	if p.size == 0 {
		return nil
	}
	if p.mem != nil {
		return fn(p.h, p.mem)
	}
	c := NewCursor()
	var buf []byte
	for j := range p.nblocks {
		slab, off, n := p.block(j)
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		if _, err := p.ReadAt(ctx, buf[:n], off, c); err != nil {
			return err
		}
		if err := fn(slab, buf[:n]); err != nil {
			return err
		}
	}
	return nil
}
