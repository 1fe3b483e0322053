package runtime

import (
	"bytes"
	"testing"
)

func encodeModuleInfos(mods []ModuleInfo) []byte {
	w := NewArgWriter(nil)
	w.U32(uint32(len(mods)))
	for _, m := range mods {
		w.String(m.Name).U32(uint32(len(m.Methods)))
		for _, name := range m.Methods {
			w.String(name)
		}
	}
	return w.Bytes()
}

// FuzzDecodeModules: the reply of admin.modules, as a client reads it.
// No panic; an error returns nil; a decoded list is exactly the bytes it
// came from.
func FuzzDecodeModules(f *testing.F) {
	f.Add(EncodeModules([]Module{newAdmin()}))
	f.Add(encodeModuleInfos([]ModuleInfo{{Name: "cte", Methods: []string{"open", "close"}}, {Name: "x"}}))
	f.Add(NewArgWriter(nil).U32(2).String("a").U32(1).Bytes()) // truncated
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		mods, err := DecodeModules(b)
		if err != nil {
			if mods != nil {
				t.Fatalf("error %v with %d modules", err, len(mods))
			}
			return
		}
		if out := encodeModuleInfos(mods); !bytes.Equal(out, b) {
			t.Fatalf("modules %v do not encode back to %x", mods, b)
		}
	})
}
