package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/sirupsen/logrus"
)

type calc struct {
	MethodTable
	shut atomic.Bool
}

func newCalc() *calc {
	c := &calc{}
	c.MethodTable = MethodTable{
		{"add", func(_ context.Context, t *Task) (Result, error) {
			r := NewArgReader(t.Args)
			a, b := r.U64(), r.U64()
			return Result{Value: a + b}, r.Done()
		}},
		{"panic", func(context.Context, *Task) (Result, error) { panic("boom") }},
	}
	return c
}

func (c *calc) Name() string          { return "calc" }
func (c *calc) Methods() []string     { return c.Names() }
func (c *calc) Initialize(*Env) error { return nil }
func (c *calc) Shutdown() error       { c.shut.Store(true); return nil }

func newTestRuntime(t *testing.T) (*Runtime, *calc) {
	l := logrus.New()
	l.SetOutput(io.Discard)
	rt := New(Options{Workers: 2, Log: l})
	if err := rt.Initialize(nil); err != nil {
		t.Fatal(err)
	}
	c := newCalc()
	if err := rt.Register(c); err != nil {
		t.Fatal(err)
	}
	return rt, c
}

func TestSubmitAndWait(t *testing.T) {
	rt, c := newTestRuntime(t)
	var ids []TaskID
	for i := uint64(0); i < 100; i++ {
		ids = append(ids, rt.SubmitTask(&Task{Module: "calc", Method: "add", Args: NewArgWriter(nil).U64(i).U64(1).Bytes()}))
	}
	for i, id := range ids {
		res := rt.WaitForTask(id)
		if res.State != Completed || res.Err != nil || res.Value != uint64(i)+1 || res.ID != id {
			t.Fatalf("task %d: %+v", i, res)
		}
	}
	if res := rt.WaitForTask(ids[0]); !errors.Is(res.Err, ErrUnknownTask) {
		t.Fatalf("second wait: %+v", res)
	}
	cases := []struct {
		name string
		task Task
		want error
	}{
		{"no module", Task{Module: "nope", Method: "x"}, ErrNoModule},
		{"no method", Task{Module: "calc", Method: "mul"}, ErrNoMethod},
		{"bad id", Task{ModuleID: 9, ByID: true}, ErrNoModule},
		{"bad args", Task{Module: "calc", Method: "add", Args: []byte{1}}, ErrBadArgs},
		{"panic", Task{Module: "calc", Method: "panic"}, ErrInternal},
	}
	for _, tc := range cases {
		res := rt.WaitForTask(rt.SubmitTask(&tc.task))
		if res.State != Failed || !errors.Is(res.Err, tc.want) {
			t.Errorf("%s: %+v", tc.name, res)
		}
		if res := rt.Exec(context.Background(), &tc.task); !errors.Is(res.Err, tc.want) {
			t.Errorf("%s (Exec): %+v", tc.name, res)
		}
	}
	if err := rt.Register(newCalc()); !errors.Is(err, ErrExist) {
		t.Fatalf("duplicate register: %v", err)
	}
	if err := rt.Shutdown(); err != nil || !c.shut.Load() {
		t.Fatalf("shutdown: %v", err)
	}
	if res := rt.WaitForTask(rt.SubmitTask(&Task{Module: "calc", Method: "add"})); !errors.Is(res.Err, ErrShutdown) {
		t.Fatalf("after shutdown: %+v", res)
	}
}

func TestCodes(t *testing.T) {
	for code := uint32(0); code < uint32(len(codes)); code++ {
		if got := Code(CodeError(code)); got != code {
			t.Errorf("code %d round trips to %d", code, got)
		}
	}
	if Code(errors.New("other")) != Code(ErrInternal) {
		t.Error("unknown error is not internal")
	}
}

func TestSession(t *testing.T) {
	s := NewSession(1, 2, 3, 4)
	var closed atomic.Int32
	h, err := s.Open(closer(func() error { closed.Add(1); return nil }))
	if err != nil || h == 0 {
		t.Fatal(h, err)
	}
	if _, err := s.Handle(h + 1); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	s.Close()
	if closed.Load() != 1 || s.Handles() != 0 {
		t.Fatal("handles not closed")
	}
	if _, err := s.Open(closer(nil)); !errors.Is(err, ErrShutdown) {
		t.Fatal(err)
	}
}

type closer func() error

func (c closer) Close() error { return c() }

// FuzzArgReader: decoding never panics, and an error means the reader
// returns zero values from then on.
func FuzzArgReader(f *testing.F) {
	f.Add(NewArgWriter(nil).U64(7).String("name").Bool(true).Blob([]byte{1, 2}).Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewArgReader(b)
		_ = r.U64()
		s := r.String(16)
		_ = r.Bool()
		blob := r.Blob(1 << 20)
		if r.Err() != nil {
			if r.U32() != 0 || r.String(10) != "" || r.Done() == nil {
				t.Fatal("reads after an error are not zero")
			}
			return
		}
		if len(s) > 16 || len(blob) > len(b) {
			t.Fatalf("string %d / blob %d bytes from %d", len(s), len(blob), len(b))
		}
	})
}

// A status section added before Initialize is served by admin.status (it
// used to go to a detached admin module and be lost).
func TestAddStatusBeforeInitialize(t *testing.T) {
	l := logrus.New()
	l.SetOutput(io.Discard)
	rt := New(Options{Workers: 1, Log: l})
	defer rt.Shutdown()
	rt.AddStatus("early", func() any { return 42 })
	if err := rt.Initialize(nil); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4096)
	res := rt.Exec(context.Background(), &Task{Module: AdminModule, Method: "status", Out: out})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var st Status
	if err := json.Unmarshal(out[:res.N], &st); err != nil {
		t.Fatal(err)
	}
	if v, ok := st.Extra["early"]; !ok || v != float64(42) {
		t.Fatalf("extra %v", st.Extra)
	}
}

// TestUnknownCountsFailed: a task for an unknown module or method is
// Failed, and counted so, whether submitted or executed inline, and so is
// one refused at shutdown.
func TestUnknownCountsFailed(t *testing.T) {
	rt, _ := newTestRuntime(t)
	id := rt.SubmitTask(&Task{Module: "nosuch", Method: "x"})
	if res := rt.WaitForTask(id); res.State != Failed || !errors.Is(res.Err, ErrNoModule) {
		t.Fatalf("submitted: %+v", res)
	}
	if res := rt.Exec(context.Background(), &Task{Module: "calc", Method: "nosuch"}); res.State != Failed || !errors.Is(res.Err, ErrNoMethod) {
		t.Fatalf("exec: %+v", res)
	}
	if res := rt.Exec(context.Background(), &Task{Module: "calc", Method: "panic"}); res.State != Failed {
		t.Fatalf("panic: %+v", res)
	}
	if st := rt.Stats(); st.Failed != 3 || st.Completed != 0 {
		t.Fatalf("stats %+v, want 3 failed", st)
	}
	rt.Shutdown()
	if res := rt.Exec(context.Background(), &Task{Module: "calc", Method: "add"}); res.State != Failed || !errors.Is(res.Err, ErrShutdown) {
		t.Fatalf("after shutdown: %+v", res)
	}
	if st := rt.Stats(); st.Failed != 4 {
		t.Fatalf("stats %+v after a task refused at shutdown, want 4 failed", st)
	}
}
