package abi

// Field is one field of a record as C declares it.
type Field struct {
	Name  string // C field name
	CType string // a key of CTypeSize
	Len   int    // array length; 0 = scalar
	Off   int
	Doc   string
}

// Size is the field's size in bytes.
func (f Field) Size() int {
	if f.Len > 0 {
		return f.Len * CTypeSize[f.CType]
	}
	return CTypeSize[f.CType]
}

// Record is a struct shared with C. Bytes not covered by a field are
// padding (the generator names it).
type Record struct {
	Name      string // C struct name
	Prefix    string // of the offset macros: Prefix_OFF_FIELD
	SizeMacro string
	Size      int
	Doc       string
	Fields    []Field
}

// Const is a #define of abi.h.
type Const struct {
	Name   string
	Value  uint64
	Hex    bool
	Suffix string // C integer suffix: "", "u", "ul"
	Doc    string
}

// CTypeSize is the size of the C types the records use.
var CTypeSize = map[string]int{
	"uint8_t": 1, "char": 1, "int32_t": 4, "uint32_t": 4, "int64_t": 8, "uint64_t": 8,
}

// Records are the layouts of abi.h, in order.
var Records = []Record{
	{
		Name: "iow_cap", Prefix: "IOW_CAP", SizeMacro: "IOW_CAP_SIZE", Size: CapSize,
		Doc: "The capability the daemon returns for an fd on the mount (IOW_IOC_CAP).",
		Fields: []Field{
			{"magic", "uint32_t", 0, CapOffMagic, "IOW_CAP_MAGIC"},
			{"version", "uint32_t", 0, CapOffVersion, "IOW_CAP_VERSION"},
			{"ino", "uint64_t", 0, CapOffIno, "inode number on the mount"},
			{"page_size", "uint64_t", 0, CapOffPageSize, "pool page size"},
			{"pid", "uint32_t", 0, CapOffPid, "the process (tgid) the token is bound to"},
			{"uid", "uint32_t", 0, CapOffUid, "the uid it is bound to"},
			{"accmode", "uint32_t", 0, CapOffAccMode, "O_RDONLY / O_WRONLY / O_RDWR of the open"},
			{"flags", "uint32_t", 0, CapOffFlags, "none defined: 0"},
			{"token", "uint8_t", CapTokenLen, CapOffToken, "HMAC-SHA256(daemon secret, ino|pid|uid|accmode)"},
			{"endpoint", "char", CapEndpointLen, CapOffEndpoint, "grant socket (abstract, \"@name\"); \"\" = none"},
			{"daemon_pid", "uint32_t", 0, CapOffDaemonPid, ""},
			{"data_fd", "int32_t", 0, CapOffDataFd, "unused since version 2 (-1)"},
			{"table_fd", "int32_t", 0, CapOffTableFd, "unused since version 2 (-1)"},
			{"grant", "uint64_t", 0, CapOffGrant, "this open's grant at the endpoint; 0 = none"},
		},
	},
	{
		Name: "iow_grant_req", Prefix: "IOW_GRANT_REQ", SizeMacro: "IOW_GRANT_REQ_SIZE", Size: GrantReqSize,
		Doc: "A request on the grant socket: the maps of the open the capability names.",
		Fields: []Field{
			{"magic", "uint32_t", 0, GrantOffMagic, "IOW_GRANT_MAGIC"},
			{"version", "uint32_t", 0, GrantOffVersion, "IOW_GRANT_VERSION"},
			{"grant", "uint64_t", 0, GrantOffGrant, "iow_cap.grant"},
			{"ino", "uint64_t", 0, GrantOffIno, "iow_cap.ino"},
			{"accmode", "uint32_t", 0, GrantOffAccMode, "the open's access mode"},
			{"reserved", "uint32_t", 0, GrantOffReserved, "0"},
			{"token", "uint8_t", CapTokenLen, GrantOffToken, "iow_cap.token"},
		},
	},
	{
		Name: "iow_grant_reply", Prefix: "IOW_GRANT_REPLY", SizeMacro: "IOW_GRANT_REPLY_SIZE", Size: GrantReplySize,
		Doc: "The head of a grant reply; the ipc socket's path follows (NUL-terminated).",
		Fields: []Field{
			{"status", "int32_t", 0, GrantReplyOffStatus, "0 = granted (fds: page table, segment), else an errno"},
			{"pad", "uint32_t", 0, GrantReplyOffPad, "0"},
		},
	},
	{
		Name: "iow_pt_header", Prefix: "IOW_PT", SizeMacro: "IOW_PT_HEADER", Size: PTHeader,
		Doc: "The header of a page table; the resident and dirty bitmaps follow.",
		Fields: []Field{
			{"magic", "uint32_t", 0, PTOffMagic, "IOW_PT_MAGIC"},
			{"version", "uint32_t", 0, PTOffVersion, "IOW_PT_VERSION"},
			{"seq", "uint64_t", 0, PTOffSeq, "seqlock: odd while the bucket is write-locked"},
			{"size", "int64_t", 0, PTOffSize, "the file's size"},
			{"page_size", "uint64_t", 0, PTOffPageSize, ""},
			{"nbits", "uint64_t", 0, PTOffNbits, "pages each bitmap covers"},
			{"flags", "uint32_t", 0, PTOffFlags, "IOW_PTF_*"},
			{"writers", "int64_t", 0, PTOffWriters, "shim writers inside a page (own cache line)"},
			{"hint", "uint64_t", 0, PTOffHint, "non-zero once a shim write set a dirty bit"},
			{"mappers", "int64_t", 0, PTOffMappers, "shims' shared maps of the file (mmap.c)"},
			{"lease", "int64_t", 0, PTOffLease, "pages shims may still create (own cache line)"},
			{"cover", "uint64_t", 0, PTOffCover, "bytes of the segment that exist"},
			{"new_from", "int64_t", 0, PTOffNewFrom, "non-resident pages at or past it are holes"},
			{"mtime", "int64_t", 0, PTOffMtime, "ns: mtime as of the last write (own cache line)"},
			{"attr_gen", "uint64_t", 0, PTOffAttrGen, "raised at every other change of what stat answers"},
		},
	},
}

