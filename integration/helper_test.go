package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/leakcheck"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(func() int {
		code := m.Run()
		if buildDir != "" {
			os.RemoveAll(buildDir)
		}
		return code
	}))
}

// requireMount skips unless this process can mount FUSE file systems.
func requireMount(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
}

// iowarpBin builds cmd/iowarp once per test binary and returns its path.
func iowarpBin(t *testing.T) string {
	t.Helper()
	requireMount(t)
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "iowarp-bin-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "iowarp")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(goruntime.GOROOT(), "bin", "go")
		}
		out, err := exec.Command(gobin, "build", "-o", buildPath, "github.com/iowarp/iowarp/cmd/iowarp").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// config describes the daemon a test starts.
type config struct {
	mode      string   // "" = writeback
	ram       string   // "" = 256MiB
	file      string   // file tier capacity, "" = 1GiB, "none" = no file tier
	bandwidth string   // backing_bandwidth, "" = unlimited
	extra     string   // more YAML lines
	backing   string   // "" = a new temporary directory
	args      []string // more arguments of `iowarp mount`
	output    *os.File // the daemon's stdout and stderr; nil = the log file
}

// mount is a running `iowarp mount` subprocess.
type mount struct {
	t       *testing.T
	bin     string
	dir     string // mount point
	backing string
	ctl     string // control socket directory
	cfgPath string
	logPath string
	args    []string
	output  *os.File
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// startMount starts `iowarp mount` on a new temporary directory and waits
// until the mount is in the mount table. t.Cleanup stops it with SIGTERM
// (and detaches a mount left behind with umount -l).
func startMount(t *testing.T, c config) *mount {
	t.Helper()
	bin := iowarpBin(t)
	base := t.TempDir()
	m := &mount{t: t, bin: bin, dir: filepath.Join(base, "mnt"), backing: c.backing,
		cfgPath: filepath.Join(base, "config.yaml"), logPath: filepath.Join(base, "iowarp.log"),
		args: c.args, output: c.output}
	if m.backing == "" {
		m.backing = filepath.Join(base, "backing")
	}
	// Socket paths are limited to 108 bytes: keep the control dir short.
	ctl, err := os.MkdirTemp("", "iwctl")
	if err != nil {
		t.Fatal(err)
	}
	m.ctl = ctl
	t.Cleanup(func() { os.RemoveAll(ctl) })
	for _, d := range []string{m.dir, m.backing} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(m.cfgPath, []byte(c.yaml(base, m.backing, ctl)), 0o644); err != nil {
		t.Fatal(err)
	}
	m.start()
	t.Cleanup(m.cleanup)
	return m
}

func (c config) yaml(base, backing, ctl string) string {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "backing: %s\nmode: %s\ncontrol_dir: %s\nflushers: 4\n", backing, or(c.mode, "writeback"), ctl)
	if c.mode == "scratch" {
		fmt.Fprintf(&b, "scratch_dir: %s\n", filepath.Join(base, "scratch"))
	}
	if c.bandwidth != "" {
		fmt.Fprintf(&b, "backing_bandwidth: %s\n", c.bandwidth)
	}
	fmt.Fprintf(&b, "tiers:\n  - {name: ram, kind: ram, capacity: %s}\n", or(c.ram, "256MiB"))
	if c.file != "none" {
		fmt.Fprintf(&b, "  - {name: nvme, kind: file, dir: %s, capacity: %s}\n", filepath.Join(base, "nvme"), or(c.file, "1GiB"))
	}
	b.WriteString(c.extra)
	return b.String()
}

