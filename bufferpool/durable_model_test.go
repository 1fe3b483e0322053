package bufferpool

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDurableModel applies random puts (plain and durable), partial
// puts, versioned puts, tag changes, deletes and restarts (Close, then New
// on the same directory) to a pool and to a model of what each must
// leave: after a restart a blob's current bytes (with its tags) and each
// kept version are there exactly when the write that made them was
// durable. It runs on a plain bucket, where PutOptions.Durable decides,
// and on a durable bucket (BucketOptions.Durable), where every write is
// durable whatever the options say. After every step the blobs, their
// tags, their versions and the accounting are compared.
func TestDurableModel(t *testing.T) {
	for _, bucketDurable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable-bucket=%v", bucketDurable), func(t *testing.T) { durableModel(t, bucketDurable) })
	}
}

func durableModel(t *testing.T, bucketDurable bool) {
	type ver struct {
		gen     uint64
		data    []byte
		durable bool
		tags    map[string]string // the current version's
	}
	type mblob struct {
		cur  *ver // nil: no current blob (only kept versions)
		kept []ver
	}
	const keep = 3
	names := []string{"a", "b", "c"}
	for seed := uint64(1); seed <= 3; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		dir := t.TempDir()
		p := durablePool(t, dir)
		open := func() *Bucket {
			b, err := p.Bucket("m", BucketOptions{KeepVersions: keep, Durable: bucketDurable})
			if err != nil {
				t.Fatal(err)
			}
			if b.Durable() != bucketDurable {
				t.Fatalf("bucket durable %v, want %v", b.Durable(), bucketDurable)
			}
			return b
		}
		b := open()
		model := map[string]*mblob{}
		lastGen := func(m *mblob) uint64 {
			if len(m.kept) == 0 {
				return 0
			}
			return m.kept[len(m.kept)-1].gen
		}
		for step := range 150 {
			name := names[r.IntN(len(names))]
			m := model[name]
			if m == nil {
				m = &mblob{}
				model[name] = m
			}
			data := []byte(fmt.Sprintf("%d/%d/%s", seed, step, bytes.Repeat([]byte{'x'}, r.IntN(9000))))
			asked := r.IntN(2) == 0
			durable := asked || bucketDurable
			what := ""
			switch op := r.IntN(13); {
			case op < 3:
				what = fmt.Sprintf("put %s durable=%v", name, asked)
				if err := b.PutWith(name, data, PutOptions{Durable: asked}); err != nil {
					t.Fatal(err)
				}
				if m.cur == nil {
					m.cur = &ver{gen: 0}
				}
				m.cur.data, m.cur.durable = data, durable
			case op < 5:
				off := r.IntN(12000)
				what = fmt.Sprintf("partial put %s at %d durable=%v", name, off, asked)
				if err := b.PartialPutWith(name, int64(off), data, PutOptions{Durable: asked}); err != nil {
					t.Fatal(err)
				}
				if m.cur == nil {
					m.cur = &ver{gen: 0}
				}
				nd := append([]byte(nil), m.cur.data...)
				if len(nd) < off+len(data) {
					nd = append(nd, make([]byte, off+len(data)-len(nd))...)
				}
				copy(nd[off:], data)
				m.cur.data, m.cur.durable = nd, durable
			case op < 6:
				k, v := fmt.Sprint("k", r.IntN(2)), fmt.Sprint(step)
				what = fmt.Sprintf("tag %s %s=%s", name, k, v)
				err := b.SetTag(name, k, v)
				if (m.cur == nil) != (err != nil) {
					t.Fatalf("seed %d step %d: %s: %v", seed, step, what, err)
				}
				if m.cur != nil {
					if m.cur.tags == nil {
						m.cur.tags = map[string]string{}
					}
					m.cur.tags[k] = v
				}
			case op < 8:
				what = fmt.Sprintf("put version %s durable=%v", name, asked)
				v, err := b.PutVersion(name, data, PutOptions{Durable: asked})
				if err != nil {
					t.Fatal(err)
				}
				gen := lastGen(m)
				var tags map[string]string
				if m.cur != nil {
					gen = m.cur.gen
					if gen == 0 {
						gen = lastGen(m) + 1
					}
					tags = m.cur.tags
					m.kept = append(m.kept, ver{gen: gen, data: m.cur.data, durable: m.cur.durable})
				}
				m.cur = &ver{gen: gen + 1, data: data, durable: durable, tags: tags}
				if v != m.cur.gen {
					t.Fatalf("seed %d step %d: %s: version %d, model %d", seed, step, what, v, m.cur.gen)
				}
				if extra := len(m.kept) + 1 - keep; extra > 0 {
					m.kept = m.kept[extra:]
				}
			case op < 10:
				what = "delete " + name
				err := b.Delete(name)
				if (m.cur == nil && len(m.kept) == 0) != (err != nil) {
					t.Fatalf("seed %d step %d: %s: %v", seed, step, what, err)
				}
				delete(model, name)
			default:
				what = "restart"
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				p = durablePool(t, dir)
				b = open()
				for n, m := range model {
					if m.cur != nil && !m.cur.durable {
						m.cur = nil
					}
					m.kept = slices.DeleteFunc(m.kept, func(v ver) bool { return !v.durable })
					if m.cur == nil && len(m.kept) == 0 {
						delete(model, n)
					}
				}
			}
			if m := model[name]; m != nil && m.cur == nil && len(m.kept) == 0 {
				delete(model, name) // a tag on no blob
			}
			for _, n := range names {
				m := model[n]
				got, err := b.Get(n)
				if m == nil || m.cur == nil {
					if err == nil {
						t.Fatalf("seed %d step %d (%s): %s has %d bytes, model none", seed, step, what, n, len(got))
					}
				} else if err != nil || !bytes.Equal(got, m.cur.data) {
					t.Fatalf("seed %d step %d (%s): %s: %q..., %v; model %q...", seed, step, what, n, head(got), err, head(m.cur.data))
				} else if info, _ := b.Stat(n); !maps.Equal(info.Tags, m.cur.tags) || info.Durable != m.cur.durable {
					t.Fatalf("seed %d step %d (%s): %s: tags %v durable %v; model %v, %v", seed, step, what, n, info.Tags,
						info.Durable, m.cur.tags, m.cur.durable)
				}
				vs, err := b.ListVersions(n)
				if m == nil {
					if err == nil {
						t.Fatalf("seed %d step %d (%s): %s lists versions %+v, model none", seed, step, what, n, vs)
					}
					continue
				}
				if err != nil || len(vs) != len(m.kept)+btoi(m.cur != nil) {
					t.Fatalf("seed %d step %d (%s): %s versions %+v, %v; model %d kept, current %v", seed, step, what, n, vs, err,
						len(m.kept), m.cur != nil)
				}
				for i, kv := range m.kept {
					got, err := b.GetVersion(n, kv.gen)
					if err != nil || !bytes.Equal(got, kv.data) || vs[i].Version != kv.gen || vs[i].Durable != kv.durable {
						t.Fatalf("seed %d step %d (%s): %s version %d: %q, %v, listed %+v", seed, step, what, n, kv.gen,
							head(got), err, vs[i])
					}
				}
			}
			checkAccounting(t, p)
		}
		p.Close()
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
