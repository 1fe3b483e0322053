package search

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/formats/omni"
)

// benchIndex holds n datasets of 10 variables each, with vocabularies
// drawn from a few hundred words.
func benchIndex(n int) (*Index, []Dataset) {
	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf("w%03d", i)
	}
	x := New(Options{})
	var sets []Dataset
	t0 := time.Now()
	for i := range n {
		d := grid(fmt.Sprint("m:", i), fmt.Sprint("ds", i), t0.Add(time.Duration(i)))
		d.Vars = nil
		for j := range 10 {
			k := i*10 + j
			d.Vars = append(d.Vars, Var{Path: fmt.Sprintf("/v%d", j), Name: words[k%300], DType: "float32",
				Dims: []string{"time", "lat", "lon"}, Shape: []int64{4, 4, 8}, Coords: []string{"/time", "/lat", "/lon"},
				LongName: words[(k*7)%300] + " " + words[(k*13)%300], Units: words[k%17]})
		}
		x.Update(d)
		sets = append(sets, d)
	}
	return x, sets
}

// BenchmarkSearch: a two-term query over 100,000 variables, against a
// baseline scan that only tests each variable's fields for the terms
// (no ranking): the ratio is what the index buys.
func BenchmarkSearch(b *testing.B) {
	x, sets := benchIndex(10000)
	q := Query{Text: "w042 w117", Within: []omni.Filter{{Dim: "lat", Lo: "0", Hi: "30"}}}
	b.Run("index", func(b *testing.B) {
		for range b.N {
			if len(x.Search(q)) == 0 {
				b.Fatal("no hits")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for range b.N {
			n := 0
			for i := range sets {
				for j := range sets[i].Vars {
					v := &sets[i].Vars[j]
					s := v.Name + " " + v.LongName + " " + v.Units
					if strings.Contains(s, "w042") || strings.Contains(s, "w117") {
						n++
					}
				}
			}
			if n == 0 {
				b.Fatal("no hits")
			}
		}
	})
}
