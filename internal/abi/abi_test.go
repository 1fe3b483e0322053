package abi

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const headerPath = "../../adapters/posix/abi.h"

// TestHeaderCommitted fails when the committed abi.h is not what the
// package generates.
func TestHeaderCommitted(t *testing.T) {
	got, err := os.ReadFile(headerPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := Header(); !bytes.Equal(got, want) {
		t.Fatalf("adapters/posix/abi.h differs from internal/abi: run %q and commit it", Generator)
	}
}

// TestLayout checks the tables: fields in order, aligned, not
// overlapping, inside their record; macro names unique.
func TestLayout(t *testing.T) {
	names := map[string]bool{}
	name := func(n string) {
		if names[n] {
			t.Errorf("macro %s defined twice", n)
		}
		names[n] = true
	}
	for _, c := range Consts {
		name(c.Name)
	}
	for _, r := range Records {
		name(r.SizeMacro)
		end := 0
		for _, f := range r.Fields {
			name(r.OffMacro(f))
			sz, ok := CTypeSize[f.CType]
			switch {
			case !ok:
				t.Errorf("%s.%s: unknown C type %s", r.Name, f.Name, f.CType)
			case f.Off < end:
				t.Errorf("%s.%s at %d overlaps the field before (ends at %d)", r.Name, f.Name, f.Off, end)
			case f.Off%sz != 0:
				t.Errorf("%s.%s at %d is not aligned to %d", r.Name, f.Name, f.Off, sz)
			}
			end = f.Off + f.Size()
		}
		if end > r.Size || r.Size%8 != 0 {
			t.Errorf("%s: fields end at %d, size %d", r.Name, end, r.Size)
		}
	}
}

// TestCLayout compiles a C program with abi.h (the system C compiler, the
// one cgo uses for libiowarp.so) that prints the offsetof and sizeof of
// every field, the sizeof of every record and the value of every macro,
// and compares them with this package. A cgo test would do the same from
// Go, but cgo is not allowed in this package, nor in _test.go files.
func TestCLayout(t *testing.T) {
	cc := compiler(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "abi_layout.c")
	prog, want := layoutProgram()
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	inc, err := filepath.Abs(filepath.Dir(headerPath))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "abi_layout")
	args := append(strings.Fields(cc), "-std=c11", "-Wall", "-Werror", "-I", inc, "-o", bin, src)
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(want) {
		t.Fatalf("C printed %d lines, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("C: %q, Go: %q", got[i], want[i])
		}
	}
}

// compiler is the C compiler cgo uses: $CC, else gcc (cgo's default),
// else cc.
func compiler(t *testing.T) string {
	cands := []string{"gcc", "cc"}
	if cc := strings.TrimSpace(os.Getenv("CC")); cc != "" {
		cands = []string{cc}
	}
	for _, cc := range cands {
		if _, err := exec.LookPath(strings.Fields(cc)[0]); err == nil {
			return cc
		}
	}
	t.Fatalf("no C compiler (%s), which building libiowarp.so needs", strings.Join(cands, ", "))
	return ""
}

// layoutProgram returns the C program and the lines it must print.
func layoutProgram() (string, []string) {
	var p strings.Builder
	var want []string
	p.WriteString("#include \"abi.h\"\n#include <stdio.h>\n\nint main(void)\n{\n")
	line := func(label, expr string, v uint64) {
		fmt.Fprintf(&p, "\tprintf(\"%s %%llu\\n\", (unsigned long long)(%s));\n", label, expr)
		want = append(want, fmt.Sprintf("%s %d", label, v))
	}
	for _, c := range Consts {
		line(c.Name, c.Name, c.Value)
	}
	line("_IOWR('W', 0x57, struct iow_cap)", "_IOWR('W', 0x57, struct iow_cap)", IocCap)
	for _, r := range Records {
		line("sizeof(struct "+r.Name+")", "sizeof(struct "+r.Name+")", uint64(r.Size))
		line(r.SizeMacro, r.SizeMacro, uint64(r.Size))
		for _, f := range r.Fields {
			line(r.OffMacro(f), r.OffMacro(f), uint64(f.Off))
			line("offsetof("+r.Name+", "+f.Name+")", "offsetof(struct "+r.Name+", "+f.Name+")", uint64(f.Off))
			line("sizeof("+r.Name+"."+f.Name+")", "sizeof(((struct "+r.Name+" *)0)->"+f.Name+")", uint64(f.Size()))
		}
	}
	p.WriteString("\treturn 0;\n}\n")
	return p.String(), want
}
