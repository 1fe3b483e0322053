package shm

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// msg is a ring entry: producer id, per-producer sequence, and a check word.
type msg struct {
	Producer uint32
	Seq      uint32
	Check    uint64
}

func msgCheck(p, seq uint32) uint64 { return uint64(p)*0x9E3779B97F4A7C15 ^ uint64(seq) }

func TestRingBasic(t *testing.T) {
	s := newMemfdSegment(t, 1<<16)
	r, err := NewRing[msg](s, 5)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cap() != 8 {
		t.Fatalf("Cap = %d, want 8", r.Cap())
	}
	for i := 0; i < 8; i++ {
		if err := r.TryEnqueue(msg{Seq: uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.TryEnqueue(msg{}); !errors.Is(err, ErrFull) {
		t.Fatalf("enqueue on full ring: %v", err)
	}
	start := time.Now()
	if err := r.Enqueue(msg{}, 30*time.Millisecond); !errors.Is(err, ErrFull) {
		t.Fatalf("bounded enqueue on full ring: %v", err)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Error("bounded enqueue returned before its timeout")
	}
	if r.Len() != 8 {
		t.Errorf("Len = %d", r.Len())
	}
	r2, err := OpenRing[msg](s, r.Pointer())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		m, err := r2.Dequeue(time.Second)
		if err != nil || m.Seq != uint32(i) {
			t.Fatalf("Dequeue = %v, %v; want seq %d", m, err, i)
		}
	}
	if _, err := r.Dequeue(20 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Dequeue on empty: %v", err)
	}
	if _, err := OpenRing[uint64](s, r.Pointer()); !errors.Is(err, ErrBadType) {
		t.Errorf("open with another entry type: %v", err)
	}
}

// TestRingWakesSleeper: a consumer asleep on the futex (no spin) is woken by
// a producer, and a producer asleep on a full ring by the consumer.
func TestRingWakesSleeper(t *testing.T) {
	s := newMemfdSegment(t, 1<<16)
	r, _ := NewRing[uint64](s, 1)
	r.Spin = 0
	got := make(chan uint64)
	go func() {
		v, err := r.Dequeue(10 * time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	time.Sleep(20 * time.Millisecond) // let it fall asleep
	if err := r.TryEnqueue(42); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != 42 {
		t.Fatalf("got %d", v)
	}
	r.TryEnqueue(1)
	r.TryEnqueue(1)
	done := make(chan error)
	go func() { done <- r.Enqueue(2, 10*time.Second) }()
	time.Sleep(20 * time.Millisecond)
	for range 2 {
		if v, err := r.Dequeue(time.Second); v != 1 || err != nil {
			t.Fatalf("got %d, %v", v, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, err := r.Dequeue(time.Second); v != 2 || err != nil {
		t.Fatalf("got %d, %v", v, err)
	}
}

// produce sends n messages of producer id into the ring, waiting when full.
func produce(s *Segment, p Pointer, id uint32, n int) error {
	r, err := OpenRing[msg](s, p)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := r.Enqueue(msg{Producer: id, Seq: uint32(i), Check: msgCheck(id, uint32(i))}, 10*time.Second); err != nil {
			return fmt.Errorf("producer %d message %d: %w", id, i, err)
		}
	}
	return nil
}

// consume takes total messages and checks exactly-once, per-producer order.
func consume(r *Ring[msg], producers, total int) error {
	next := make([]uint32, producers)
	for i := 0; i < total; i++ {
		m, err := r.Dequeue(10 * time.Second)
		if err != nil {
			return fmt.Errorf("after %d messages: %w", i, err)
		}
		if int(m.Producer) >= producers || m.Seq != next[m.Producer] || m.Check != msgCheck(m.Producer, m.Seq) {
			return fmt.Errorf("message %+v out of order (next %v)", m, next)
		}
		next[m.Producer]++
	}
	if m, ok := r.TryDequeue(); ok {
		return fmt.Errorf("extra message %+v", m)
	}
	return nil
}

func TestRingGoroutines(t *testing.T) {
	const producers, n = 4, 20000
	s := newMemfdSegment(t, 1<<20)
	r, _ := NewRing[msg](s, 64)
	var wg sync.WaitGroup
	errs := make([]error, producers)
	for p := range producers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[p] = produce(s, r.Pointer(), uint32(p), n) }()
	}
	if err := consume(r, producers, producers*n); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestRingProcesses: four producer processes, one consumer (this one).
func TestRingProcesses(t *testing.T) {
	const producers, n = 4, 20000
	s, name := newPosixSegment(t, 1<<20)
	r, _ := NewRing[msg](s, 64)
	var cs []*child
	for p := 0; p < producers; p++ {
		cs = append(cs, startChild(t, "producer", name, []uint64{r.Pointer().Offset, uint64(p), n}))
	}
	if err := consume(r, producers, producers*n); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if err := c.wait(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRingHostileHeader(t *testing.T) {
	s := newMemfdSegment(t, 1<<16)
	r, _ := NewRing[msg](s, 8)
	// A peer scribbles on positions and sequence numbers: operations stay in
	// bounds and return errors or garbage entries, never crash or hang.
	store64(r.mem, rTail, 1<<63+5)
	store64(r.mem, rHead, 12345)
	for i := uint64(0); i < 8; i++ {
		store64(r.mem, ringHdr+i*r.slot, 0xFFFF_FFFF_FFFF_FFF0+i)
	}
	if err := r.TryEnqueue(msg{}); err == nil {
		t.Log("enqueue into scribbled ring accepted")
	}
	r.TryDequeue()
	if _, err := r.Dequeue(10 * time.Millisecond); err == nil {
		t.Log("dequeue from scribbled ring returned an entry")
	}
	store64(r.mem, rCap, 1<<40)
	if _, err := OpenRing[msg](s, r.Pointer()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("open with huge capacity: %v", err)
	}
}

// echo answers every request with the same value until it gets ^0.
func echo(s *Segment, reqP, respP Pointer, spin time.Duration) error {
	req, err := OpenRing[uint64](s, reqP)
	if err != nil {
		return err
	}
	resp, err := OpenRing[uint64](s, respP)
	if err != nil {
		return err
	}
	req.Spin, resp.Spin = spin, spin
	for {
		v, err := req.Dequeue(30 * time.Second)
		if err != nil {
			return err
		}
		if err := resp.Enqueue(v, 10*time.Second); err != nil {
			return err
		}
		if v == ^uint64(0) {
			return nil
		}
	}
}
