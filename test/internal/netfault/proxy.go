package netfault

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// chunkSize is the most bytes a relay reads at once; queueLen is how many
// chunks a direction holds before its reader stops reading (back
// pressure: at most queueLen*chunkSize bytes are in the relay per
// direction).
const (
	chunkSize = 32 << 10
	queueLen  = 16
)

// ErrClosed is returned by methods of a closed Proxy.
var ErrClosed = errors.New("netfault: proxy closed")

// Stats counts what a Proxy did.
type Stats struct {
	// Accepted and Refused count incoming connections (refused: while
	// cut, or the target could not be dialled).
	Accepted, Refused int
	// Closed counts relayed connections closed by Cut or Reset.
	Closed int
	// Bytes relayed in both directions.
	Bytes int64
}

// Proxy relays TCP connections from its listener to a target address,
// with faults. Create with New; the zero value is not usable.
type Proxy struct {
	ln     net.Listener
	target string
	dialer net.Dialer

	mu      sync.Mutex
	delay   time.Duration
	dropped bool // black hole: nothing is forwarded
	cut     bool // connections refused
	closed  bool
	links   map[*link]struct{}
	changed chan struct{} // closed (and replaced) on every state change
	stats   Stats

	wg sync.WaitGroup
}

// link is one relayed connection: the client's side and the target's.
type link struct{ down, up net.Conn }

func (l *link) close() {
	l.down.Close()
	l.up.Close()
}

// New listens on a random loopback port and relays every connection to
// target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netfault: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, dialer: net.Dialer{Timeout: 5 * time.Second},
		links: map[*link]struct{}{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy relays to.
func (p *Proxy) Target() string { return p.target }

// change applies f under the lock and wakes every waiting writer.
func (p *Proxy) change(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
}

// SetDelay makes every chunk of bytes arrive d later than it was read (in
// both directions, so a round trip takes 2d more); 0 removes the delay.
// Throughput is unchanged: chunks wait concurrently.
func (p *Proxy) SetDelay(d time.Duration) { p.change(func() { p.delay = max(d, 0) }) }

// Drop turns the link into a black hole, as if every packet were
// dropped: connections stay open and new ones are accepted, but nothing
// is forwarded until Heal. As with TCP retransmission, what was sent
// meanwhile arrives after the heal, unless an endpoint gives up and
// closes its connection first.
func (p *Proxy) Drop() { p.change(func() { p.dropped = true }) }

// Cut closes every relayed connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.change(func() {
		p.cut = true
		p.closeLinksLocked()
	})
}

// Reset closes every relayed connection once (a flap); new connections
// are accepted as before.
func (p *Proxy) Reset() { p.change(p.closeLinksLocked) }

// Heal removes every fault: no delay, nothing dropped, connections
// accepted.
func (p *Proxy) Heal() {
	p.change(func() {
		p.delay, p.dropped, p.cut = 0, false, false
	})
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops listening, closes every connection and waits for the
// relay's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.change(p.closeLinksLocked)
	p.wg.Wait()
	return err
}

func (p *Proxy) closeLinksLocked() {
	for l := range p.links {
		l.close()
		delete(p.links, l)
		p.stats.Closed++
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			c.Close()
			p.count(func(s *Stats) { s.Refused++ })
			continue
		}
		up, err := p.dialer.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			p.count(func(s *Stats) { s.Refused++ })
			continue
		}
		l := &link{down: c, up: up}
		p.mu.Lock()
		if p.cut || p.closed {
			// cut while dialling
			p.mu.Unlock()
			l.close()
			p.count(func(s *Stats) { s.Refused++ })
			continue
		}
		p.links[l] = struct{}{}
		p.stats.Accepted++
		p.wg.Add(5) // two readers, two writers, the waiter below
		p.mu.Unlock()
		var done sync.WaitGroup
		done.Add(2)
		go p.relay(l, l.up, l.down, &done)
		go p.relay(l, l.down, l.up, &done)
		go func() {
			defer p.wg.Done()
			done.Wait()
			p.mu.Lock()
			delete(p.links, l)
			p.mu.Unlock()
		}()
	}
}

func (p *Proxy) count(f func(*Stats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.stats)
}

// chunk is bytes read at a time.
type chunk struct {
	b  []byte
	at time.Time
}

// relay copies src to dst through a queue: the reader stamps each chunk,
// the writer holds it while the link is dropped and until its due time.
// Either side failing closes the whole link. It counts as two of the
// Proxy's goroutines (reader and writer) and marks done when both end.
func (p *Proxy) relay(l *link, dst, src net.Conn, done *sync.WaitGroup) {
	q := make(chan chunk, queueLen)
	go func() { // reader
		defer p.wg.Done()
		defer close(q)
		for {
			b := make([]byte, chunkSize)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b: b[:n], at: time.Now()}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					l.close()
				}
				return
			}
		}
	}()
	defer p.wg.Done()
	defer done.Done()
	failed := false
	for c := range q {
		if failed {
			continue // drain so the reader ends
		}
		if !p.hold(l, c.at) {
			l.close()
			failed = true
			continue
		}
		if _, err := dst.Write(c.b); err != nil {
			l.close()
			failed = true
			continue
		}
		p.count(func(s *Stats) { s.Bytes += int64(len(c.b)) })
	}
	if !failed {
		// the source ended cleanly: pass the half-close on
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			l.close()
		}
	}
}

// hold waits until a chunk of link l read at `at` may be written: the
// link is not dropped and its delay has passed. False when the proxy
// closed or l was closed (cut, reset) meanwhile.
func (p *Proxy) hold(l *link, at time.Time) bool {
	for {
		p.mu.Lock()
		_, alive := p.links[l]
		closed, dropped, delay, changed := p.closed, p.dropped, p.delay, p.changed
		p.mu.Unlock()
		if closed || !alive {
			return false
		}
		if dropped {
			<-changed
			continue
		}
		wait := time.Until(at.Add(delay))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			return true
		case <-changed:
			t.Stop() // the delay or the state changed: look again
		}
	}
}
