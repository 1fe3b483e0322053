package ebpf

// Syscall is one traced system call (x86_64 numbers).
type Syscall struct {
	Nr   uint32
	Name string
	Kind Kind
	// Path: which argument is a path read at entry (0 none, 1 the first,
	// 2 the second: openat's dirfd comes first).
	Path int
}

// Kind groups syscalls for the summary.
type Kind uint8

const (
	KindOther Kind = iota
	KindOpen       // returns a new fd for a path
	KindClose
	KindRead    // bytes in ret; offset from the fd's position
	KindWrite   //
	KindPRead   // offset in args[3]
	KindPWrite  //
	KindSeek    // ret is the new position
	KindSync    // fsync, fdatasync
	KindMeta    // stat, unlink, rename, mkdir, getdents ...
	KindMmap    //
	KindDup     // ret is a copy of the fd in args[0]
	KindFork    // clone, fork, vfork, clone3
	KindIOUring // io_uring_enter: I/O the tracer cannot split per file
	KindCopy    // copy_file_range, sendfile: ret bytes read from one fd and written to another
)

// syscalls are the calls the tracer asks the kernel for.
var syscalls = []Syscall{
	{0, "read", KindRead, 0},
	{1, "write", KindWrite, 0},
	{2, "open", KindOpen, 1},
	{3, "close", KindClose, 0},
	{4, "stat", KindMeta, 1},
	{5, "fstat", KindMeta, 0},
	{6, "lstat", KindMeta, 1},
	{8, "lseek", KindSeek, 0},
	{9, "mmap", KindMmap, 0},
	{17, "pread64", KindPRead, 0},
	{18, "pwrite64", KindPWrite, 0},
	{19, "readv", KindRead, 0},
	{20, "writev", KindWrite, 0},
	{32, "dup", KindDup, 0},
	{33, "dup2", KindDup, 0},
	{40, "sendfile", KindCopy, 0},
	{56, "clone", KindFork, 0},
	{57, "fork", KindFork, 0},
	{58, "vfork", KindFork, 0},
	{74, "fsync", KindSync, 0},
	{75, "fdatasync", KindSync, 0},
	{76, "truncate", KindMeta, 1},
	{77, "ftruncate", KindMeta, 0},
	{82, "rename", KindMeta, 1},
	{83, "mkdir", KindMeta, 1},
	{84, "rmdir", KindMeta, 1},
	{85, "creat", KindOpen, 1},
	{87, "unlink", KindMeta, 1},
	{217, "getdents64", KindMeta, 0},
	{257, "openat", KindOpen, 2},
	{258, "mkdirat", KindMeta, 2},
	{262, "newfstatat", KindMeta, 2},
	{263, "unlinkat", KindMeta, 2},
	{264, "renameat", KindMeta, 2},
	{292, "dup3", KindDup, 0},
	{295, "preadv", KindPRead, 0},
	{296, "pwritev", KindPWrite, 0},
	{316, "renameat2", KindMeta, 2},
	{326, "copy_file_range", KindCopy, 0},
	{327, "preadv2", KindPRead, 0},
	{328, "pwritev2", KindPWrite, 0},
	{332, "statx", KindMeta, 2},
	{426, "io_uring_enter", KindIOUring, 0},
	{435, "clone3", KindFork, 0},
	{437, "openat2", KindOpen, 2},
}

var byNr = func() map[uint32]Syscall {
	m := make(map[uint32]Syscall, len(syscalls))
	for _, s := range syscalls {
		m[s.Nr] = s
	}
	return m
}()

// SyscallOf returns the traced syscall nr (Name "" if not traced).
func SyscallOf(nr uint32) Syscall { return byNr[nr] }
