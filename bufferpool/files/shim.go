package files

// PageSize is the page size of the file system's pool pages (the unit of
// stage-in and write-back, and of the shim's page table).
func (fs *FS) PageSize() int64 { return fs.ps }
