//go:build linux

package fl

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/quant/esu"
)

// junk makes n junk update messages for site: half random bytes, half
// the site's own signed update with one byte flipped (well formed, the
// site's key ID: the signature must be checked to refuse it).
func (f *fleet) junk(t *testing.T, r *coordinator.Round, dims, n int) [][]byte {
	t.Helper()
	payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: make([]float32, dims)}, esu.DefaultOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	site := f.sites[len(f.sites)-1]
	good, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: 1_000_000, Round: r.Round, BaseModel: r.BaseModel,
		BaseVersion: r.BaseVersion, Samples: 10}, payload, f.keys[site])
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	out := make([][]byte, n)
	for i := range out {
		if i%2 == 0 {
			b := make([]byte, 64+rng.IntN(512))
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			out[i] = b
		} else {
			b := bytes.Clone(good)
			b[len(b)-1-rng.IntN(64)] ^= 1 << rng.IntN(8)
			out[i] = b
		}
	}
	return out
}

// publishAll publishes messages onto site's update subject (as a flooding
// site would) and waits for the stream to store them all.
func publishAll(t *testing.T, js jetstream.JetStream, site string, msgs [][]byte) {
	t.Helper()
	for i, m := range msgs {
		if i%1000 == 0 { // at most 1,000 unacknowledged (the client stalls beyond 4,000)
			waitPublished(t, js)
		}
		if _, err := js.PublishAsync(federated.UpdateSubjectPrefix+site, m, jetstream.WithMsgID(fmt.Sprintf("junk-%s-%d", site, i))); err != nil {
			t.Fatal(err)
		}
	}
	waitPublished(t, js)
}

func waitPublished(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		t.Fatal("the stream did not store the messages")
	}
}

