package bufferpool

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestCatalogModel applies random bucket, blob, tag and version
// operations to a pool and to a map model, and after each step compares
// random queries (prefix, tag equality and range, size) and BucketsUnder
// with a brute-force answer from the model: the indexes never miss a
// blob or keep one that left.
func TestCatalogModel(t *testing.T) {
	type mblob struct {
		size int
		tags map[string]string
	}
	buckets := []string{"s/r1", "s/r1/t", "s/r10", "o"}
	blobs := []string{"a", "b", "c"}
	keys := []string{"k", "n"}
	for seed := uint64(1); seed <= 4; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		p := testPool(t, 16<<20, 0)
		model := map[string]map[string]*mblob{}
		val := func() string { return strconv.Itoa(r.IntN(12)) }
		for step := range 400 {
			bn, name := buckets[r.IntN(len(buckets))], blobs[r.IntN(len(blobs))]
			b := mustBucket(t, p, bn, 0)
			if model[bn] == nil {
				model[bn] = map[string]*mblob{}
			}
			mb := model[bn][name]
			op := r.IntN(10)
			var err error
			switch {
			case op < 3:
				size := 1 + r.IntN(3000)
				if r.IntN(2) == 0 {
					err = b.Put(name, make([]byte, size))
				} else {
					_, err = b.PutVersion(name, make([]byte, size), PutOptions{})
				}
				if mb == nil {
					mb = &mblob{tags: map[string]string{}}
					model[bn][name] = mb
				}
				mb.size = size
			case op < 6:
				k, v := keys[r.IntN(len(keys))], val()
				err = b.SetTag(name, k, v)
				if mb != nil {
					mb.tags[k] = v
				}
			case op < 7:
				k := keys[r.IntN(len(keys))]
				err = b.DeleteTag(name, k)
				if mb != nil {
					delete(mb.tags, k)
				}
			case op < 9:
				err = b.Delete(name)
				delete(model[bn], name)
			default:
				err = p.DeleteBucket(bn)
				delete(model, bn)
			}
			_ = err // errors (not found) are part of the sequence; the model follows the rule
			for range 3 {
				var q Query
				switch r.IntN(4) {
				case 0:
					q.Tags = []TagFilter{{Key: keys[r.IntN(2)], Value: val()}}
				case 1:
					lo, hi := val(), val()
					q.Tags = []TagFilter{{Key: keys[r.IntN(2)], Range: true, Min: lo, Max: hi}}
				case 2:
					q.Prefix = buckets[r.IntN(len(buckets))]
				case 3:
					q.Prefix = "s"
					q.MinSize = int64(r.IntN(3000))
					q.Tags = []TagFilter{{Key: "k", Range: true, Min: val()}}
				}
				got, err := p.Query(q, nil)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for bn, m := range model {
					if !underPrefix(bn, q.Prefix) {
						continue
					}
					for name, mb := range m {
						if int64(mb.size) < q.MinSize {
							continue
						}
						ok := true
						for _, f := range q.Tags {
							ok = ok && f.match(mb.tags)
						}
						if ok {
							want = append(want, bn+":"+name)
						}
					}
				}
				slices.Sort(want)
				if !slices.Equal(keys2(got), want) {
					t.Fatalf("seed %d step %d: query %+v: got %q, want %q", seed, step, q, keys2(got), want)
				}
			}
			var want []string
			for bn := range model {
				if underPrefix(bn, "s/r1") {
					want = append(want, bn)
				}
			}
			slices.Sort(want)
			ntags := 0
			for _, m := range model {
				for _, mb := range m {
					ntags += len(mb.tags)
				}
			}
			if n := p.cat.refs(); n != ntags {
				t.Fatalf("seed %d step %d: the tag index holds %d entries, the blobs %d tags", seed, step, n, ntags)
			}
			if got := p.BucketsUnder("s/r1"); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: BucketsUnder(s/r1) = %q, want %q", seed, step, got, want)
			}
		}
		checkAccounting(t, p)
	}
}

// keys2 is keys with "bucket:blob" sorted as the model sorts them.
func keys2(rs []QueryResult) []string {
	out := keys(rs)
	slices.Sort(out)
	return out
}

// refs counts the index's entries (blob, tag) and checks that every
// value listed has blobs.
func (c *catalog) refs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ti := range c.tags {
		if len(ti.vals) != len(ti.refs) {
			return -1
		}
		for _, set := range ti.refs {
			if len(set) == 0 {
				return -1
			}
			n += len(set)
		}
	}
	return n
}
