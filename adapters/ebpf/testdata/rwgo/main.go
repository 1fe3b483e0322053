// rwgo is the Go counterpart of rw.c (raw system calls, no libc): on
// os.Args[1] 40 writes of 64 KiB, a ReadAt of 1000 bytes at 100, an
// fsync; then, reopened, reads of 32 KiB to the end. It prints how many
// read and write calls it made on the file and the bytes they moved (a
// 0-byte read at the end is a call too).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

type counts struct{ writes, written, reads, read int64 }

func main() {
	var c counts
	if err := rw(os.Args[1], &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("writes %d bytes %d reads %d bytes %d\n", c.writes, c.written, c.reads, c.read)
}

func rw(path string, c *counts) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 65536)
	for i := 0; i < 40; i++ {
		n, err := f.Write(buf)
		c.writes, c.written = c.writes+1, c.written+int64(n)
		if err != nil {
			return err
		}
	}
	n, err := f.ReadAt(buf[:1000], 100)
	c.reads, c.read = c.reads+1, c.read+int64(n)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if f, err = os.Open(path); err != nil {
		return err
	}
	defer f.Close()
	for {
		n, err := f.Read(buf[:32768])
		c.reads, c.read = c.reads+1, c.read+int64(n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
