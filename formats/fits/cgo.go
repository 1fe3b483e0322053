package fits

/*
#cgo pkg-config: cfitsio
#include "fits.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/iowarp/iowarp/formats/omni"
)

// mu serialises every call into cfitsio.
var mu sync.Mutex

// cfitsio datatype codes (fitsio.h).
const (
	tBit        = C.TBIT
	tByte       = C.TBYTE
	tSByte      = C.TSBYTE
	tLogical    = C.TLOGICAL
	tString     = C.TSTRING
	tUShort     = C.TUSHORT
	tShort      = C.TSHORT
	tUInt       = C.TUINT
	tInt        = C.TINT
	tULong      = C.TULONG
	tLong       = C.TLONG
	tFloat      = C.TFLOAT
	tULongLong  = C.TULONGLONG
	tLongLong   = C.TLONGLONG
	tDouble     = C.TDOUBLE
	tComplex    = C.TCOMPLEX
	tDblComplex = C.TDBLCOMPLEX

	imageHDU = C.IMAGE_HDU
)

// cfile is an open fitsfile.
type cfile struct {
	f *C.fitsfile
}

func fitsErr(op string, status C.int) error {
	var buf [256]C.char
	C.iwf_errmsg(status, &buf[0], C.size_t(len(buf)))
	return fmt.Errorf("%s: %w: %s (status %d)", op, ErrLibrary, C.GoString(&buf[0]), int(status))
}

func openFile(p string) (*cfile, error) {
	cp := C.CString(p)
	defer C.free(unsafe.Pointer(cp))
	mu.Lock()
	defer mu.Unlock()
	var f *C.fitsfile
	var status C.int
	if C.ffdkopn(&f, cp, C.READONLY, &status); status != 0 {
		err := fitsErr("fits_open_diskfile", status)
		if f != nil {
			status = 0
			C.ffclos(f, &status)
		}
		return nil, err
	}
	return &cfile{f: f}, nil
}

func (c *cfile) close() error {
	mu.Lock()
	defer mu.Unlock()
	if c.f == nil {
		return nil
	}
	var status C.int
	C.ffclos(c.f, &status)
	c.f = nil
	if status != 0 {
		return fitsErr("fits_close_file", status)
	}
	return nil
}

// moveTo makes HDU i (1-based) current and returns its type; mu must not
// be held.
func (c *cfile) moveTo(i int) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	return c.moveLocked(i)
}

// errEOF: no HDU of that number (the end of the file).
var errEOF = errors.New("no such HDU")

func (c *cfile) moveLocked(i int) (int, error) {
	var typ, status C.int
	if C.ffmahd(c.f, C.int(i), &typ, &status); status == C.END_OF_FILE {
		C.ffcmsg() // clear the error stack
		return 0, errEOF
	} else if status != 0 {
		return 0, fitsErr(fmt.Sprintf("fits_movabs_hdu %d", i), status)
	}
	return int(typ), nil
}

// cards reads the current HDU's header, at most max cards: of a
// tile-compressed image, the header of the image (fits_convert_hdr2str),
// as astropy shows it. A long string's CONTINUE cards are joined to it.
func (c *cfile) cards(max int) ([]card, error) {
	mu.Lock()
	defer mu.Unlock()
	var hdr *C.char
	var nkeys, status C.int
	if C.ffcnvthdr2str(c.f, 0, nil, 0, &hdr, &nkeys, &status); status != 0 {
		if hdr != nil {
			status = 0
			C.fffree(unsafe.Pointer(hdr), &status)
		}
		return nil, fitsErr("fits_convert_hdr2str", status)
	}
	defer func() {
		var st C.int
		C.fffree(unsafe.Pointer(hdr), &st)
	}()
	if int(nkeys) > max {
		return nil, fmt.Errorf("%d header cards (at most %d): %w", nkeys, max, omni.ErrNotSupported)
	}
	text := C.GoStringN(hdr, nkeys*80)
	out := make([]card, 0, int(nkeys))
	for n := 0; n+80 <= len(text); n += 80 {
		k, err := parseCard(text[n : n+80])
		if err != nil {
			return nil, err
		}
		if last := len(out) - 1; k.key == "CONTINUE" && last >= 0 && out[last].kind == 'C' && strings.HasSuffix(out[last].str, "&") {
			out[last].str = strings.TrimSuffix(out[last].str, "&") + k.str
			continue
		}
		out = append(out, k)
	}
	return out, nil
}

// parseCard parses one 80-character header card.
func parseCard(s string) (card, error) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	var name [C.FLEN_KEYWORD]C.char
	var val [C.FLEN_VALUE]C.char
	var com [C.FLEN_COMMENT]C.char
	var n, status C.int
	if C.ffgknm(cs, &name[0], &n, &status); status != 0 {
		return card{}, fitsErr("header card keyword", status)
	}
	if C.ffpsvc(cs, &val[0], &com[0], &status); status != 0 {
		return card{}, fitsErr("header card value", status)
	}
	k := card{key: C.GoString(&name[0])}
	v := strings.TrimSpace(C.GoString(&val[0]))
	switch {
	case k.key == "CONTINUE":
		k.kind, k.str = 'C', quoted(s[8:])
	case k.key == "COMMENT" || k.key == "HISTORY" || v == "":
		k.str = C.GoString(&com[0])
	default:
		parseValue(&k, &val[0], v)
	}
	return k, nil
}

// parseValue types the value v of the card k.
func parseValue(k *card, val *C.char, v string) {
	var dtype C.char
	var status C.int
	if C.ffdtyp(val, &dtype, &status); status != 0 {
		k.kind, k.str = 'C', v
		return
	}
	k.kind = byte(dtype)
	switch k.kind {
	case 'C':
		k.str = unquote(v)
	case 'L':
		k.i = 0
		if v == "T" {
			k.i = 1
		}
	case 'I':
		n, err := strconv.ParseInt(strings.TrimPrefix(v, "+"), 10, 64)
		if err == nil {
			k.i = n
			return
		}
		k.kind = 'F'
		fallthrough
	case 'F':
		f, err := strconv.ParseFloat(strings.NewReplacer("D", "E", "d", "e").Replace(v), 64)
		if err != nil {
			k.kind, k.str = 'C', v
			return
		}
		k.f = f
	default:
		k.kind, k.str = 'C', v
	}
}

// unquote is the text of a FITS string value: 'it”s  ' is "it's".
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		v = strings.ReplaceAll(v[1:len(v)-1], "''", "'")
	}
	return strings.TrimRight(v, " ")
}

// quoted is the text of the first quoted FITS string in s ("" if none).
func quoted(s string) string {
	i := strings.IndexByte(s, '\'')
	if i < 0 {
		return ""
	}
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		if s[j] == '\'' {
			if j+1 < len(s) && s[j+1] == '\'' {
				b.WriteByte('\'')
				j++
				continue
			}
			break
		}
		b.WriteByte(s[j])
	}
	return strings.TrimRight(b.String(), " ")
}

// imageInfo returns the current image's equivalent BITPIX and its axes
// (NAXIS1 first).
func (c *cfile) imageInfo() (int, []int64, error) {
	mu.Lock()
	defer mu.Unlock()
	var equiv, naxis, status C.int
	if C.ffgiet(c.f, &equiv, &status); status != 0 {
		return 0, nil, fitsErr("fits_get_img_equivtype", status)
	}
	if C.ffgidm(c.f, &naxis, &status); status != 0 {
		return 0, nil, fitsErr("fits_get_img_dim", status)
	}
	if naxis < 0 || naxis > 32 {
		return 0, nil, fmt.Errorf("NAXIS %d: %w", naxis, omni.ErrNotSupported)
	}
	if naxis == 0 {
		return int(equiv), nil, nil
	}
	ax := make([]C.longlong, naxis)
	if C.ffgiszll(c.f, naxis, &ax[0], &status); status != 0 {
		return 0, nil, fitsErr("fits_get_img_size", status)
	}
	out := make([]int64, naxis)
	for i, n := range ax {
		if n < 0 {
			return 0, nil, fmt.Errorf("NAXIS%d = %d: %w", i+1, n, omni.ErrCorrupt)
		}
		out[i] = int64(n)
	}
	return int(equiv), out, nil
}

// tableSize returns the current table's rows and columns.
func (c *cfile) tableSize() (int64, int, error) {
	mu.Lock()
	defer mu.Unlock()
	var rows C.longlong
	var cols, status C.int
	if C.ffgnrwll(c.f, &rows, &status); status != 0 {
		return 0, 0, fitsErr("fits_get_num_rows", status)
	}
	if C.ffgncl(c.f, &cols, &status); status != 0 {
		return 0, 0, fitsErr("fits_get_num_cols", status)
	}
	if rows < 0 || cols < 0 {
		return 0, 0, fmt.Errorf("%d rows, %d columns: %w", rows, cols, omni.ErrCorrupt)
	}
	return int64(rows), int(cols), nil
}

// column returns a column's equivalent type code (negative for
// variable-length arrays), repeat and width.
func (c *cfile) column(col int) (int, int64, int, error) {
	mu.Lock()
	defer mu.Unlock()
	var code, status C.int
	var repeat, width C.longlong
	if C.ffeqtyll(c.f, C.int(col), &code, &repeat, &width, &status); status != 0 {
		return 0, 0, 0, fitsErr("fits_get_eqcoltype", status)
	}
	if repeat < 0 || width < 0 || width > 1<<20 {
		return 0, 0, 0, fmt.Errorf("repeat %d width %d: %w", repeat, width, omni.ErrCorrupt)
	}
	return int(code), int64(repeat), int(width), nil
}

// nulval returns cfitsio's "undefined value" for reads of ctype: NaN for
// floats read from scaled integers (BLANK pixels become NaN, as in
// astropy), zero (no null checking: values as they are) otherwise.
func nulval(ctype int, scaled bool) unsafe.Pointer {
	switch {
	case !scaled:
	case ctype == tFloat || ctype == tComplex:
		p := (*C.float)(C.malloc(8))
		*p = C.float(math.NaN())
		return unsafe.Pointer(p)
	case ctype == tDouble || ctype == tDblComplex:
		p := (*C.double)(C.malloc(8))
		*p = C.double(math.NaN())
		return unsafe.Pointer(p)
	}
	p := (*C.longlong)(C.malloc(8))
	*p = 0
	return unsafe.Pointer(p)
}

// readImage reads the selection h of an image (C order, axes reversed
// from FITS's) into dst.
func (c *cfile) readImage(fv *fvar, h omni.Hyperslab, dst []byte) error {
	n := len(h.Start)
	blc, trc, inc := make([]C.long, n), make([]C.long, n), make([]C.long, n)
	for k := range n {
		i := n - 1 - k
		st := h.StrideAt(i)
		blc[k] = C.long(h.Start[i] + 1)
		trc[k] = C.long(h.Start[i] + (h.Count[i]-1)*st + 1)
		inc[k] = C.long(st)
	}
	nul := nulval(fv.ctype, fv.scaled)
	defer C.free(nul)
	mu.Lock()
	defer mu.Unlock()
	if _, err := c.moveLocked(fv.hdu); err != nil {
		return err
	}
	var anynul, status C.int
	if C.ffgsv(c.f, C.int(fv.ctype), &blc[0], &trc[0], &inc[0], nul, unsafe.Pointer(&dst[0]), &anynul, &status); status != 0 {
		return fitsErr("fits_read_subset "+fv.v.Path, status)
	}
	return nil
}

// maxBlock bounds the rows one cfitsio call of readColumn reads.
const maxBlock = 1 << 20

// readColumn reads the selection h of a table column into dst: rows in
// blocks of up to maxBlock bytes, the selected elements picked from each.
func (c *cfile) readColumn(fv *fvar, h omni.Hyperslab, dst []byte) error {
	osz := int64(fv.v.DType.Size())
	rowElems := fv.repeat * int64(fv.parts) // values of osz bytes in a row
	rowBytes := rowElems * osz
	if fv.ctype == tString {
		rowBytes = int64(fv.width) + 1
	}
	// the sub-selection of one row, as value offsets within it
	sub := []int64{0}
	if len(h.Start) > 1 {
		sub = subOffsets(fv.v.Shape[1:], h.Start[1:], h.Count[1:], h.Strides()[1:])
	}
	blockRows := max(1, maxBlock/rowBytes)
	if h.StrideAt(0) >= blockRows {
		blockRows = 1
	}
	last := h.Start[0] + (h.Count[0]-1)*h.StrideAt(0)
	var buf []byte
	b0, bn := int64(-1), int64(0)
	out := dst
	mu.Lock()
	defer mu.Unlock()
	if _, err := c.moveLocked(fv.hdu); err != nil {
		return err
	}
	for i := int64(0); i < h.Count[0]; i++ {
		r := h.Start[0] + i*h.StrideAt(0)
		if r < b0 || r >= b0+bn {
			b0, bn = r, min(blockRows, last-r+1)
			if int64(cap(buf)) < bn*rowBytes {
				buf = make([]byte, bn*rowBytes)
			}
			buf = buf[:bn*rowBytes]
			if err := c.readRowsLocked(fv, b0, bn, buf); err != nil {
				return err
			}
		}
		row := buf[(r-b0)*rowBytes:]
		if fv.ctype == tString {
			w := int64(fv.width)
			s := row[:w]
			if k := indexNUL(s); k >= 0 {
				s = s[:k]
			}
			for len(s) > 0 && s[len(s)-1] == ' ' { // trailing blanks are not significant (astropy strips them)
				s = s[:len(s)-1]
			}
			clear(out[:w])
			copy(out, s)
			out = out[w:]
			continue
		}
		for _, o := range sub {
			copy(out[:osz], row[o*osz:])
			out = out[osz:]
		}
	}
	return nil
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// subOffsets lists, in C order, the offsets within a C-order array
// of shape of the elements the selection (start, count, stride) takes.
func subOffsets(shape, start, count, stride []int64) []int64 {
	n := int64(1)
	for _, c := range count {
		n *= c
	}
	out := make([]int64, 0, n)
	if n == 0 {
		return out
	}
	rank := len(shape)
	strides := make([]int64, rank)
	s := int64(1)
	for i := rank - 1; i >= 0; i-- {
		strides[i], s = s, s*shape[i]
	}
	k := make([]int64, rank)
	for {
		off := int64(0)
		for i := range rank {
			off += (start[i] + k[i]*stride[i]) * strides[i]
		}
		out = append(out, off)
		i := rank - 1
		for ; i >= 0; i-- {
			if k[i]++; k[i] < count[i] {
				break
			}
			k[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}

// readRowsLocked reads n whole rows of the column from row r0 (0-based)
// into buf; mu is held and the HDU current.
func (c *cfile) readRowsLocked(fv *fvar, r0, n int64, buf []byte) error {
	var status C.int
	if fv.ctype == tString {
		C.iwf_read_strings(c.f, C.int(fv.col), C.longlong(r0+1), C.longlong(n), C.int(fv.width), (*C.char)(unsafe.Pointer(&buf[0])), &status)
		if status != 0 {
			return fitsErr("fits_read_col_str "+fv.v.Path, status)
		}
		return nil
	}
	ctype := fv.ctype
	if fv.parts == 2 {
		ctype = tComplex
		if fv.v.DType == omni.Float64 {
			ctype = tDblComplex
		}
	}
	nul := nulval(ctype, fv.scaled)
	defer C.free(nul)
	var anynul C.int
	C.ffgcv(c.f, C.int(ctype), C.int(fv.col), C.longlong(r0+1), 1, C.longlong(n*fv.repeat), nul, unsafe.Pointer(&buf[0]), &anynul, &status)
	if status != 0 {
		return fitsErr("fits_read_col "+fv.v.Path, status)
	}
	if fv.ctype == tLogical { // 'T' is 1, 'F' 0, anything else false (as astropy)
		for i, c := range buf[:n*fv.repeat] {
			if c != 1 {
				buf[i] = 0
			}
		}
	}
	return nil
}
