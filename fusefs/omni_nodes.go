package fusefs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/omni/view"
)

// The node tree under /.omni. Every node names what it shows (a dataset
// and a group, variable or view in it) and resolves it against the
// dataset's current generation at each call, so a changed source is seen
// at the next lookup, getattr or open. Everything is read-only (EROFS).

// omniBase is embedded in every node of the tree.
type omniBase struct {
	fs.Inode
	roNode
	o *omniFS
}

// keyed nodes say what they show, so a lookup reuses the child node that
// shows the same thing.
type keyed interface{ omniKey() string }

// child returns the node for name: the existing child if it shows the
// same thing, else a new node.
func (b *omniBase) child(ctx context.Context, name string, ops fs.InodeEmbedder, dir bool) *fs.Inode {
	key := ops.(keyed).omniKey()
	if ch := b.GetChild(name); ch != nil {
		if k, ok := ch.Operations().(keyed); ok && k.omniKey() == key {
			return ch
		}
	}
	mode := uint32(syscall.S_IFREG)
	if dir {
		mode = syscall.S_IFDIR
	}
	return b.NewInode(ctx, ops, fs.StableAttr{Mode: mode})
}

// entry fills the reply of a lookup from the child's own attributes.
func (b *omniBase) entry(ctx context.Context, ch *fs.Inode, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var ao fuse.AttrOut
	if g, ok := ch.Operations().(fs.NodeGetattrer); ok {
		if errno := g.Getattr(ctx, nil, &ao); errno != 0 {
			return nil, errno
		}
	}
	out.Attr = ao.Attr
	out.SetEntryTimeout(b.o.m.entryTTL)
	out.SetAttrTimeout(b.o.m.attrTTL)
	return ch, 0
}

// dirAttr fills the attributes of a view directory of a source with
// attributes st: the source's owner and times, and no permission the
// source lacks, so the kernel applies the source's permissions. A source
// directory keeps its read and search bits as they are (a directory one
// may list but not search must not be searchable here); a source file
// gives read and search where it is readable.
func dirAttr(st *unix.Stat_t, a *fuse.Attr) {
	perm := st.Mode & 0o555
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		r := st.Mode & 0o444
		perm = r | r>>2
	}
	a.Mode = syscall.S_IFDIR | perm
	a.Nlink = 2
	ownerTimes(st, a)
}

// fileAttr fills the attributes of a read-only view file of size n.
func fileAttr(st *unix.Stat_t, n int64, a *fuse.Attr) {
	a.Mode = syscall.S_IFREG | st.Mode&0o444
	a.Nlink = 1
	a.Size = uint64(n)
	a.Blocks = uint64((n + 511) / 512)
	a.Blksize = view.PageSize
	ownerTimes(st, a)
}

// datasetDirAttr is the Getattr of a directory of dataset d (a group, a
// variable, attrs/): dirAttr of d's source, which it does not open.
func datasetDirAttr(d *view.Dataset, out *fuse.AttrOut) syscall.Errno {
	st, err := d.Lstat()
	if err != nil {
		return omniErrno(err)
	}
	dirAttr(&st, &out.Attr)
	return 0
}

// ownerTimes gives a view the source's owner and times, with the
// source's mtime as its ctime too: a view changes only when the source's
// content does, while the source's own ctime also moves when the daemon
// writes it back, which made tar of a view tree fail with "file changed
// as we read it".
func ownerTimes(st *unix.Stat_t, a *fuse.Attr) {
	a.Uid, a.Gid = st.Uid, st.Gid
	a.Mtime, a.Mtimensec = uint64(st.Mtim.Sec), uint32(st.Mtim.Nsec)
	a.Ctime, a.Ctimensec = uint64(st.Mtim.Sec), uint32(st.Mtim.Nsec)
	a.Atime, a.Atimensec = uint64(st.Atim.Sec), uint32(st.Atim.Nsec)
}

// maxComponent is the longest name a path component may have (NAME_MAX).
const maxComponent = 255

func dirEntries(names []string, dirs map[string]bool) fs.DirStream {
	out := make([]fuse.DirEntry, 0, len(names))
	for _, n := range names {
		if len(n) > maxComponent {
			continue // no path component (describe and query name it)
		}
		mode := uint32(syscall.S_IFREG)
		if dirs[n] {
			mode = syscall.S_IFDIR
		}
		out = append(out, fuse.DirEntry{Name: n, Mode: mode})
	}
	return fs.NewListDirStream(out)
}

