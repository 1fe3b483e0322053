// Package abi is the one description of the records the daemon shares
// with the LD_PRELOAD shim (adapters/posix): the capability the handshake
// ioctl returns, the grant request and reply on the grant socket, and the
// page table in shared memory. Go code uses these constants; the C side
// includes adapters/posix/abi.h, which is generated from them (Header)
// and checked against them by the tests of this package (a diff of the
// committed file, and a C program compiled with the system compiler that
// prints every offsetof and sizeof).
//
// Every record is little endian with explicit padding. Changing a layout
// means changing its version.
package abi

//go:generate go run ./gen -o ../../adapters/posix/abi.h

// The capability (struct iow_cap): the answer of the handshake ioctl
// (IocCap) on an fd of the mount (fusefs/shim.go, adapters/posix/posix.c).
const (
	CapMagic   = 0x43574f49 // "IOWC"
	CapVersion = 2
	CapSize    = 256

	CapTokenLen    = 32  // HMAC-SHA256
	CapEndpointLen = 108 // NUL-terminated, as sun_path

	CapOffMagic     = 0
	CapOffVersion   = 4
	CapOffIno       = 8
	CapOffPageSize  = 16
	CapOffPid       = 24
	CapOffUid       = 28
	CapOffAccMode   = 32
	CapOffFlags     = 36
	CapOffToken     = 40
	CapOffEndpoint  = 72
	CapOffDaemonPid = 180
	CapOffDataFd    = 184
	CapOffTableFd   = 188
	CapOffGrant     = 200
)

// IocCap is _IOWR('W', 0x57, struct iow_cap): the request carries the
// caller's claimed pid, the answer the capability.
const IocCap = 3<<30 | CapSize<<16 | 'W'<<8 | 0x57

// The grant request (struct iow_grant_req) and the head of its reply
// (struct iow_grant_reply) on the grant socket (fusefs/grant.go,
// adapters/posix/fast.c). After the reply's head comes the path of the
// daemon's ipc socket, NUL-terminated, at most GrantIPCPathMax bytes.
const (
	GrantMagic   = 0x47574f49 // "IOWG"
	GrantVersion = 1
	GrantReqSize = 64

	GrantOffMagic    = 0
	GrantOffVersion  = 4
	GrantOffGrant    = 8
	GrantOffIno      = 16
	GrantOffAccMode  = 24
	GrantOffReserved = 28 // 0
	GrantOffToken    = 32

	GrantReplySize      = 8
	GrantReplyOffStatus = 0 // i32 errno, 0 = granted
	GrantReplyOffPad    = 4 // 0
	GrantIPCPathMax     = 108
)

// The page table of a bucket in shared memory (bufferpool/
// pagetable_unsafe.go has its protocol; adapters/posix/fast.c and mmap.c
// are its clients): a header (struct iow_pt_header) and two bitmaps of
// PTMaxPages bits each, resident then dirty.
const (
	PTMagic    = 0x50574f49 // "IOWP"
	PTVersion  = 5
	PTHeader   = 4096
	PTMaxPages = 1 << 20 // pages past it are never hits
	PTBitmap   = PTMaxPages / 8
	PTSize     = PTHeader + 2*PTBitmap

	PTOffMagic    = 0
	PTOffVersion  = 4
	PTOffSeq      = 8  // u64 seqlock: odd while the bucket is write-locked
	PTOffSize     = 16 // i64 file size
	PTOffPageSize = 24
	PTOffNbits    = 32  // u64 pages each bitmap covers
	PTOffFlags    = 40  // u32 PTFlag*
	PTOffWriters  = 64  // i64 shim writers inside a page (own cache line)
	PTOffHint     = 72  // u64 non-zero once a shim write set a dirty bit
	PTOffMappers  = 80  // i64 shims' shared maps of the file (mmap.c)
	PTOffLease    = 128 // i64 pages shims may still create (the lease; own cache line)
	PTOffCover    = 136 // u64 bytes of the segment that exist: new pages end at or below it
	PTOffNewFrom  = 144 // i64 no page at or past it holds data the table does not show (shims may create holes there)
	PTOffMtime    = 192 // i64 ns: the file's mtime as of the last write (shims: an atomic max at each write; the daemon stores its own; own cache line)
	PTOffAttrGen  = 200 // u64 raised by the daemon at every other change of what stat answers (mode, owner, links, times, the backing file)

	PTOffResident = PTHeader
	PTOffDirty    = PTHeader + PTBitmap

	PTFlagWritable = 1 << 0 // read-write maps were handed out
	PTFlagPoisoned = 1 << 1 // shim writes refused

	PTHintDirty = 1 << 0 // hint bit: a shim set a dirty bit
	PTHintNew   = 1 << 1 // hint bit: a shim created a page (set its resident bit)
)
