// Package cluster joins the daemons of a job: membership, per-file
// owners and the placement of data live in etcd (embedded in the first
// daemons of a job, or an existing etcd), and the daemons serve each
// other pages over gRPC.
//
// # Membership
//
// A Node registers under /iowarp/<cluster>/members/<node> with a lease
// of Config.TTL, kept alive while the daemon runs and refreshed with its
// tiers' capacity and use every TTL/3. A daemon that dies (kill -9, a
// node lost) stops renewing: etcd expires the lease within TTL, and its
// member key and every key it owned go with it. Members lists the keys;
// Health asks each member's gRPC service.
//
// # Shared namespace (Config.SharedNamespace)
//
// Node implements files.Remote. The owner of a file is the node that
// last opened it for writing: /iowarp/<cluster>/owners/<path> holds its
// name and the size it published at its last close, on the owner's
// lease. A writing open on another node revokes the owner (Revoke: it
// writes the file back, fsyncs it and deletes the key, compared on its
// lease so that nothing else is deleted) and then creates the key with
// its own lease in one transaction that fails if someone else took it
// meanwhile. A read-only open reads the key (a linearizable Get: it sees
// every close that returned before it) and, when another node owns the
// file, reads its misses from that node (ReadPage: the owner reads the
// page through its own file layer: dirty, resident or staged from the
// backing store) and caches them clean. Stat reads the owner key too
// (linearizable), so that a lookup after another node's close sees the
// size it published; the kernel's attribute cache bounds how often.
//
// What POSIX gets across nodes: close-to-open. Everything a node wrote
// and closed is seen, whole, by an open on any node that starts after the
// close returned; an open file's size is the one its open saw. Within
// one node everything is as on a local file system (one file layer for
// both doors). Not given: coherence of two nodes writing one file at the
// same time (the second writing open revokes the first, whose later
// writes are still written back but are not seen by others until it
// opens again for writing), byte-range locks across nodes, renames on a
// node that does not own the file (owners are keyed by path: the new
// name is read from the backing store until written back; a rename on
// the owner moves the key, an unlink there deletes it). Reads of pages that only a dead owner held
// fail with EIO until its lease expires; then the backing store, which
// lacks what the owner had not written back, is the truth again.
//
// # CTE buckets
//
// Node.Put places a blob on this node while its tiers have room, else on
// the member with the most room; /iowarp/<cluster>/blobs/<bucket>/<blob>
// names the holder on its lease, and Get on any node asks the holder
// (blobs.go). The blob organizer (Config.Organizer, blobmove.go) moves
// the least recently used blobs of a node whose tiers are above the high
// watermark to the members with the most room, until it is below the
// low one: the target puts the blob and switches the key to itself in
// one transaction compared on the key's mod revision, then the old
// holder deletes its copy. A copy is deleted only when the map does not
// name it, so a failed move leaves the blob where it was (or an unnamed
// copy, deleted by a later pass); a Get that asks the old holder after
// its delete reads the map once more and asks the new one. A blob goes
// with its node (no replicas).
//
// # gRPC
//
// There is no protoc here: the service (iowarp.cluster.Node) is a
// hand-written grpc.ServiceDesc, and its messages are byte frames with a
// registered codec ("iowarp-frame"): small requests are JSON, a page is
// its raw bytes. Nothing in the frames is trusted: a request that does
// not parse is InvalidArgument.
//
// # Locks
//
// Node.mu guards the set of owned paths and the connections; it is a
// leaf (no etcd or gRPC call is made while holding it). Node.blobLocks
// holds one lock per placement key across the pool change and the etcd
// write that go together (a put, a move out, a move in); a move out
// holds it while the target takes its own lock of the same key, which
// cannot cycle: only the node the map names moves a blob. The file layer
// calls Open, Stat, ReadPage and Closed holding none of its locks except
// file.mu shared (ReadPage, from a read), which an owner's ReadPage
// never needs on the asking node.
package cluster
