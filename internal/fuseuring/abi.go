package fuseuring

// FUSE-over-io_uring ABI (linux/fuse.h, protocol 7.42).
const (
	// CapOverIoUring is FUSE_OVER_IO_URING, bit 41 of the INIT flags
	// (bit 9 of flags2): the server takes requests on io_uring queues.
	CapOverIoUring = 1 << 41

	cmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	cmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	inHeaderSize  = 40  // struct fuse_in_header
	outHeaderSize = 16  // struct fuse_out_header
	inOutSize     = 128 // FUSE_URING_IN_OUT_HEADER_SZ
	opInSize      = 128 // FUSE_URING_OP_IN_OUT_SZ

	// minPayload is FUSE_MIN_READ_BUFFER: the kernel never asks for a
	// smaller payload buffer than this.
	minPayload = 8192
)

// ringHeader is struct fuse_uring_req_header: the request's (or reply's)
// fuse_in_header / fuse_out_header, the op-specific header (the request's
// first argument), and the entry's commit id and payload size.
type ringHeader struct {
	inOut [inOutSize]byte
	opIn  [opInSize]byte
	ent   ringEntInOut
}

// ringEntInOut is struct fuse_uring_ent_in_out.
type ringEntInOut struct {
	flags     uint64
	commitID  uint64
	payloadSz uint32
	padding   uint32
	reserved  uint64
}

// uringCmdReq is struct fuse_uring_cmd_req, in the SQE's command area.
type uringCmdReq struct {
	flags    uint64
	commitID uint64
	qid      uint16
	padding  [6]uint8
}

const ringHeaderSize = inOutSize + opInSize + 32