// --- /.omni ---

// omniRoot is /.omni: the assimilated datasets by name, and every file
// or directory of the mount by its path.
type omniRoot struct{ omniBase }

var (
	_ fs.NodeLookuper  = (*omniRoot)(nil)
	_ fs.NodeReaddirer = (*omniRoot)(nil)
	_ fs.NodeGetattrer = (*omniRoot)(nil)
)

func (r *omniRoot) omniKey() string { return "root" }

// lookupOMNI is the root's lookup of ".omni" (hidden: not listed).
func (n *node) lookupOMNI(ctx context.Context, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	o := n.m.omni
	r := &omniRoot{omniBase{o: o}}
	var ch *fs.Inode
	if old := n.GetChild(omniDirName); old != nil {
		if _, ok := old.Operations().(*omniRoot); ok {
			ch = old
		}
	}
	if ch == nil {
		ch = n.NewInode(ctx, r, fs.StableAttr{Mode: syscall.S_IFDIR})
	}
	var ao fuse.AttrOut
	ch.Operations().(*omniRoot).Getattr(ctx, nil, &ao)
	out.Attr = ao.Attr
	out.SetEntryTimeout(n.m.entryTTL)
	out.SetAttrTimeout(n.m.attrTTL)
	return ch, 0
}

func (r *omniRoot) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	st, err := r.o.m.fs.Lstat("")
	if err != nil {
		return toErrno(err)
	}
	dirAttr(&st, &out.Attr)
	out.Mode = syscall.S_IFDIR | 0o555
	return 0
}

func (r *omniRoot) registry() omni.Registry { return omni.Registry{Dir: r.o.opt.Registry} }

func (r *omniRoot) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	var names []string
	dirs := map[string]bool{}
	if r.o.opt.Registry != "" {
		entries, err := r.registry().List()
		if err != nil {
			return nil, omniErrno(err)
		}
		for _, e := range entries {
			names = append(names, e.Name)
			dirs[e.Name] = true
		}
	}
	return dirEntries(names, dirs), 0
}

// Lookup finds an assimilated dataset by name, else a file or directory
// of the mount.
func (r *omniRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if r.o.opt.Registry != "" && omni.ValidName(name) {
		if e, err := r.registry().Get(name); err == nil {
			d := r.o.DatasetOfRange(e.Source, e.Range())
			return r.entry(ctx, r.child(ctx, name, &omniGroup{omniBase{o: r.o}, d, "/", e.Filter}, true), out)
		}
	}
	return lookupPath(ctx, &r.omniBase, name, out)
}

// lookupPath looks up mount-relative path rel under a view directory: a
// directory store or a dataset file becomes a dataset, another directory
// a path directory.
func lookupPath(ctx context.Context, b *omniBase, rel string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	st, err := b.o.m.fs.Lstat(rel)
	if err != nil {
		return nil, toErrno(err)
	}
	name := path.Base(rel)
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR && !isStore(b.o.m.fs, rel):
		return b.entry(ctx, b.child(ctx, name, &omniPathDir{omniBase{o: b.o}, rel}, true), out)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR || (st.Mode&unix.S_IFMT == unix.S_IFREG && isDatasetFile(b.o.m.fs, rel)):
		d := b.o.DatasetAt(rel)
		return b.entry(ctx, b.child(ctx, name, &omniGroup{omniBase{o: b.o}, d, "/", ""}, true), out)
	}
	return nil, syscall.ENOENT
}

// isDatasetFile: the extension of a format, or a file a format driver
// recognises by its first bytes (omni.Recognise).
func isDatasetFile(fsys *files.FS, rel string) bool {
	if omni.HasDatasetExt(rel) {
		return true
	}
	h, _, err := fsys.Open(rel, unix.O_RDONLY, 0, files.Cred{})
	if err != nil {
		return false
	}
	defer h.Release()
	head := make([]byte, 4096)
	n, _ := h.ReadAt(head, 0)
	_, ok := omni.Recognise(omni.Probe{Path: rel, Head: head[:n]})
	return ok
}

// isStore: a directory a format driver recognises (a Zarr store).
func isStore(fsys *files.FS, rel string) bool {
	has := func(name string) bool {
		_, err := fsys.Lstat(rel + "/" + name)
		return err == nil
	}
	_, ok := omni.Recognise(omni.Probe{Path: rel, Has: has})
	return ok
}

