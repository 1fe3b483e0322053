package cte

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/runtime"
)

func sampleInfo(tags map[string]string) Info {
	return Info{Name: "b", Page: 1, Size: 4096, Tier: "ram", Dirty: true, Version: 3, Reads: 9, Score: 0.5,
		LastUsed: time.Unix(0, 1234567890), Tags: tags}
}

// FuzzReadInfo: no panic; an error returns the zero Info; a decoded Info
// with at most one tag (map order) encodes back to its bytes.
func FuzzReadInfo(f *testing.F) {
	for _, tags := range []map[string]string{nil, {"k": "v"}, {"a": "1", "b": "2"}} {
		w := runtime.NewArgWriter(nil)
		WriteInfo(w, sampleInfo(tags))
		f.Add(w.Bytes())
	}
	w := runtime.NewArgWriter(nil)
	WriteInfo(w, sampleInfo(nil))
	f.Add(append(w.Bytes()[:len(w.Bytes())-4], 0xff, 0xff, 0, 0)) // too many tags
	f.Fuzz(func(t *testing.T, b []byte) {
		r := runtime.NewArgReader(b)
		i := ReadInfo(r)
		if err := r.Err(); err != nil {
			if !zeroInfo(i) {
				t.Fatalf("error %v with a partial info %+v", err, i)
			}
			return
		}
		if r.Done() != nil {
			return // trailing bytes: not ReadInfo's to refuse
		}
		if len(i.Tags) > 1 {
			return
		}
		w := runtime.NewArgWriter(nil)
		WriteInfo(w, i)
		if !bytes.Equal(w.Bytes(), b) {
			t.Fatalf("info %+v does not encode back to %x", i, b)
		}
	})
}

func zeroInfo(i Info) bool {
	return i.Name == "" && i.Page == 0 && i.Size == 0 && i.Tier == "" && !i.Dirty && i.Version == 0 &&
		i.Reads == 0 && math.Float64bits(i.Score) == 0 && i.LastUsed.IsZero() && i.Tags == nil
}

func ref(name string) *runtime.ArgWriter {
	w := runtime.NewArgWriter(nil)
	WriteRef(w, 0, name)
	return w
}

// FuzzMethods runs one method of the module with the input as its
// arguments, from a session, on a pool holding one blob: no panic, and
// arguments that do not decode (ErrBadArgs) leave no result.
func FuzzMethods(f *testing.F) {
	ids := map[string]uint8{}
	for i, name := range New(nil).Names() {
		ids[name] = uint8(i)
	}
	add := func(method string, args []byte, in []byte) { f.Add(ids[method], args, in) }
	add(MOpen, runtime.NewArgWriter(nil).String("a").Bytes(), nil)
	add(MClose, runtime.NewArgWriter(nil).U64(1).Bytes(), nil)
	add(MPut, ref("a").String("b").Bytes(), []byte("data"))
	add(MGet, ref("a").String("b").Bytes(), nil)
	add(MPartialPut, ref("a").String("b").I64(2).Bytes(), []byte("xy"))
	add(MPartialGet, ref("a").String("b").I64(1).Bytes(), nil)
	add(MDelete, ref("a").String("b").Bytes(), nil)
	add(MList, ref("a").Bytes(), nil)
	add(MStat, ref("a").String("b").Bytes(), nil)
	add(MSetTag, ref("a").String("b").String("k").String("v").Bytes(), nil)
	add(MDeleteTag, ref("a").String("b").String("k").Bytes(), nil)
	add(MBuckets, nil, nil)
	add(MDeleteBucket, runtime.NewArgWriter(nil).String("a").Bytes(), nil)
	add(MStats, nil, nil)
	add(MGet, runtime.NewArgWriter(nil).U64(7).String("b").Bytes(), nil) // a handle that is not open
	add(MPartialGet, ref("a").String("b").I64(-1).Bytes(), nil)
	add(MOpenWith, runtime.NewArgWriter(nil).String("a/b").U32(0o640).U32(3).Bytes(), nil)
	add(MOpenWith, runtime.NewArgWriter(nil).String("a/d").U32(0).U32(0).U32(BucketFlagDurable).Bytes(), nil)
	add(MOpenWith, runtime.NewArgWriter(nil).String("a/d").U32(0).U32(0).U32(0xff).Bytes(), nil)
	add(MSetDurable, ref("a").Bool(true).Bytes(), nil)
	add(MSetDurable, ref("a").U8(2).Bytes(), nil)
	add(MChmod, ref("a").U32(0o644).Bytes(), nil)
	add(MBucketStat, ref("a").Bytes(), nil)
	add(MPutWith, ref("a").String("c").U32(0).Bytes(), []byte("data"))
	add(MPutVersion, ref("a").String("b").U32(0).Bytes(), []byte("v2"))
	add(MGetVersion, ref("a").String("b").U64(1).Bytes(), nil)
	add(MListVersions, ref("a").String("b").Bytes(), nil)
	add(MBuckets, runtime.NewArgWriter(nil).String("a").Bytes(), nil)
	qw := runtime.NewArgWriter(nil)
	WriteQuery(qw, Query{Prefix: "a", Tags: []TagFilter{{Key: "k", Range: true, Min: "1"}}, MaxSize: 10})
	add(MQuery, qw.Bytes(), nil)
	f.Fuzz(func(t *testing.T, method uint8, args, in []byte) {
		pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
			{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 4 << 20}}})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		m := New(pool)
		s := runtime.NewSession(1, 100, 1000, 1000)
		defer s.Close()
		run := func(method uint32, args, in []byte) (runtime.Result, error) {
			return m.Run(context.Background(), &runtime.Task{MethodID: method, Args: args, In: in,
				Out: make([]byte, 4096), Session: s})
		}
		if _, err := run(uint32(ids[MOpen]), runtime.NewArgWriter(nil).String("a").Bytes(), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := run(uint32(ids[MPut]), ref("a").String("b").Bytes(), []byte("hello")); err != nil {
			t.Fatal(err)
		}
		res, err := run(uint32(method)%uint32(len(m.MethodTable)), args, in)
		if errors.Is(err, runtime.ErrBadArgs) && res != (runtime.Result{}) {
			t.Fatalf("undecodable arguments (%v) with a result %+v", err, res)
		}
	})
}