// TestJunkDoesNotDelayHonestUpdate reproduces finding 5 of issue 21: junk
// was verified one message at a time (about 200 a second, each refusal
// its own fsync), so 10,000 junk messages delayed an honest update by
// about 45 s. A compromised site publishes 10,000 junk messages (random
// bytes, and its own update with a flipped byte, whose signature must be
// checked); then an honest site publishes its update: the coordinator
// accepts it, and the site has its verdict, within 5 s of its publication
// (the acceptance bound: verification is parallel and the refusals are
// committed in groups).
func TestJunkDoesNotDelayHonestUpdate(t *testing.T) {
	srv := fltest.StartNATS(t)
	f := newFleet(t, srv.ClientURL(), 2)
	cfg := f.coordinatorConfig(t.TempDir())
	start := fltest.SmallModel(t, 1)
	c, _ := f.runCoordinator(cfg, start)
	r, err := c.StartRound(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	junk := f.junk(t, r, start.Net.NumParams(), n)
	honest := f.sites[0]
	nc := fltest.Connect(t, srv.ClientURL(), honest)
	acks := make(chan *federated.Ack, 16)
	if _, err := nc.Subscribe(federated.AckSubjectPrefix+honest, func(m *nats.Msg) {
		if a, err := federated.DecodeAck(m.Data); err == nil {
			acks <- a
		}
	}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(fltest.Connect(t, srv.ClientURL(), "flooder"))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	publishAll(t, js, f.sites[1], junk)
	flooded := time.Since(began)
	hjs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	values := make([]float32, start.Net.NumParams())
	for i := range values {
		values[i] = 0.01
	}
	sent := time.Now()
	f.publishUpdate(t, hjs, honest, 1, r, values, 100)
	select {
	case a := <-acks:
		took := time.Since(sent)
		rej, _ := c.Rejects()
		var refused uint64
		for _, v := range rej {
			refused += v
		}
		t.Logf("%d junk messages stored in %v; the honest update's verdict %s %v after its publication (%d junk refused by then: %v)",
			n, flooded.Round(time.Millisecond), a.Status, took.Round(time.Millisecond), refused, rej)
		if a.Status != federated.Accepted {
			t.Fatalf("honest update: %+v", a)
		}
		switch {
		case raceEnabled:
			// the bound is the production build's: under the race
			// detector `make test` runs this test a second time without
			t.Logf("race detector on: the 5 s bound is checked by the run without it")
		case took > 5*time.Second:
			t.Fatalf("the honest update was accepted %v after its publication, behind %d junk messages: want within 5 s", took, n)
		}
	case <-time.After(60 * time.Second):
		rej, _ := c.Rejects()
		t.Fatalf("no verdict on the honest update 60 s after its publication, behind %d junk messages (refused so far: %v)", n, rej)
	}
}

// lockedBuffer is a log sink for several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

// TestBoundedGrowth reproduces finding 4 of issue 21: the update stream
// had no limits (every acknowledged update kept), the audit log had no
// bound, and on a full disk updates_total counted every retry of a
// message (130,712 for 8,000) while identical ERROR lines filled the log.
// With the defaults: the stream has age and size limits and what the
// coordinator judged is removed from it; after 12,000 refusals the audit
// log holds at most its retention (10,000 events); and with coordinator.db
// on a full file system (a 64 MiB tmpfs, root only) 2,000 junk messages
// are retried without being counted and with the log rate-limited, then,
// space freed, counted exactly once each.
func TestBoundedGrowth(t *testing.T) {
	t.Run("stream and audit log", func(t *testing.T) {
		srv := fltest.StartNATS(t)
		f := newFleet(t, srv.ClientURL(), 2)
		dir := t.TempDir()
		cfg := f.coordinatorConfig(dir)
		start := fltest.SmallModel(t, 1)
		c, stop := f.runCoordinator(cfg, start)
		r, err := c.StartRound(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(fltest.Connect(t, srv.ClientURL(), "flooder"))
		if err != nil {
			t.Fatal(err)
		}
		const n = 12_000 // above the audit log's retention
		publishAll(t, js, f.sites[1], f.junk(t, r, start.Net.NumParams(), n))
		fltest.Eventually(t, 300*time.Second, "every junk message refused", func() (bool, string) {
			rej, _ := c.Rejects()
			var k uint64
			for _, v := range rej {
				k += v
			}
			return k >= n, fmt.Sprint(rej)
		})
		s, err := js.Stream(context.Background(), federated.UpdateStream)
		if err != nil {
			t.Fatal(err)
		}
		cfgS := s.CachedInfo().Config
		if cfgS.MaxAge <= 0 || cfgS.MaxBytes <= 0 {
			t.Errorf("update stream limits: max age %v, max bytes %d: want both set", cfgS.MaxAge, cfgS.MaxBytes)
		}
		fltest.Eventually(t, 20*time.Second, "the judged updates removed from the stream", func() (bool, string) {
			info, err := s.Info(context.Background())
			if err != nil {
				return false, err.Error()
			}
			return info.State.Msgs == 0, fmt.Sprintf("%d messages, %d bytes", info.State.Msgs, info.State.Bytes)
		})
		stop()
		db, err := bolt.Open(filepath.Join(dir, "coordinator.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var events int
		_ = db.View(func(tx *bolt.Tx) error { events = tx.Bucket([]byte("audit")).Stats().KeyN; return nil })
		t.Logf("%d refusals: %d audit events kept", n, events)
		if events > 10_000 {
			t.Errorf("%d audit events after %d refusals: want at most the retention of 10,000", events, n)
		}
	})
	t.Run("full disk", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("a full file system needs a tmpfs mount (root): not root")
		}
		mnt := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs for a full file system: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
		srv := fltest.StartNATS(t)
		f := newFleet(t, srv.ClientURL(), 2)
		cfg := f.coordinatorConfig(filepath.Join(mnt, "data"))
		var logs lockedBuffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		start := fltest.SmallModel(t, 1)
		c, _ := f.runCoordinator(cfg, start)
		r, err := c.StartRound(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// fill the file system
		filler := filepath.Join(mnt, "filler")
		fh, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 1<<20)
		for {
			if _, err := fh.Write(chunk); err != nil {
				if !isNoSpace(err) {
					t.Fatal(err)
				}
				break
			}
		}
		fh.Close()
		for i := 0; ; i++ { // the last pages too
			if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("small-%d", i)), make([]byte, 4096), 0o600); err != nil {
				break
			}
		}
		before := len(logs.lines())
		js, err := jetstream.New(fltest.Connect(t, srv.ClientURL(), "flooder"))
		if err != nil {
			t.Fatal(err)
		}
		const n = 2000
		publishAll(t, js, f.sites[1], f.junk(t, r, start.Net.NumParams(), n))
		// the coordinator retries its failed commits with capped backoff
		// (50 ms doubling to 5 s): wait for eight failed attempts (about
		// 6 s of retrying) and look at what they leave
		const attempts = 8
		fltest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d failed store commits", attempts), func() (bool, string) {
			e := scrape(t, c, "edgesched_coordinator_store_errors_total", "")
			return e >= attempts, fmt.Sprintf("%v store errors", e)
		})
		counted := scrape(t, c, "edgesched_coordinator_updates_total", `{reason="malformed",status="rejected"}`) +
			scrape(t, c, "edgesched_coordinator_updates_total", `{reason="bad_signature",status="rejected"}`)
		lines := logs.lines()[before:]
		same := map[string]int{}
		for _, l := range lines {
			if i := strings.Index(l, "msg="); i >= 0 {
				same[l[i:min(len(l), i+60)]]++
			}
		}
		most := 0
		for _, k := range same {
			most = max(most, k)
		}
		t.Logf("disk full for %d failed commits: %v counted for %d messages, %d log lines (at most %d alike)", attempts, counted, n, len(lines), most)
		if counted > n {
			t.Errorf("updates_total counted %v refusals for %d messages: retries counted", counted, n)
		}
		if most > 20 {
			t.Errorf("%d identical log lines over %d failed commits: want them rate-limited", most, attempts)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		fltest.Eventually(t, 60*time.Second, "every message judged once the space is back", func() (bool, string) {
			rej, _ := c.Rejects()
			k := rej[federated.ReasonMalformed] + rej[federated.ReasonSignature]
			return k >= n, fmt.Sprint(rej)
		})
		// a message counted twice would show once the stream has nothing
		// left to deliver to the coordinator
		cons, err := js.Consumer(context.Background(), federated.UpdateStream, "coordinator")
		if err != nil {
			t.Fatal(err)
		}
		fltest.Eventually(t, 60*time.Second, "the update consumer drained", func() (bool, string) {
			ci, err := cons.Info(context.Background())
			if err != nil {
				return false, err.Error()
			}
			return ci.NumPending == 0 && ci.NumAckPending == 0 && ci.NumRedelivered == 0, fmt.Sprintf("%d pending, %d unacked, %d redelivered", ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
		})
		counted = scrape(t, c, "edgesched_coordinator_updates_total", `{reason="malformed",status="rejected"}`) +
			scrape(t, c, "edgesched_coordinator_updates_total", `{reason="bad_signature",status="rejected"}`)
		rej, _ := c.Rejects()
		if counted != n || rej[federated.ReasonMalformed]+rej[federated.ReasonSignature] != n {
			t.Errorf("after the disk freed: metric %v, store %v, want %d each", counted, rej, n)
		}
	})
}

func isNoSpace(err error) bool {
	var errno syscall.Errno
	for e := err; e != nil; {
		if en, ok := e.(syscall.Errno); ok {
			errno = en
			break
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return errno == syscall.ENOSPC
}
