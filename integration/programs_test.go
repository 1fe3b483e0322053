package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// makeSmallTree writes n small files (0..8 KiB, a few modes) in n/100
// directories under root, plus symlinks, and returns root.
func makeSmallTree(t *testing.T, root string, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 8192)
	modes := []os.FileMode{0o644, 0o600, 0o755, 0o640}
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		size := r.IntN(len(buf) + 1)
		for j := range size {
			buf[j] = byte(r.Uint32())
		}
		p := filepath.Join(dir, fmt.Sprintf("f%05d", i))
		if err := os.WriteFile(p, buf[:size], 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, modes[i%len(modes)])
		if i%500 == 0 {
			os.Symlink(fmt.Sprintf("f%05d", i), filepath.Join(dir, fmt.Sprintf("l%05d", i)))
		}
	}
	os.Symlink("nowhere", filepath.Join(root, "dangling"))
	os.Mkdir(filepath.Join(root, "empty"), 0o700)
}

// TestPrograms runs real programs on one writeback mount.
func TestPrograms(t *testing.T) {
	m := startMount(t, config{ram: "256MiB", file: "2GiB"})

	t.Run("cp -a tree with 5000 files and 1 GiB", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "src")
		makeSmallTree(t, src, 5000)
		bigSum := writeRandomFile(t, filepath.Join(src, "big.bin"), 1<<30, 7)
		dst := m.path("cp")
		sh(t, "/", fmt.Sprintf("cp -a %s %s", src, dst))
		sh(t, "/", fmt.Sprintf("diff -r --no-dereference %s %s", src, dst))
		if got := strings.Fields(sh(t, "/", "sha256sum "+filepath.Join(dst, "big.bin")))[0]; got != bigSum {
			t.Errorf("sha256sum of the copy = %s, want %s; differing bytes per 1 MiB page (count page):\n%s"+
				"against the backing file:\n%s", got, bigSum, diffPages(filepath.Join(src, "big.bin"), filepath.Join(dst, "big.bin")),
				diffPages(filepath.Join(src, "big.bin"), filepath.Join(m.backing, "cp", "big.bin")))
		}
		compareTrees(t, "source", walkTree(t, src), "mount", walkTree(t, dst))
		os.Remove(filepath.Join(src, "big.bin")) // free disk early
		sh(t, "/", "rm -rf "+dst)
	})

	t.Run("tar c | tar x", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "src")
		makeSmallTree(t, src, 1000)
		writeRandomFile(t, filepath.Join(src, "mid.bin"), 48<<20+12345, 8)
		dst := m.path("tarx")
		os.Mkdir(dst, 0o755)
		sh(t, "/", fmt.Sprintf("tar -C %s -cf - . | tar -C %s -xpf -", src, dst))
		sh(t, "/", fmt.Sprintf("diff -r --no-dereference %s %s", src, dst))
		// and back out of the mount
		out := filepath.Join(t.TempDir(), "out")
		os.Mkdir(out, 0o755)
		sh(t, "/", fmt.Sprintf("tar -C %s -cf - . | tar -C %s -xpf -", dst, out))
		compareTrees(t, "source", walkTree(t, src), "round trip", walkTree(t, out))
	})

	t.Run("dd of random data", func(t *testing.T) {
		ref := filepath.Join(t.TempDir(), "ref.sha")
		p := m.path("dd.bin")
		sh(t, "/", fmt.Sprintf("dd if=/dev/urandom bs=1M count=64 status=none | tee >(sha256sum | cut -d' ' -f1 >%s) | "+
			"dd of=%s bs=64k iflag=fullblock conv=fsync status=none", ref, p))
		want := readTrim(t, ref)
		if got := sha256File(t, p); got != want {
			t.Errorf("mount: sha256 %s, want %s", got, want)
		}
		// conv=fsync: the data is on the backing store already.
		if got := sha256File(t, filepath.Join(m.backing, "dd.bin")); got != want {
			t.Errorf("backing after fsync: sha256 %s, want %s", got, want)
		}
		// dd into the middle of the file, no truncation
		sh(t, "/", fmt.Sprintf("dd if=/dev/zero of=%s bs=4k seek=3 count=5 conv=notrunc status=none", p))
		if st, _ := os.Stat(p); st.Size() != 64<<20 {
			t.Errorf("size after notrunc write: %d", st.Size())
		}
	})

	t.Run("bash redirections", func(t *testing.T) {
		const script = `
echo one > f
echo two >> f
cat < f > g
(echo three; echo four) >> g
{ echo five; ls nonexistent; } >> g 2>/dev/null || true
exec 3> h; echo via-fd3 >&3; exec 3>&-
exec 4<> rw; echo abc >&4; exec 4>&-
while read -r l; do echo "line:$l"; done < g > i
cat > j <<EOF
here $((6*7))
EOF
set -o noclobber; if echo x > f 2>/dev/null; then echo clobbered > k; fi; set +o noclobber
echo 12345 > t; : > t; echo trunc >> t
printf 'a\0b' > nul
cat f g h i j rw t | wc -c > count
ls -1 | grep -vx listing | sort > listing
`
		tmp := t.TempDir()
		mdir := m.path("bash")
		os.Mkdir(mdir, 0o755)
		sh(t, tmp, script)
		sh(t, mdir, script)
		compareTrees(t, "tmp dir", walkTree(t, tmp), "mount", walkTree(t, mdir))
	})

	t.Run("python3 os.fsync", func(t *testing.T) {
		p := m.path("py.dat")
		script := fmt.Sprintf(`
import hashlib, os
data = os.urandom(3 * 1024 * 1024 + 17)
tmp = %[1]q + ".tmp"
with open(tmp, "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
os.replace(tmp, %[1]q)
d = os.open(os.path.dirname(%[1]q), os.O_RDONLY)
os.fsync(d)
os.close(d)
with open(%[1]q, "ab") as f:
    f.write(b"tail")
    f.flush()  # out of Python's buffer, or fdatasync has nothing to sync
    os.fdatasync(f.fileno())
print(hashlib.sha256(data + b"tail").hexdigest())
`, p)
		out, err := exec.Command("python3", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("python3: %v\n%s", err, out)
		}
		want := strings.TrimSpace(string(out))
		if got := sha256File(t, p); got != want {
			t.Errorf("mount: %s, want %s", got, want)
		}
		if got := sha256File(t, filepath.Join(m.backing, "py.dat")); got != want {
			t.Errorf("backing after fsync: %s, want %s", got, want)
		}
		if _, err := os.Stat(filepath.Join(m.backing, "py.dat.tmp")); !os.IsNotExist(err) {
			t.Errorf("renamed-away temp file still in backing: %v", err)
		}
	})

	t.Run("fio verify crc32c", func(t *testing.T) {
		dir := m.path("fio")
		os.Mkdir(dir, 0o755)
		for _, rw := range []string{"randwrite", "write", "randrw"} {
			out, err := exec.Command("fio", "--name=v-"+rw, "--directory="+dir, "--ioengine=psync",
				"--rw="+rw, "--bs=4k", "--size=32M", "--verify=crc32c", "--do_verify=1",
				"--verify_fatal=1", "--verify_state_save=0", "--numjobs=2", "--output-format=json").CombinedOutput()
			if err != nil {
				t.Fatalf("fio %s: %v\n%s", rw, err, out)
			}
			checkFioJSON(t, rw, out)
		}
		// verify again in a separate read-only pass
		out, err := exec.Command("fio", "--name=v-randwrite", "--directory="+dir, "--ioengine=psync",
			"--rw=randread", "--bs=4k", "--size=32M", "--verify=crc32c", "--verify_only",
			"--numjobs=2", "--output-format=json").CombinedOutput()
		if err != nil {
			t.Fatalf("fio verify_only: %v\n%s", err, out)
		}
		checkFioJSON(t, "verify_only", out)
	})
}

func checkFioJSON(t *testing.T, name string, out []byte) {
	t.Helper()
	i := strings.Index(string(out), "{")
	if i < 0 {
		t.Fatalf("fio %s: no JSON in output:\n%s", name, out)
	}
	var res struct {
		Jobs []struct {
			Name  string `json:"jobname"`
			Error int    `json:"error"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out[i:], &res); err != nil {
		t.Fatalf("fio %s: %v\n%s", name, err, out)
	}
	if len(res.Jobs) == 0 {
		t.Fatalf("fio %s: no jobs in output", name)
	}
	for _, j := range res.Jobs {
		if j.Error != 0 {
			t.Errorf("fio %s job %s: error %d", name, j.Name, j.Error)
		}
	}
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
