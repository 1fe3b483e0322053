package fusefs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// tgid returns the process (thread group) id of thread tid.
func tgid(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Tgid:")); ok {
			return strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Tgid", tid)
}
