package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// `iowarp docs man DIR` writes one roff man page per command (iowarp.1,
// iowarp-mount.1, iowarp-runtime-start.1, ...), the way cobra's doc
// package does, without its go-md2man dependency: the text of the
// commands is plain, so the roff is written directly.

func newDocsCmd() *cobra.Command {
	docs := &cobra.Command{Use: "docs", Short: "Generate documentation from the command tree"}
	docs.AddCommand(&cobra.Command{
		Use:     "man DIR",
		Short:   "Write a man page (section 1) for every command into DIR",
		Example: "  iowarp docs man /usr/local/share/man/man1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := writeManPages(cmd.Root(), args[0])
			if err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %d man pages to %s\n", n, args[0])
			}
			return err
		},
	})
	return docs
}

// writeManPages writes the page of c and of every command below it into
// dir and returns how many it wrote.
func writeManPages(c *cobra.Command, dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("man page directory: %w", err)
	}
	n := 0
	for _, sub := range c.Commands() {
		if !manWorthy(sub) {
			continue
		}
		k, err := writeManPages(sub, dir)
		n += k
		if err != nil {
			return n, err
		}
	}
	name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
	if err := os.WriteFile(filepath.Join(dir, name), manPage(c), 0o644); err != nil {
		return n, fmt.Errorf("write man page: %w", err)
	}
	return n + 1, nil
}

// manWorthy: the commands a user can run (not help, not hidden ones).
func manWorthy(c *cobra.Command) bool {
	return c.IsAvailableCommand() || (c.HasAvailableSubCommands() && !c.Hidden)
}

// manPage renders one command as roff (man(7) macros).
func manPage(c *cobra.Command) []byte {
	var b bytes.Buffer
	title := strings.ToUpper(strings.ReplaceAll(c.CommandPath(), " ", "-"))
	date := time.Now().UTC().Format("2006-01-02")
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" { // reproducible builds
		var sec int64
		if _, err := fmt.Sscan(s, &sec); err == nil {
			date = time.Unix(sec, 0).UTC().Format("2006-01-02")
		}
	}
	fmt.Fprintf(&b, ".TH %q 1 %q %q %q\n", title, date, "iowarp "+version, "iowarp manual")
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", roffText(strings.ReplaceAll(c.CommandPath(), " ", "-")), roffText(c.Short))
	b.WriteString(".SH SYNOPSIS\n")
	fmt.Fprintf(&b, ".B %s\n", roffText(c.UseLine()))
	b.WriteString(".SH DESCRIPTION\n")
	long := c.Long
	if long == "" {
		long = c.Short
	}
	roffParagraphs(&b, long)
	manFlags(&b, "OPTIONS", c.NonInheritedFlags())
	manFlags(&b, "OPTIONS INHERITED FROM PARENT COMMANDS", c.InheritedFlags())
	if c.Example != "" {
		b.WriteString(".SH EXAMPLE\n.nf\n")
		b.WriteString(roffText(strings.Trim(c.Example, "\n")) + "\n.fi\n")
	}
	manSeeAlso(&b, c)
	return b.Bytes()
}

func manFlags(b *bytes.Buffer, section string, fs *pflag.FlagSet) {
	var lines []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		head := "\\-\\-" + roffText(f.Name)
		if f.Shorthand != "" {
			head = "\\-" + f.Shorthand + ", " + head
		}
		if f.Value.Type() != "bool" && f.Value.Type() != "count" {
			head += " " + roffText(f.Value.Type())
		}
		usage := f.Usage
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		lines = append(lines, ".TP\n.B "+head+"\n"+roffText(usage)+"\n")
	})
	if len(lines) == 0 {
		return
	}
	b.WriteString(".SH " + section + "\n")
	b.WriteString(strings.Join(lines, ""))
}

func manSeeAlso(b *bytes.Buffer, c *cobra.Command) {
	var refs []string
	if c.HasParent() {
		refs = append(refs, manRef(c.Parent()))
	}
	for _, sub := range c.Commands() {
		if manWorthy(sub) {
			refs = append(refs, manRef(sub))
		}
	}
	if len(refs) == 0 {
		return
	}
	b.WriteString(".SH SEE ALSO\n" + strings.Join(refs, ",\n") + "\n")
}

func manRef(c *cobra.Command) string {
	return ".BR " + roffText(strings.ReplaceAll(c.CommandPath(), " ", "-")) + " (1)"
}

// roffParagraphs writes text with blank lines as paragraph breaks and
// indented lines kept as they are (no filling).
func roffParagraphs(b *bytes.Buffer, text string) {
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		if strings.HasPrefix(para, " ") {
			b.WriteString(".nf\n" + roffText(para) + "\n.fi\n")
			continue
		}
		b.WriteString(roffText(para) + "\n")
	}
}

// roffText escapes text for roff: backslashes, hyphens (so that a flag
// is not hyphenated or rendered as a dash) and a control character
// ('.' or '\”) at the start of a line.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
