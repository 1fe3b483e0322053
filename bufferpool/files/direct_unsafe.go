package files

import "unsafe"

// directOK reports whether buf and off suit O_DIRECT.
func directOK(buf []byte, off int64) bool {
	return len(buf) > 0 && len(buf)%directAlign == 0 && off%directAlign == 0 &&
		uintptr(unsafe.Pointer(&buf[0]))%directAlign == 0
}

// alignedPage returns n bytes starting at a multiple of directAlign.
func alignedPage(n int64) []byte {
	b := make([]byte, n+directAlign)
	skip := (directAlign - int(uintptr(unsafe.Pointer(&b[0]))%directAlign)) % directAlign
	return b[skip : skip+int(n) : skip+int(n)]
}