// start runs the daemon and waits for the mount.
func (m *mount) start() {
	t := m.t
	t.Helper()
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	m.cmd = exec.Command(m.bin, append([]string{"mount", m.dir, "--config", m.cfgPath}, m.args...)...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if m.output != nil {
		m.cmd.Stdout, m.cmd.Stderr = m.output, m.output
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.exited = make(chan struct{})
	go func() { m.waitErr = m.cmd.Wait(); close(m.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(m.dir) {
		select {
		case <-m.exited:
			t.Fatalf("iowarp mount exited before mounting (%v):\n%s", m.waitErr, m.log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not mounted after 30s:\n%s", m.dir, m.log())
		}
	}
}

func (m *mount) log() string {
	b, _ := os.ReadFile(m.logPath)
	return string(b)
}

func (m *mount) running() bool {
	select {
	case <-m.exited:
		return false
	default:
		return m.cmd != nil
	}
}

// stop sends SIGTERM and waits for the daemon to drain, unmount and exit;
// it returns the exit error (nil for status 0).
func (m *mount) stop() error {
	m.t.Helper()
	if !m.running() {
		return m.waitErr
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(3 * time.Minute):
		m.cmd.Process.Kill()
		<-m.exited
		m.t.Errorf("iowarp did not exit within 3 minutes of SIGTERM:\n%s", m.log())
	}
	if isMounted(m.dir) {
		m.t.Errorf("%s still mounted after the daemon exited", m.dir)
		lazyUnmount(m.dir)
	}
	return m.waitErr
}

// kill9 kills the daemon without a chance to drain and detaches the dead
// mount.
func (m *mount) kill9() {
	m.cmd.Process.Kill()
	<-m.exited
	lazyUnmount(m.dir)
}

func (m *mount) cleanup() {
	if m.running() {
		if err := m.stop(); err != nil {
			m.t.Errorf("iowarp exited with %v:\n%s", err, m.log())
		}
	}
	if isMounted(m.dir) {
		lazyUnmount(m.dir)
	}
	if m.t.Failed() {
		m.t.Logf("daemon log:\n%s", m.log())
	}
}

func lazyUnmount(dir string) {
	exec.Command("umount", "-l", dir).Run()
}

// isMounted reports whether dir is a mount point in /proc/self/mountinfo.
func isMounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	return false
}

// path returns the path of name inside the mount.
func (m *mount) path(name string) string { return filepath.Join(m.dir, name) }

// stats runs `iowarp stat --json`.
func (m *mount) stats() files.Stats {
	m.t.Helper()
	st, err := m.tryStats()
	if err != nil {
		m.t.Fatal(err)
	}
	return st
}

// tryStats is stats for goroutines other than the test's.
func (m *mount) tryStats() (files.Stats, error) {
	var st files.Stats
	out, err := exec.Command(m.bin, "stat", m.dir, "--json", "--control-dir", m.ctl).Output()
	if err != nil {
		return st, fmt.Errorf("iowarp stat: %v %s", err, stderrOf(err))
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("iowarp stat --json: %v: %s", err, out)
	}
	return st, nil
}

// waitDrained polls until the mount has no dirty bytes.
func (m *mount) waitDrained(limit time.Duration) files.Stats {
	m.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := m.stats()
		if st.DirtyBytes == 0 && st.FlushBacklog == 0 {
			return st
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("still %d dirty bytes, %d files in the flush backlog after %v", st.DirtyBytes, st.FlushBacklog, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// sh runs a shell command line, failing the test with its output.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// writeRandomFile writes size pseudo-random bytes (fixed by seed) to path
// at disk speed and returns their sha256.
func writeRandomFile(t *testing.T, path string, size int64, seed uint64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(newRandReader(seed), size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// newRandReader is an endless fast pseudo-random stream.
func newRandReader(seed uint64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return rand.NewChaCha8(s)
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// entry is what a tree walk records of one name.
type entry struct {
	Mode fs.FileMode // type and permission bits
	Size int64       // regular files
	Hash string      // regular files
	Link string      // symlinks
}

// walkTree records every name under root.
func walkTree(t *testing.T, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{Mode: info.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
		switch {
		case info.Mode().IsRegular():
			e.Size = info.Size()
			e.Hash = sha256File(t, p)
		case info.Mode()&fs.ModeSymlink != 0:
			if e.Link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// compareTrees reports every difference between two walks.
func compareTrees(t *testing.T, wantName string, want map[string]entry, gotName string, got map[string]entry) {
	t.Helper()
	n := 0
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: in %s, missing from %s", k, wantName, gotName)
		case g != w:
			t.Errorf("%s: %s has %+v, %s has %+v", k, wantName, w, gotName, g)
		default:
			continue
		}
		if n++; n > 20 {
			t.Fatal("too many differences")
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: in %s, not in %s", k, gotName, wantName)
		}
	}
}

// run runs a program and returns its combined output and exit code.
func run(name string, args ...string) (string, int) {
	var buf bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return buf.String(), ee.ExitCode()
	}
	if err != nil {
		return err.Error(), -1
	}
	return buf.String(), 0
}

// diffPages describes which 1 MiB pages of two files differ (for failure
// messages: a wrong page, a shifted range, a zeroed tail).
func diffPages(a, b string) string {
	out, _ := exec.Command("bash", "-c", fmt.Sprintf(
		"cmp -l %q %q 2>&1 | awk '{print int(($1-1)/1048576)}' | uniq -c | head -20", a, b)).CombinedOutput()
	return string(out)
}
