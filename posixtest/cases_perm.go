package posixtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// foreignScript is what the other user runs, in the case's directory: each
// command's exit status and output (messages name paths relative to it, so
// they are the same on every file system).
const foreignScript = `
try() { out=$("$@" 2>&1); echo "$* -> rc=$? $out"; }
try cat f0000
try cat f0004
try cat f0040
try cat f0400
try stat -c %a f0000
try cat d0000/g
try stat -c %a d0000/g
try ls d0000
try stat -c %a d0000
try cat d0001/g
try ls d0001
try ls d0004
try cat d0004/g
try touch d0000/new
try sh -c 'echo x >> f0000'
try sh -c 'echo x >> f0006'
try mkdir d0555/x
try rm -f f0000
try mv f0004 moved
`

// ForeignAccess is what another user (u, not the owner, not in the group)
// is allowed on files and directories of modes 0000, 0004, 0040 ... made by
// root in dir: nothing a mode denies. env is added to the child's
// environment (LD_PRELOAD of the shim). The file system must be mounted
// with allow_other.
func ForeignAccess(t *testing.T, dir string, u User, env []string) Transcript {
	r := newRec(t, dir)
	r.must("chmod case dir 0755", os.Chmod(dir, 0o755))
	for _, m := range []string{"0000", "0004", "0040", "0400", "0006"} {
		r.writeFile("f"+m, []byte("secret "+m+"\n"))
	}
	for _, m := range []string{"0000", "0001", "0004", "0555"} {
		r.must("mkdir d"+m, unix.Mkdir(r.p("d"+m), 0o755))
		r.writeFile("d"+m+"/g", []byte("inner "+m+"\n"))
	}
	for _, m := range []uint32{0, 0o4, 0o40, 0o400, 0o6} {
		r.must("chmod file", os.Chmod(r.p("f"+octal(m)), os.FileMode(m)))
	}
	for _, m := range []uint32{0, 0o1, 0o4, 0o555} {
		r.must("chmod dir", os.Chmod(r.p("d"+octal(m)), os.FileMode(m)))
	}
	// Root still reads everything.
	r.readAll("f0000")
	r.readAll("d0000/g")
	cmd := exec.Command("/bin/sh", "-c", foreignScript)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.Uid, Gid: u.Gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	r.do("run as other user", err)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		r.logf("  %s", l)
	}
	r.lstat("f0000")
	r.readAll("f0000")
	return r.out
}

func octal(m uint32) string { return fmt.Sprintf("%04o", m) }