// omniPathDir mirrors a directory of the mount under /.omni.
type omniPathDir struct {
	omniBase
	rel string
}

var (
	_ fs.NodeLookuper  = (*omniPathDir)(nil)
	_ fs.NodeReaddirer = (*omniPathDir)(nil)
	_ fs.NodeGetattrer = (*omniPathDir)(nil)
)

func (p *omniPathDir) omniKey() string { return "p:" + p.rel }

func (p *omniPathDir) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	st, err := p.o.m.fs.Lstat(p.rel)
	if err != nil {
		return toErrno(err)
	}
	dirAttr(&st, &out.Attr)
	return 0
}

func (p *omniPathDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return lookupPath(ctx, &p.omniBase, p.rel+"/"+name, out)
}

// Readdir lists subdirectories and files with a dataset extension.
func (p *omniPathDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	list, err := p.o.m.fs.ReadDir(p.rel)
	if err != nil {
		return nil, toErrno(err)
	}
	var names []string
	dirs := map[string]bool{}
	for _, e := range list {
		if e.Mode&unix.S_IFMT == unix.S_IFDIR || (e.Mode&unix.S_IFMT == unix.S_IFREG && omni.HasDatasetExt(e.Name)) {
			names = append(names, e.Name)
			dirs[e.Name] = true // datasets are directories here
		}
	}
	return dirEntries(names, dirs), 0
}

// --- datasets and groups ---

// omniGroup is a group of a dataset; the root group is the dataset's
// directory and also holds schema.json.
type omniGroup struct {
	omniBase
	d     *view.Dataset
	group string
	// filter is the dataset_filter of the job that assimilated the
	// dataset (registry entries): variables it leaves out are not shown.
	filter string
}

var (
	_ fs.NodeLookuper    = (*omniGroup)(nil)
	_ fs.NodeReaddirer   = (*omniGroup)(nil)
	_ fs.NodeGetattrer   = (*omniGroup)(nil)
	_ fs.NodeGetxattrer  = (*omniGroup)(nil)
	_ fs.NodeListxattrer = (*omniGroup)(nil)
)

const schemaName = "schema.json"

func (g *omniGroup) omniKey() string {
	return "g:" + g.d.Key() + "\x00" + g.group + "\x00" + g.filter
}

func (g *omniGroup) resolve() (*view.Generation, *omni.Group, error) {
	gen, err := g.d.Current()
	if err != nil {
		return nil, nil, err
	}
	grp, err := gen.Model().Group(g.group)
	return gen, grp, err
}

// Getattr does not open the dataset: ls -l of /.omni/dir stays cheap.
func (g *omniGroup) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return datasetDirAttr(g.d, out)
}

// hasAttrsDir: the group's attributes show as attrs/ unless a child
// already has that name.
func hasAttrsDir(grp *omni.Group) bool {
	return len(grp.Attrs) > 0 && grp.SubGroup("attrs") == nil && grp.Variable("attrs") == nil
}

func (g *omniGroup) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	_, grp, err := g.resolve()
	if err != nil {
		return nil, omniErrno(err)
	}
	var names []string
	dirs := map[string]bool{}
	if g.group == "/" {
		names = append(names, schemaName)
	}
	if hasAttrsDir(grp) {
		names = append(names, "attrs")
		dirs["attrs"] = true
	}
	for _, c := range grp.Groups {
		names = append(names, c.Name)
		dirs[c.Name] = true
	}
	for _, v := range grp.Variables {
		if !omni.MatchesFilter(v.Path, g.filter) {
			continue
		}
		names = append(names, v.Name)
		dirs[v.Name] = true
	}
	return dirEntries(names, dirs), 0
}

func (g *omniGroup) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	gen, grp, err := g.resolve()
	if err != nil {
		return nil, omniErrno(err)
	}
	switch {
	case g.group == "/" && name == schemaName:
		return g.entry(ctx, g.child(ctx, name, &omniStatic{omniBase{o: g.o}, g.d, "schema", schemaOf}, false), out)
	case name == "attrs" && hasAttrsDir(grp):
		return g.entry(ctx, g.child(ctx, name, &omniAttrs{omniBase{o: g.o}, g.d, g.group, ""}, true), out)
	}
	if c := grp.SubGroup(name); c != nil {
		return g.entry(ctx, g.child(ctx, name, &omniGroup{omniBase{o: g.o}, g.d, c.Path, g.filter}, true), out)
	}
	p, err := gen.Plan(g.group, name)
	if err != nil {
		if errorsIsInvalidView(name, err) {
			return nil, syscall.EINVAL
		}
		return nil, omniErrno(err)
	}
	if !omni.MatchesFilter(p.Variable().Path, g.filter) {
		return nil, syscall.ENOENT // left out by the job's dataset_filter
	}
	return g.entry(ctx, g.child(ctx, name, &omniVar{omniBase{o: g.o}, g.d, g.group, name}, true), out)
}

