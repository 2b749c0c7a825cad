package netfault

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// roundTrip sends a line and reads it back, within limit.
func roundTrip(c net.Conn, r *bufio.Reader, line string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetDeadline(start.Add(limit))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return 0, err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if strings.TrimSpace(got) != line {
		return 0, errors.New("echo mismatch: " + got)
	}
	return time.Since(start), nil
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func TestProxyFaults(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, p *Proxy)
	}{
		{"healthy link echoes", func(t *testing.T, p *Proxy) {
			c, r := dial(t, p)
			if _, err := roundTrip(c, r, "hello", 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}},
		{"delay adds latency both ways", func(t *testing.T, p *Proxy) {
			c, r := dial(t, p)
			p.SetDelay(100 * time.Millisecond)
			// a round trip crosses the proxy twice: at least 2 x 100 ms
			d, err := roundTrip(c, r, "slow", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if d < 200*time.Millisecond {
				t.Fatalf("round trip %v under a 100 ms delay each way, want >= 200 ms", d)
			}
			p.Heal()
			if _, err := roundTrip(c, r, "fast", 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}},
		{"drop holds bytes until heal", func(t *testing.T, p *Proxy) {
			c, r := dial(t, p)
			p.Drop()
			if _, err := roundTrip(c, r, "lost?", 150*time.Millisecond); err == nil {
				t.Fatal("an echo crossed a dropped link")
			}
			// the line sent while dropped arrives after the heal, in order
			p.Heal()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			got, err := r.ReadString('\n')
			if err != nil || got != "lost?\n" {
				t.Fatalf("after heal read %q, %v; want the held line", got, err)
			}
			if _, err := roundTrip(c, r, "again", 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}},
		{"cut closes and refuses until heal", func(t *testing.T, p *Proxy) {
			c, r := dial(t, p)
			if _, err := roundTrip(c, r, "before", 5*time.Second); err != nil {
				t.Fatal(err)
			}
			p.Cut()
			if _, err := roundTrip(c, r, "during", 2*time.Second); err == nil {
				t.Fatal("a cut connection still echoes")
			}
			c2, r2 := dial(t, p) // accepted by the listener, closed at once
			if _, err := roundTrip(c2, r2, "new", 2*time.Second); err == nil {
				t.Fatal("a new connection works while cut")
			}
			p.Heal()
			c3, r3 := dial(t, p)
			if _, err := roundTrip(c3, r3, "after", 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if s := p.Stats(); s.Closed < 1 || s.Refused < 1 {
				t.Fatalf("stats %+v: want a closed and a refused connection", s)
			}
		}},
		{"reset closes once", func(t *testing.T, p *Proxy) {
			c, r := dial(t, p)
			// relayed (not only accepted by the kernel) before the reset
			if _, err := roundTrip(c, r, "before", 5*time.Second); err != nil {
				t.Fatal(err)
			}
			p.Reset()
			if _, err := roundTrip(c, r, "during", 2*time.Second); err == nil {
				t.Fatal("a reset connection still echoes")
			}
			c2, r2 := dial(t, p)
			if _, err := roundTrip(c2, r2, "after", 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}},
		{"close ends held connections", func(t *testing.T, p *Proxy) {
			c, r := dial(t, p)
			p.Drop()
			_, _ = io.WriteString(c, "held\n")
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := r.ReadString('\n'); err == nil {
				t.Fatal("read from a closed proxy")
			}
			if err := p.Close(); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Close: %v, want ErrClosed", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newProxy(t)) })
	}
}

// TestProxyThroughputUnderDelay: a delay is latency, not a throughput cap:
// 64 chunks pipelined through a 50 ms delay take about 2 x 50 ms, not
// 64 x 50 ms.
func TestProxyThroughputUnderDelay(t *testing.T) {
	p := newProxy(t)
	p.SetDelay(50 * time.Millisecond)
	c, r := dial(t, p)
	const n = 64
	line := strings.Repeat("x", 1000)
	start := time.Now()
	go func() {
		for range n {
			if _, err := io.WriteString(c, line+"\n"); err != nil {
				return
			}
			time.Sleep(time.Millisecond) // separate chunks
		}
	}()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for i := range n {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	// sequential delays would take 64 x 2 x 50 ms = 6.4 s
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d delayed lines took %v: the delay serialises chunks", n, d)
	}
}
