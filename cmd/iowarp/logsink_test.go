package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// brokenWriter fails every write, as stderr does once the reader of its
// pipe is gone.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// stuckWriter blocks every write until released, as a pipe whose reader
// stopped reading (tee suspended with Ctrl-Z).
type stuckWriter struct{ release chan struct{} }

func (w stuckWriter) Write(p []byte) (int, error) {
	<-w.release
	return len(p), nil
}

// TestLogSinkNeverFails: a log write neither fails nor blocks, whatever
// the output does; what is lost is counted.
func TestLogSinkNeverFails(t *testing.T) {
	s := newLogSink(brokenWriter{})
	for range 10 {
		if n, err := s.Write([]byte("draining\n")); n != 9 || err != nil {
			t.Fatalf("Write on a broken output = %d, %v; want 9, nil", n, err)
		}
	}
	s.Close()
	if s.Lost() < 10 {
		t.Errorf("lost %d lines, want at least 10", s.Lost())
	}

	w := stuckWriter{release: make(chan struct{})}
	s = newLogSink(w)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 3 * logQueue {
			s.Write([]byte("line\n")) // must return although nothing is written
		}
	}()
	wg.Wait()
	if s.Lost() == 0 {
		t.Errorf("a stuck output lost nothing out of %d lines", 3*logQueue)
	}
	close(w.release)
	s.Close()
	if n, err := s.Write([]byte("after close\n")); n != 12 || err != nil {
		t.Errorf("Write after Close = %d, %v", n, err)
	}
}

// TestLogSinkReopen: after the log file is renamed, Reopen starts a new
// one under the same name; the lines before stay in the renamed file.
func TestLogSinkReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log", "iowarp.log")
	s := newLogSink(brokenWriter{})
	if err := s.UseFile(path, false); err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("one\n"))
	s.Flush()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("two\n"))
	s.Close()
	if b, _ := os.ReadFile(path + ".1"); string(b) != "one\n" {
		t.Errorf("rotated file %q, want \"one\\n\"", b)
	}
	if b, _ := os.ReadFile(path); string(b) != "two\n" {
		t.Errorf("new file %q, want \"two\\n\"", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new log mode %v, %v; want 0600", fi.Mode(), err)
	}
	if err := newLogSink(brokenWriter{}).Reopen(); err != nil {
		t.Errorf("Reopen without a log file: %v", err)
	}
}

// TestLogSinkLostNote: after lines were lost, the next written line is
// preceded by a note saying how many.
func TestLogSinkLostNote(t *testing.T) {
	fw := &flakyWriter{fail: 2}
	s := newLogSink(fw)
	for _, l := range []string{"a\n", "b\n", "c\n"} {
		s.Write([]byte(l))
	}
	s.Close()
	out := fw.String()
	if !strings.Contains(out, "WARNING 2 log lines were lost") || !strings.HasSuffix(out, "c\n") {
		t.Errorf("output %q", out)
	}
}

type flakyWriter struct {
	fail int
	strings.Builder
}

func (w *flakyWriter) Write(p []byte) (int, error) {
	if w.fail > 0 {
		w.fail--
		return 0, errors.New("disk full")
	}
	return w.Builder.Write(p)
}