// errorsIsInvalidView: a name that tried to be a slice or filter and is
// not well formed is EINVAL; any other unknown name ENOENT.
func errorsIsInvalidView(name string, err error) bool {
	return strings.ContainsAny(name, "[@") && errors.Is(err, omni.ErrInvalid)
}

func schemaOf(gen *view.Generation) ([]byte, error) { return gen.Model().Schema() }

func (g *omniGroup) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(g.d, g.group, "", attr, dest)
}

func (g *omniGroup) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(g.d, g.group, "", dest)
}

// getxattr serves user.<name> from the attributes of group (view "") or
// of a view in it, in d's current generation.
func getxattr(d *view.Dataset, group, view, attr string, dest []byte) (uint32, syscall.Errno) {
	attrs, err := currentAttrs(d, group, view)
	if err != nil {
		return 0, omniErrno(err)
	}
	name, ok := strings.CutPrefix(attr, "user.")
	if !ok {
		return 0, syscall.ENODATA
	}
	a, ok := omni.Attr(attrs, name)
	if !ok {
		return 0, syscall.ENODATA
	}
	v := a.String()
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// listxattr lists user.<name> of every attribute getxattr serves.
func listxattr(d *view.Dataset, group, view string, dest []byte) (uint32, syscall.Errno) {
	attrs, err := currentAttrs(d, group, view)
	if err != nil {
		return 0, omniErrno(err)
	}
	var b bytes.Buffer
	for _, a := range attrs {
		b.WriteString("user." + a.Name)
		b.WriteByte(0)
	}
	if len(dest) == 0 {
		return uint32(b.Len()), 0
	}
	if len(dest) < b.Len() {
		return uint32(b.Len()), syscall.ERANGE
	}
	return uint32(copy(dest, b.Bytes())), 0
}

// --- variables ---

// omniVar is a variable, or a slice or filter of one: its data in three
// renderings, its metadata as small files.
type omniVar struct {
	omniBase
	d     *view.Dataset
	group string
	view  string
}

var (
	_ fs.NodeLookuper    = (*omniVar)(nil)
	_ fs.NodeReaddirer   = (*omniVar)(nil)
	_ fs.NodeGetattrer   = (*omniVar)(nil)
	_ fs.NodeGetxattrer  = (*omniVar)(nil)
	_ fs.NodeListxattrer = (*omniVar)(nil)
)

func (v *omniVar) omniKey() string { return "v:" + v.d.Key() + "\x00" + v.group + "\x00" + v.view }

func (v *omniVar) plan() (*view.Plan, error) {
	gen, err := v.d.Current()
	if err != nil {
		return nil, err
	}
	return gen.Plan(v.group, v.view)
}

// rawPlan is plan serving the stored values (data.raw).
func (v *omniVar) rawPlan() (*view.Plan, error) {
	gen, err := v.d.Current()
	if err != nil {
		return nil, err
	}
	return gen.RawPlan(v.group, v.view)
}

func (v *omniVar) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return datasetDirAttr(v.d, out)
}

// varFiles are the names in a variable's directory. data, data.npy and
// data.csv hold the values decoded as xarray decodes them by default
// (omni.Decoding); data.raw, listed only where that changes something,
// holds the stored values.
var varFiles = []string{"data", "data.npy", "data.csv", "data.raw", "shape", "dtype", "dims", "attrs"}

func (v *omniVar) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	p, err := v.plan()
	if err != nil {
		return nil, omniErrno(err)
	}
	names := slices.Clone(varFiles)
	names = slices.DeleteFunc(names, func(s string) bool {
		return s == "data.npy" && p.NPYHeader() == nil || s == "data.csv" && p.CSVTooBig() ||
			s == "data.raw" && p.Decoding().Identity()
	})
	return dirEntries(names, map[string]bool{"attrs": true}), 0
}