// FuzzReadQuery: the query a client sends. No panic; an error returns
// the zero Query; a decoded one encodes back to its bytes.
func FuzzReadQuery(f *testing.F) {
	w := runtime.NewArgWriter(nil)
	WriteQuery(w, Query{Prefix: "sim/run1", Tags: []TagFilter{{Key: "step", Range: true, Min: "1", Max: "9"},
		{Key: "var", Value: "t"}}, MinSize: 1, MaxSize: 1 << 20, ModifiedAfter: time.Unix(0, 12345), Limit: 10})
	f.Add(w.Bytes())
	f.Add(w.Bytes()[:20])
	f.Add(runtime.NewArgWriter(nil).String("").U32(MaxQueryTags + 1).Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		r := runtime.NewArgReader(b)
		q := ReadQuery(r)
		if r.Err() != nil {
			if q.Prefix != "" || q.Tags != nil || q.MinSize != 0 || q.MaxSize != 0 || q.Limit != 0 ||
				!q.ModifiedAfter.IsZero() || !q.ModifiedBefore.IsZero() {
				t.Fatalf("error %v with a partial query %+v", r.Err(), q)
			}
			return
		}
		if r.Done() != nil {
			return
		}
		w := runtime.NewArgWriter(nil)
		WriteQuery(w, q)
		if !bytes.Equal(w.Bytes(), b) {
			t.Fatalf("query %+v does not encode back to %x", q, b)
		}
	})
}

// FuzzReadBucketStat: the bucket_stat reply a client decodes, with or
// without its last byte (DurableBucket, which older daemons do not send).
// No panic; an error returns the zero BucketStat; a decoded one encodes
// back to its bytes (less an optional last byte that said false).
func FuzzReadBucketStat(f *testing.F) {
	w := runtime.NewArgWriter(nil)
	WriteBucketStat(w, BucketStat{Name: "sim/run1", Owner: 1000, Group: 100, Mode: 0o640,
		Created: time.Unix(0, 98765), KeepVersions: 4, Durable: true, DurableBucket: true})
	f.Add(w.Bytes())
	f.Add(w.Bytes()[:len(w.Bytes())-1]) // from a daemon without DurableBucket
	f.Add(append(w.Bytes()[:len(w.Bytes())-1], 2))
	f.Add(append(w.Bytes()[:len(w.Bytes())-1], 0)) // a false one sent anyway
	f.Add(w.Bytes()[:10])
	f.Fuzz(func(t *testing.T, b []byte) {
		r := runtime.NewArgReader(b)
		s := ReadBucketStat(r)
		if r.Err() != nil {
			if s != (BucketStat{}) {
				t.Fatalf("error %v with a partial stat %+v", r.Err(), s)
			}
			return
		}
		if r.Done() != nil {
			return
		}
		w := runtime.NewArgWriter(nil)
		WriteBucketStat(w, s)
		if want := w.Bytes(); !bytes.Equal(want, b) && !bytes.Equal(append(bytes.Clone(want), 0), b) {
			t.Fatalf("stat %+v does not encode back to %x", s, b)
		}
	})
}
