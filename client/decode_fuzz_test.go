package client

import (
	"testing"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/modules/cte"
)

// FuzzDecodeBuckets: the reply of cte.buckets, as the client reads it.
// No panic; an error returns nil; decoded names re-encode to the input.
func FuzzDecodeBuckets(f *testing.F) {
	f.Add(runtime.NewArgWriter(nil).U32(2).String("a").String("bb").Bytes())
	f.Add(runtime.NewArgWriter(nil).U32(3).String("a").Bytes()) // truncated
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := decodeBuckets(b)
		if err != nil {
			if names != nil {
				t.Fatalf("error %v with %d names", err, len(names))
			}
			return
		}
		w := runtime.NewArgWriter(nil).U32(uint32(len(names)))
		for _, n := range names {
			w.String(n)
		}
		if string(w.Bytes()) != string(b) {
			t.Fatalf("names %q do not encode back to %x", names, b)
		}
	})
}

// FuzzReadList: the reply of cte.list. No panic; a decoded list has at
// most as many entries as its count says.
func FuzzReadList(f *testing.F) {
	w := runtime.NewArgWriter(nil).U32(2)
	cte.WriteInfo(w, cte.Info{Name: "a", Tags: map[string]string{"k": "v"}})
	cte.WriteInfo(w, cte.Info{Name: "b"})
	f.Add(w.Bytes())
	f.Add(w.Bytes()[:len(w.Bytes())-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		r := runtime.NewArgReader(b)
		out := readList(r)
		if r.Err() == nil && len(b) >= 4 && uint64(len(out)) != uint64(b[0])|uint64(b[1])<<8|uint64(b[2])<<16|uint64(b[3])<<24 {
			t.Fatalf("%d entries decoded", len(out))
		}
	})
}