func (v *omniVar) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, err := v.plan()
	if err != nil {
		return nil, omniErrno(err)
	}
	var ops fs.InodeEmbedder
	switch name {
	case "data":
		ops = &omniData{omniBase{o: v.o}, v, dataRaw}
	case "data.raw":
		if p.Decoding().Identity() {
			return nil, syscall.ENOENT
		}
		ops = &omniData{omniBase{o: v.o}, v, dataStored}
	case "data.npy":
		if p.NPYHeader() == nil {
			return nil, syscall.ENOENT
		}
		ops = &omniData{omniBase{o: v.o}, v, dataNPY}
	case "data.csv":
		if p.CSVTooBig() {
			// Not listed either: too large to render (view.MaxCSV).
			return nil, syscall.EFBIG
		}
		ops = &omniData{omniBase{o: v.o}, v, dataCSV}
	case "shape", "dtype", "dims":
		ops = &omniStatic{omniBase{o: v.o}, v.d, v.view + "\x00" + name, v.meta(name)}
	case "attrs":
		return v.entry(ctx, v.child(ctx, name, &omniAttrs{omniBase{o: v.o}, v.d, v.group, v.view}, true), out)
	default:
		return nil, syscall.ENOENT
	}
	return v.entry(ctx, v.child(ctx, name, ops, false), out)
}

// meta renders shape, dtype or dims of the view: shape and dims as JSON
// arrays, dtype as its name, each on one line.
func (v *omniVar) meta(name string) func(*view.Generation) ([]byte, error) {
	return func(gen *view.Generation) ([]byte, error) {
		p, err := gen.Plan(v.group, v.view)
		if err != nil {
			return nil, err
		}
		var val any
		switch name {
		case "shape":
			val = append([]int64{}, p.Shape()...)
		case "dims":
			val = append([]string{}, p.Variable().Dims...)
		default:
			return []byte(string(p.DType()) + "\n"), nil
		}
		b, err := json.Marshal(val)
		return append(b, '\n'), err
	}
}

func (v *omniVar) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(v.d, v.group, v.view, attr, dest)
}

func (v *omniVar) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(v.d, v.group, v.view, dest)
}

// omniAttrs is attrs/ of a variable (view != "") or a group: one file
// per attribute.
type omniAttrs struct {
	omniBase
	d     *view.Dataset
	group string
	view  string
}

var (
	_ fs.NodeLookuper  = (*omniAttrs)(nil)
	_ fs.NodeReaddirer = (*omniAttrs)(nil)
	_ fs.NodeGetattrer = (*omniAttrs)(nil)
)

func (a *omniAttrs) omniKey() string { return "a:" + a.d.Key() + "\x00" + a.group + "\x00" + a.view }

func attrsOf(gen *view.Generation, group, view string) ([]omni.Attribute, error) {
	if view == "" {
		grp, err := gen.Model().Group(group)
		if err != nil {
			return nil, err
		}
		return grp.Attrs, nil
	}
	p, err := gen.Plan(group, view)
	if err != nil {
		return nil, err
	}
	return p.Variable().Attrs, nil
}

// currentAttrs is attrsOf in d's current generation.
func currentAttrs(d *view.Dataset, group, view string) ([]omni.Attribute, error) {
	gen, err := d.Current()
	if err != nil {
		return nil, err
	}
	return attrsOf(gen, group, view)
}

// attrFileName: attributes whose names cannot be file names are only
// xattrs.
func attrFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

func (a *omniAttrs) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return datasetDirAttr(a.d, out)
}

func (a *omniAttrs) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	attrs, err := currentAttrs(a.d, a.group, a.view)
	if err != nil {
		return nil, omniErrno(err)
	}
	var names []string
	for _, at := range attrs {
		if attrFileName(at.Name) {
			names = append(names, at.Name)
			if at.Elems > 0 {
				names = append(names, at.Name+lazyAttrExt)
			}
		}
	}
	return dirEntries(names, nil), 0
}

// lazyAttrExt names the NumPy file of an attribute whose value the
// dataset omitted (too large to hold in memory): read on demand.
const lazyAttrExt = ".npy"

// attrObject is the model path of the object whose attributes a shows.
func (a *omniAttrs) attrObject(gen *view.Generation) (string, error) {
	if a.view == "" {
		return a.group, nil
	}
	p, err := gen.Plan(a.group, a.view)
	if err != nil {
		return "", err
	}
	return p.Variable().Path, nil
}

