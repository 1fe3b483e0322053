package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// fillAttr copies a stat result into a FUSE attribute.
func fillAttr(st *unix.Stat_t, a *fuse.Attr) {
	a.Ino = st.Ino
	a.Size = uint64(st.Size)
	a.Blocks = uint64(st.Blocks)
	a.Atime = uint64(st.Atim.Sec)
	a.Atimensec = uint32(st.Atim.Nsec)
	a.Mtime = uint64(st.Mtim.Sec)
	a.Mtimensec = uint32(st.Mtim.Nsec)
	a.Ctime = uint64(st.Ctim.Sec)
	a.Ctimensec = uint32(st.Ctim.Nsec)
	a.Mode = st.Mode
	a.Nlink = uint32(st.Nlink)
	a.Uid = st.Uid
	a.Gid = st.Gid
	a.Rdev = uint32(st.Rdev)
	a.Blksize = uint32(st.Blksize)
}

// caller is the identity of the process behind a request; files and
// directories it creates are owned by it.
func caller(ctx context.Context) files.Cred {
	if c, ok := fuse.FromContext(ctx); ok {
		return files.Cred{Uid: c.Uid, Gid: c.Gid}
	}
	return files.Cred{}
}

// privileged approximates CAP_FSETID for the suid/sgid kill rules: the
// request carries only the caller's uid, and root is the one caller that
// holds the capability on the nodes we serve.
func privileged(ctx context.Context) bool {
	return caller(ctx).Uid == 0
}

// killSuidgid returns the permission bits of a regular file with the
// set-user-ID bit cleared, and the set-group-ID bit when group execute is
// set or the caller is neither privileged nor in the file's group — the
// VFS rules (setattr_should_drop_suidgid) applied on write, truncate and
// chown. The group test knows only the caller's primary gid, so a member
// through a supplementary group loses the bit where Linux would keep it.
// kill is false when nothing needs clearing.
func killSuidgid(st *unix.Stat_t, c files.Cred, privileged bool) (perm uint32, kill bool) {
	mode := st.Mode
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, false
	}
	perm = mode & 07777 &^ syscall.S_ISUID
	if mode&syscall.S_ISGID != 0 &&
		(mode&syscall.S_IXGRP != 0 || (!privileged && c.Gid != st.Gid)) {
		perm &^= syscall.S_ISGID
	}
	return perm, perm != mode&07777
}

// timeSpec converts one time of a FUSE setattr into a utimens argument.
func timeSpec(valid, set, now uint32, sec uint64, nsec uint32) *files.TimeSpec {
	switch {
	case valid&set == 0:
		return nil
	case valid&now != 0:
		return &files.TimeSpec{Now: true}
	}
	return &files.TimeSpec{Time: unixTime(sec, nsec)}
}

// setAttrOf translates a FUSE setattr into the file layer's request.
func setAttrOf(in *fuse.SetAttrIn) files.SetAttr {
	var a files.SetAttr
	if m, ok := in.GetMode(); ok {
		a.Mode = &m
	}
	if u, ok := in.GetUID(); ok {
		a.Uid = &u
	}
	if g, ok := in.GetGID(); ok {
		a.Gid = &g
	}
	if sz, ok := in.GetSize(); ok {
		s := int64(sz)
		a.Size = &s
	}
	a.Atime = timeSpec(in.Valid, fuse.FATTR_ATIME, fuse.FATTR_ATIME_NOW, in.Atime, in.Atimensec)
	a.Mtime = timeSpec(in.Valid, fuse.FATTR_MTIME, fuse.FATTR_MTIME_NOW, in.Mtime, in.Mtimensec)
	return a
}

func unixTime(sec uint64, nsec uint32) time.Time {
	return time.Unix(int64(sec), int64(nsec))
}
