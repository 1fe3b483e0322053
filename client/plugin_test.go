package client

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/config"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// TestPluginFromConfig builds the example module as a Go plugin, lists it
// in a config, starts a daemon runtime from that config and calls the
// module from a client.
func TestPluginFromConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin")
	}
	so := filepath.Join(t.TempDir(), "example.so")
	args := []string{"build", "-buildmode=plugin", "-o", so}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../runtime/modules/example")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=plugin: %v\n%s", err, out)
	}
	cfg, err := config.Parse("test.yaml", []byte("modules:\n  - "+so+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	rt := runtime.New(runtime.Options{Log: quietLog()})
	defer rt.Shutdown()
	if err := rt.Initialize(cfg); err != nil {
		if strings.Contains(err.Error(), "different version of package") && testing.CoverMode() != "" {
			t.Skip("coverage builds differ from the plugin's:", err)
		}
		t.Fatal(err)
	}
	srv, err := ipc.Listen(filepath.Join(t.TempDir(), "p.ipc"), rt, ipc.Options{Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := Connect(Options{Socket: srv.Path()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, out, err := c.Call("example", "greet", runtime.NewArgWriter(nil).String("plugin").Bytes(), nil, 256)
	want := "hello, plugin from pid " + strconv.Itoa(os.Getpid())
	if err != nil || string(out) != want || res.Value != 1 {
		t.Fatalf("example.greet = %q, %+v, %v; want %q", out, res, err, want)
	}
	w := runtime.NewArgWriter(nil).U32(3).U64(1).U64(2).U64(39)
	if res, _, err := c.Call("example", "sum", w.Bytes(), nil, 256); err != nil || res.Value != 42 {
		t.Fatalf("example.sum = %+v, %v", res, err)
	}
	if _, _, err := c.Call("example", "sum", []byte{1}, nil, 256); err == nil {
		t.Fatal("example.sum of bad arguments succeeded")
	}
}
