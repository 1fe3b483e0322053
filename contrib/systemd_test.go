package contrib

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// systemd is not running in CI (no PID 1 manager in the container or on
// a test VM), so the units are tested the way systemd would run them:
// the test parses the installed unit, checks the settings that matter
// (Type=notify, TimeoutStopSec, Restart=on-failure), expands ExecStart
// as the manager does, runs it with NOTIFY_SOCKET pointing at a datagram
// socket the test listens on, and reads the notifications. What cannot
// be tested here: the manager's own reaction (restart, timeout
// extension), the [Install] section, specifiers other than %f %i %I %%.

// unit is the parsed [Service] section of a unit file.
type unit map[string]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: bad line %q", path, line)
			}
			u[section+"."+strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return u
}

// execStart expands the unit's ExecStart as systemd does for instance
// (the escaped instance name, "" for a plain unit) and splits it into
// words (no quoting is used in our units; quotes are refused).
func (u unit) execStart(t *testing.T, instance string) []string {
	t.Helper()
	line := u["Service.ExecStart"]
	if strings.ContainsAny(line, `"'\`) {
		t.Fatalf("ExecStart %q: quoting is not handled by this test", line)
	}
	unescaped := unescapeInstance(instance)
	repl := strings.NewReplacer("%%", "%", "%i", instance, "%I", unescaped, "%f", "/"+strings.TrimPrefix(unescaped, "/"))
	// Split first: a specifier expands within its word (a mount point
	// with a space stays one argument).
	words := strings.Fields(line)
	for i, w := range words {
		words[i] = repl.Replace(w)
	}
	words[0] = strings.TrimLeft(words[0], "-@:+!") // ExecStart prefixes
	return words
}

// unescapeInstance undoes systemd-escape --path: "-" is "/", \xNN a byte.
func unescapeInstance(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '-':
			b.WriteByte('/')
		case strings.HasPrefix(s[i:], `\x`) && i+4 <= len(s):
			n, _ := strconv.ParseUint(s[i+2:i+4], 16, 8)
			b.WriteByte(byte(n))
			i += 3
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// escapePath is systemd-escape --path for the plain paths tests use.
func escapePath(p string) string {
	p = strings.Trim(p, "/")
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':' || (c == '.' && i > 0):
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}

func TestUnitEscape(t *testing.T) {
	for _, p := range []string{"/iowarp", "/scratch/job-1/a.b", "/x y"} {
		if got := unescapeInstance(escapePath(p)); "/"+got != p {
			t.Errorf("%s -> %s -> %s", p, escapePath(p), got)
		}
	}
	if out, err := exec.Command("systemd-escape", "--path", "/scratch/job-1/a.b").Output(); err == nil {
		if got := strings.TrimSpace(string(out)); got != escapePath("/scratch/job-1/a.b") {
			t.Errorf("systemd-escape says %s, escapePath %s", got, escapePath("/scratch/job-1/a.b"))
		}
	}
}

// notifications is the test's side of NOTIFY_SOCKET.
type notifications struct {
	conn *net.UnixConn
	path string
	got  chan string
}

func listenNotify(t *testing.T) *notifications {
	t.Helper()
	path := filepath.Join(openDir(t), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n := &notifications{conn: c, path: path, got: make(chan string, 1024)}
	go func() {
		defer close(n.got)
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			n.got <- string(buf[:k])
		}
	}()
	t.Cleanup(func() { c.Close() })
	return n
}

// next returns the next notification that contains key ("READY=1"),
// with the ones skipped before it; bounded by a minute.
func (n *notifications) next(t *testing.T, key string) (string, []string) {
	t.Helper()
	var skipped []string
	timeout := time.After(time.Minute)
	for {
		select {
		case m, ok := <-n.got:
			if !ok {
				t.Fatalf("notify socket closed before %s", key)
			}
			if hasAssignment(m, key) {
				return m, skipped
			}
			skipped = append(skipped, m)
		case <-timeout:
			t.Fatalf("no %s notification in a minute (got %q)", key, skipped)
		}
	}
}

func hasAssignment(msg, key string) bool {
	for _, l := range strings.Split(msg, "\n") {
		if strings.HasPrefix(l, key) {
			return true
		}
	}
	return false
}

// service is an ExecStart command run as systemd runs it.
type service struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	log    string
}

// startService runs argv with a manager-like environment: stdin
// /dev/null, stdout and stderr to a journal file, NOTIFY_SOCKET set, a
// process group of its own; /usr and /etc paths are mapped into the
// installed tree, and the config path to conf.
func startService(t *testing.T, argv []string, conf, notify string) *service {
	t.Helper()
	for i, a := range argv {
		switch {
		case strings.HasPrefix(a, sysconfdir+"/iowarp/"):
			argv[i] = conf
		case strings.HasPrefix(a, prefix+"/"):
			argv[i] = inTree(t, a)
		}
	}
	s := &service{exited: make(chan struct{}), log: filepath.Join(openDir(t), "journal")}
	journal, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer journal.Close()
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"NOTIFY_SOCKET=" + notify, "INVOCATION_ID=0123456789abcdef", "LANG=C"}
	s.cmd.Stdout, s.cmd.Stderr = journal, journal
	s.cmd.Dir = "/"
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return s
}

// wait returns the exit code (bounded by two minutes).
func (s *service) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("service did not exit in 2 minutes; journal:\n%s", s.journal())
	}
	if s.err == nil {
		return 0
	}
	if ee, ok := s.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatal(s.err)
	return -1
}

func (s *service) journal() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// checkUnitSettings: what the units promise an admin.
func checkUnitSettings(t *testing.T, u unit) {
	t.Helper()
	for k, want := range map[string]string{
		"Service.Type":         "notify",
		"Service.NotifyAccess": "main",
		"Service.Restart":      "on-failure",
		"Service.KillSignal":   "SIGTERM",
		"Service.KillMode":     "mixed",
	} {
		if u[k] != want {
			t.Errorf("%s=%q, want %q", k, u[k], want)
		}
	}
	d, err := time.ParseDuration(strings.ReplaceAll(u["Service.TimeoutStopSec"], "min", "m"))
	if err != nil || d < 10*time.Minute {
		t.Errorf("TimeoutStopSec=%q: want at least 10min to drain", u["Service.TimeoutStopSec"])
	}
}

var dirtyStatus = regexp.MustCompile(`STATUS=draining: .* dirty \((\d+) bytes\) left`)

// TestSystemdUnit runs iowarp.service's ExecStart with 4 MiB dirty on a
// 1 MiB/s backing store: READY=1 (MAINPID, the mount is up when it
// comes), then on SIGTERM STOPPING=1 with a STATUS= counting the dirty
// bytes, status lines while it drains, a final STATUS=drained, and exit
// status 0 with the data on the backing store.
func TestSystemdUnit(t *testing.T) {
	requireMount(t)
	u := parseUnit(t, inTree(t, prefix+"/lib/systemd/system/iowarp.service"))
	checkUnitSettings(t, u)
	dir := openDir(t)
	mnt, backing := filepath.Join(dir, "mnt"), filepath.Join(dir, "pfs")
	for _, d := range []string{mnt, backing} {
		os.Mkdir(d, 0o755)
	}
	t.Cleanup(func() { detach(mnt) })
	conf := testConfig(t, dir, mnt, backing, "backing_bandwidth: 1MiB\n")
	n := listenNotify(t)
	svc := startService(t, u.execStart(t, ""), conf, n.path)

	ready, _ := n.next(t, "READY=1")
	if !strings.Contains(mountEntry(t, mnt), "fuse.iowarp") {
		t.Errorf("READY=1 before %s was mounted", mnt)
	}
	if !strings.Contains(ready+"\n", fmt.Sprintf("MAINPID=%d\n", svc.cmd.Process.Pid)) || !strings.Contains(ready, "STATUS=serving "+mnt) {
		t.Errorf("READY message %q lacks MAINPID=%d or STATUS=serving", ready, svc.cmd.Process.Pid)
	}
	data := bytes.Repeat([]byte("iowarp-systemd!\n"), (4<<20)/16)
	if err := os.WriteFile(filepath.Join(mnt, "out.dat"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	svc.cmd.Process.Signal(syscall.SIGTERM)
	stopping, _ := n.next(t, "STOPPING=1")
	m := dirtyStatus.FindStringSubmatch(stopping)
	if m == nil {
		t.Fatalf("STOPPING message %q has no STATUS=draining with the dirty bytes", stopping)
	}
	if dirty, _ := strconv.ParseInt(m[1], 10, 64); dirty <= 0 || dirty > int64(len(data)) {
		t.Errorf("STOPPING with %d bytes dirty, want 0 < dirty <= %d (4 MiB at 1 MiB/s)", dirty, len(data))
	}
	final, during := n.next(t, "STATUS=drained")
	if !strings.Contains(final, "0 bytes dirty") {
		t.Errorf("final status %q", final)
	}
	if len(during) == 0 {
		t.Errorf("no status line while draining")
	}
	if code := svc.wait(t); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0; journal:\n%s", code, svc.journal())
	}
	if got, err := os.ReadFile(filepath.Join(backing, "out.dat")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("backing store has %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	if mountEntry(t, mnt) != "" {
		t.Errorf("%s still mounted after exit", mnt)
	}
}

// TestSystemdTemplate runs iowarp@<escaped mount point>.service: %f is
// the mount point; a clean stop exits 0; a start that fails (the mount
// point is missing) exits 1 without READY=1, which systemd reports as
// a failed start and Restart=on-failure retries.
func TestSystemdTemplate(t *testing.T) {
	requireMount(t)
	u := parseUnit(t, inTree(t, prefix+"/lib/systemd/system/iowarp@.service"))
	checkUnitSettings(t, u)
	dir := openDir(t)
	mnt, backing := filepath.Join(dir, "job mnt"), filepath.Join(dir, "pfs")
	for _, d := range []string{mnt, backing} {
		os.Mkdir(d, 0o755)
	}
	t.Cleanup(func() { detach(mnt) })
	conf := testConfig(t, dir, "/iowarp-not-this-one", backing, "")
	argv := u.execStart(t, escapePath(mnt))
	if !strings.Contains(strings.Join(argv, " "), "mount "+mnt+" ") {
		t.Fatalf("ExecStart %q does not mount %s", argv, mnt)
	}
	n := listenNotify(t)
	svc := startService(t, argv, conf, n.path)
	n.next(t, "READY=1")
	waitMounted(t, mnt, svc.exited)
	svc.cmd.Process.Signal(syscall.SIGTERM)
	n.next(t, "STOPPING=1")
	if code := svc.wait(t); code != 0 {
		t.Fatalf("exit status %d, want 0; journal:\n%s", code, svc.journal())
	}

	n = listenNotify(t)
	svc = startService(t, u.execStart(t, escapePath(filepath.Join(dir, "missing"))), conf, n.path)
	if code := svc.wait(t); code != 1 {
		t.Errorf("start on a missing mount point: exit status %d, want 1; journal:\n%s", code, svc.journal())
	}
	select {
	case m := <-n.got:
		if hasAssignment(m, "READY=1") {
			t.Errorf("READY=1 from a start that failed: %q", m)
		}
	default:
	}
	if !strings.Contains(svc.journal(), "does not exist") {
		t.Errorf("journal does not say the mount point is missing:\n%s", svc.journal())
	}
}
