package omni

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Describe prints ds as a tree in the style of `ncdump -h`/`h5ls -r`:
// groups with their dimensions, variables (dtype, dims and shape,
// chunking, filters) and attributes.
func Describe(w io.Writer, ds *Dataset) error {
	pw := &printer{w: w}
	pw.printf("%s (%s)\n", ds.Path, ds.Format)
	pw.group(ds.Root, "")
	return pw.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) group(g *Group, ind string) {
	title := "group " + g.Path + storedAs(g.Name)
	switch {
	case g.Compound:
		title = "compound " + g.Path + storedAs(g.Name)
	case g.NXClass != "":
		title += " (" + g.NXClass + ")"
	}
	p.printf("%s%s\n", ind, title)
	in := ind + "  "
	if len(g.Dims) > 0 {
		p.printf("%sdimensions:\n", in)
		for _, d := range g.Dims {
			p.printf("%s  %s = %s\n", in, d.Name, dimSize(d))
		}
	}
	if len(g.Variables) > 0 {
		p.printf("%svariables:\n", in)
		for _, v := range g.Variables {
			p.variable(v, in+"  ")
		}
	}
	if len(g.Attrs) > 0 {
		p.printf("%sattributes:\n", in)
		p.attrs(g.Attrs, in+"  ")
	}
	for _, c := range g.Groups {
		p.group(c, in)
	}
}

// storedAs names the stored form of an escaped name (EscapeName), ""
// when the name is stored as it is.
func storedAs(name string) string {
	if s := StoredName(name); s != name {
		return " (stored as " + strconv.Quote(s) + ")"
	}
	return ""
}

func dimSize(d *Dimension) string {
	if d.Unlimited {
		return fmt.Sprintf("UNLIMITED ; // (%d currently)", d.Size)
	}
	return fmt.Sprint(d.Size)
}

func (p *printer) variable(v *Variable, ind string) {
	axes := make([]string, len(v.Shape))
	for i, n := range v.Shape {
		axes[i] = fmt.Sprintf("%s=%d", v.Dims[i], n)
	}
	extra := ""
	if v.Chunks != nil {
		extra += fmt.Sprintf(" chunks=%v", v.Chunks)
	}
	if len(v.Filters) > 0 {
		extra += " filters=" + strings.Join(v.Filters, ",")
	}
	p.printf("%s%s %s(%s)%s%s\n", ind, v.DType, v.Name, strings.Join(axes, ", "), extra, storedAs(v.Name))
	if d := DecodingOf(v); !d.Identity() {
		p.printf("%s    decoded: %s\n", ind, d)
	}
	p.attrs(v.Attrs, ind+"    ")
}

func (p *printer) attrs(attrs []Attribute, ind string) {
	for _, a := range attrs {
		val := a.String()
		if a.Type.IsString() {
			val = fmt.Sprintf("%q", val)
		}
		p.printf("%s:%s = %s (%s)%s\n", ind, a.Name, truncate(val, 200), a.Type, storedAs(a.Name))
	}
}