func (a *omniAttrs) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	attrs, err := currentAttrs(a.d, a.group, a.view)
	if err != nil {
		return nil, omniErrno(err)
	}
	if base, ok := strings.CutSuffix(name, lazyAttrExt); ok {
		if at, ok := omni.Attr(attrs, base); ok && at.Elems > 0 {
			return a.entry(ctx, a.child(ctx, name, &omniAttrData{omniBase{o: a.o}, a, base}, false), out)
		}
	}
	if _, ok := omni.Attr(attrs, name); !ok || !attrFileName(name) {
		return nil, syscall.ENOENT
	}
	group, vname := a.group, a.view
	content := func(gen *view.Generation) ([]byte, error) {
		attrs, err := attrsOf(gen, group, vname)
		if err != nil {
			return nil, err
		}
		at, ok := omni.Attr(attrs, name)
		if !ok {
			return nil, syscall.ENOENT
		}
		return []byte(at.String() + "\n"), nil
	}
	st := &omniStatic{omniBase{o: a.o}, a.d, "attr\x00" + group + "\x00" + vname + "\x00" + name, content}
	return a.entry(ctx, a.child(ctx, name, st, false), out)
}

// --- files ---

// omniStatic is a small file rendered from the current generation.
type omniStatic struct {
	omniBase
	d       *view.Dataset
	id      string
	content func(*view.Generation) ([]byte, error)
}

var (
	_ fs.NodeGetattrer = (*omniStatic)(nil)
	_ fs.NodeOpener    = (*omniStatic)(nil)
	_ fs.NodeReader    = (*omniStatic)(nil)
)

func (s *omniStatic) omniKey() string { return "s:" + s.d.Key() + "\x00" + s.id }

func (s *omniStatic) render() (*view.Generation, []byte, error) {
	gen, err := s.d.Current()
	if err != nil {
		return nil, nil, err
	}
	b, err := s.content(gen)
	return gen, b, err
}

func (s *omniStatic) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*omniBytes); ok {
		fileAttr(h.gen.Stat(), int64(len(h.b)), &out.Attr)
		return 0
	}
	gen, b, err := s.render()
	if err != nil {
		return omniErrno(err)
	}
	fileAttr(gen.Stat(), int64(len(b)), &out.Attr)
	return 0
}

// omniBytes is an open file whose whole content was rendered at open.
type omniBytes struct {
	gen *view.Generation
	b   []byte
}

func (s *omniStatic) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !readOnly(flags) {
		return nil, 0, syscall.EROFS
	}
	gen, b, err := s.render()
	if err != nil {
		return nil, 0, omniErrno(err)
	}
	return &omniBytes{gen, b}, 0, 0
}

func (s *omniStatic) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return readBytes(f, dest, off)
}

// readOnly: open flags that neither write nor truncate.
func readOnly(flags uint32) bool {
	return flags&syscall.O_ACCMODE == syscall.O_RDONLY && flags&syscall.O_TRUNC == 0
}

func readBytes(f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*omniBytes)
	if !ok {
		return nil, syscall.EBADF
	}
	if off >= int64(len(h.b)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.b[off:min(int64(len(h.b)), off+int64(len(dest)))]), 0
}

// dataKind is a rendering of a variable's data.
type dataKind int

const (
	dataRaw    dataKind = iota // C order, native byte order
	dataNPY                    // NumPy 1.0 header, then the raw bytes
	dataCSV                    // omni.CSVTable, rendered by chunks of rows (view.CSVReader)
	dataStored                 // the stored values, undecoded (data.raw)
)

// plan is the plan of the view the file renders.
func (d *omniData) plan() (*view.Plan, error) {
	if d.kind == dataStored {
		return d.v.rawPlan()
	}
	return d.v.plan()
}

// omniData is data, data.npy or data.csv of a view.
type omniData struct {
	omniBase
	v    *omniVar
	kind dataKind
}

var (
	_ fs.NodeGetattrer = (*omniData)(nil)
	_ fs.NodeOpener    = (*omniData)(nil)
	_ fs.NodeReader    = (*omniData)(nil)
)

func (d *omniData) omniKey() string { return "d:" + d.v.omniKey() + "\x00" + string(rune('0'+d.kind)) }

