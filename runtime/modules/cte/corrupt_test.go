package cte

import (
	"errors"
	"fmt"
	"testing"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/runtime"
)

// TestWrapCorrupt: a blob that failed its checksum reaches the client as
// runtime.ErrCorrupt, through the wire code.
func TestWrapCorrupt(t *testing.T) {
	err := wrap(fmt.Errorf("get x: %w", bufferpool.ErrCorrupt))
	if !errors.Is(err, runtime.ErrCorrupt) {
		t.Fatalf("wrap: %v", err)
	}
	if got := runtime.CodeError(runtime.Code(err)); got != runtime.ErrCorrupt {
		t.Fatalf("over the wire: %v", got)
	}
}
