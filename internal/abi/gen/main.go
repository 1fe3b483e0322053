// Command gen writes adapters/posix/abi.h from package abi (go generate
// ./internal/abi).
package main

import (
	"flag"
	"log"
	"os"

	"github.com/iowarp/iowarp/internal/abi"
)

func main() {
	out := flag.String("o", "abi.h", "the file to write")
	flag.Parse()
	if err := os.WriteFile(*out, abi.Header(), 0o644); err != nil {
		log.Fatalf("abi/gen: %v", err)
	}
}