// size is the file's size, exact for every rendering: data.csv is
// rendered once, chunk by chunk, to learn it (view.Plan.CSVSize, which
// keeps only a row index), so tar, rsync and cp copy it whole.
func (d *omniData) size(ctx context.Context, p *view.Plan) (int64, error) {
	switch d.kind {
	case dataNPY:
		return int64(len(p.NPYHeader())) + p.Size(), nil
	case dataRaw, dataStored:
		return p.Size(), nil
	}
	return p.CSVSize(asCaller(ctx))
}

func (d *omniData) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	switch h := f.(type) {
	case *omniBytes:
		fileAttr(h.gen.Stat(), int64(len(h.b)), &out.Attr)
		return 0
	case *view.CSVReader:
		fileAttr(h.Plan().Generation().Stat(), h.Size(), &out.Attr)
		return 0
	case *omniDataHandle:
		n, _ := d.size(ctx, h.p) // data or data.npy: no error
		fileAttr(h.p.Generation().Stat(), n, &out.Attr)
		return 0
	}
	p, err := d.plan()
	if err != nil {
		return omniErrno(err)
	}
	n, err := d.size(ctx, p)
	if err != nil {
		return omniErrno(err)
	}
	fileAttr(p.Generation().Stat(), n, &out.Attr)
	return 0
}

// omniDataHandle is an open data or data.npy: the plan it was opened on
// (a later change of the source fails its reads with ESTALE).
type omniDataHandle struct {
	p   *view.Plan
	hdr []byte
	c   *view.Cursor
}

func (d *omniData) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !readOnly(flags) {
		return nil, 0, syscall.EROFS
	}
	p, err := d.plan()
	if err != nil {
		return nil, 0, omniErrno(err)
	}
	switch d.kind {
	case dataCSV:
		r, err := p.CSV(asCaller(ctx))
		if err != nil {
			return nil, 0, omniErrno(err)
		}
		return r, fuse.FOPEN_DIRECT_IO, 0
	case dataNPY:
		return &omniDataHandle{p: p, hdr: p.NPYHeader(), c: view.NewCursor()}, 0, 0
	}
	return &omniDataHandle{p: p, c: view.NewCursor()}, 0, 0
}

func (d *omniData) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if r, ok := f.(*view.CSVReader); ok {
		n, err := r.ReadAt(asCaller(ctx), dest, off)
		if err != nil {
			return nil, omniErrno(err)
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
	h, ok := f.(*omniDataHandle)
	if !ok {
		return readBytes(f, dest, off)
	}
	n := 0
	if off < int64(len(h.hdr)) {
		n = copy(dest, h.hdr[off:])
	}
	roff := max(0, off-int64(len(h.hdr)))
	m, err := h.p.ReadAt(asCaller(ctx), dest[n:], roff, h.c)
	if err != nil {
		return nil, omniErrno(err)
	}
	return fuse.ReadResultData(dest[:n+m]), 0
}

// omniAttrData is attrs/<name>.npy of an attribute the dataset omitted:
// its values as NumPy, read on demand through a helper (view.AttrPlan).
type omniAttrData struct {
	omniBase
	a    *omniAttrs
	name string
}

var (
	_ fs.NodeGetattrer = (*omniAttrData)(nil)
	_ fs.NodeOpener    = (*omniAttrData)(nil)
	_ fs.NodeReader    = (*omniAttrData)(nil)
)

func (d *omniAttrData) omniKey() string { return "A:" + d.a.omniKey() + "\x00" + d.name }

func (d *omniAttrData) plan() (*view.Plan, error) {
	gen, err := d.a.d.Current()
	if err != nil {
		return nil, err
	}
	obj, err := d.a.attrObject(gen)
	if err != nil {
		return nil, err
	}
	return gen.AttrPlan(obj, d.name)
}

func (d *omniAttrData) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	p, err := d.plan()
	if h, ok := f.(*omniDataHandle); ok {
		p, err = h.p, nil
	}
	if err != nil {
		return omniErrno(err)
	}
	fileAttr(p.Generation().Stat(), int64(len(p.NPYHeader()))+p.Size(), &out.Attr)
	return 0
}

func (d *omniAttrData) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !readOnly(flags) {
		return nil, 0, syscall.EROFS
	}
	p, err := d.plan()
	if err != nil {
		return nil, 0, omniErrno(err)
	}
	if p.NPYHeader() == nil {
		return nil, 0, syscall.EIO
	}
	return &omniDataHandle{p: p, hdr: p.NPYHeader(), c: view.NewCursor()}, 0, 0
}

func (d *omniAttrData) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return (&omniData{}).Read(ctx, f, dest, off)
}
