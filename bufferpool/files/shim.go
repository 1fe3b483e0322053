package files

// PageSize is the page size of the file system's pool pages (the unit of
// stage-in and write-back, and of the shim's page table).
func (fs *FS) PageSize() int64 { return fs.ps }

// ShimMaps returns the daemon's fds of the file's shared page table and
// RAM-tier segment (see bufferpool.Bucket.PageTable), for a door that
// hands them to a client (the shim), and starts publishing the file's size
// in the table. The fds stay owned by the file's bucket.
func (h *Handle) ShimMaps() (tableFd, dataFd int, err error) {
	f := h.f
	tableFd, dataFd, err = f.bucket.PageTable()
	if err != nil {
		return -1, -1, err
	}
	f.shareSize()
	return tableFd, dataFd, nil
}

// shareSize publishes the size in the bucket's page table (a no-op until
// ShimMaps created it).
func (f *file) shareSize() { f.bucket.SetSharedSize(f.size.Load()) }