// Consts are the other #defines of abi.h, in order.
var Consts = []Const{
	{"IOW_CAP_MAGIC", CapMagic, true, "u", `"IOWC"`},
	{"IOW_CAP_VERSION", CapVersion, false, "u", ""},
	{"IOW_IOC_CAP", IocCap, true, "u", "_IOWR('W', 0x57, struct iow_cap)"},
	{"IOW_GRANT_MAGIC", GrantMagic, true, "u", `"IOWG"`},
	{"IOW_GRANT_VERSION", GrantVersion, false, "u", ""},
	{"IOW_GRANT_IPC_PATH_MAX", GrantIPCPathMax, false, "", "the ipc socket's path after the reply's head, NUL included"},
	{"IOW_PT_MAGIC", PTMagic, true, "u", `"IOWP"`},
	{"IOW_PT_VERSION", PTVersion, false, "u", ""},
	{"IOW_PT_MAX_PAGES", PTMaxPages, false, "ul", "pages past it are never hits"},
	{"IOW_PT_BITMAP", PTBitmap, false, "ul", "bytes of one bitmap"},
	{"IOW_PT_OFF_RESIDENT", PTOffResident, false, "ul", "resident bitmap (written by the daemon only)"},
	{"IOW_PT_OFF_DIRTY", PTOffDirty, false, "ul", "dirty bitmap (set by shims, cleared by the daemon)"},
	{"IOW_PT_SIZE", PTSize, false, "ul", "the whole table"},
	{"IOW_PTF_WRITABLE", PTFlagWritable, false, "u", "read-write maps were handed out"},
	{"IOW_PTF_POISONED", PTFlagPoisoned, false, "u", "shim writes refused"},
	{"IOW_PT_HINT_DIRTY", PTHintDirty, false, "u", "hint: a shim set a dirty bit"},
	{"IOW_PT_HINT_NEW", PTHintNew, false, "u", "hint: a shim created a page"},
}
