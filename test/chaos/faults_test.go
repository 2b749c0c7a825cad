package chaos

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

// action is something the scheduler does later: a heal or a restart.
type action struct {
	at   time.Time
	what string
	do   func()
}

// scheduler injects faults on the cluster from one goroutine (the
// test's): everything it touches is owned by that goroutine.
type scheduler struct {
	c       *cluster
	rng     *mrand.Rand
	pending []action
	// the first faults of each class go through every enabled kind once,
	// in a seeded order, so even a short run has each kind
	agentFirst, infraFirst []string
	agentKinds, infraKinds []weighted
	log                    []string // what happened, for the run's fault log
	began                  time.Time
}

func newScheduler(c *cluster) *scheduler {
	s := &scheduler{c: c, rng: mrand.New(mrand.NewPCG(c.cfg.seed, 0x5c4ed)), began: time.Now()}
	for _, w := range agentFaults {
		if c.cfg.faults[w.kind] {
			s.agentKinds = append(s.agentKinds, w)
			s.agentFirst = append(s.agentFirst, w.kind)
		}
	}
	for _, w := range infraFaults {
		if c.cfg.faults[w.kind] {
			s.infraKinds = append(s.infraKinds, w)
			s.infraFirst = append(s.infraFirst, w.kind)
		}
	}
	s.rng.Shuffle(len(s.agentFirst), func(i, j int) { s.agentFirst[i], s.agentFirst[j] = s.agentFirst[j], s.agentFirst[i] })
	s.rng.Shuffle(len(s.infraFirst), func(i, j int) { s.infraFirst[i], s.infraFirst[j] = s.infraFirst[j], s.infraFirst[i] })
	return s
}

func (s *scheduler) logf(format string, a ...any) {
	s.log = append(s.log, fmt.Sprintf("%8.3fs ", time.Since(s.began).Seconds())+fmt.Sprintf(format, a...))
}

// later schedules do after d.
func (s *scheduler) later(d time.Duration, what string, do func()) {
	s.pending = append(s.pending, action{at: time.Now().Add(d), what: what, do: do})
	slices.SortStableFunc(s.pending, func(a, b action) int { return a.at.Compare(b.at) })
}

// runDue runs the actions whose time has come (all of them when all).
func (s *scheduler) runDue(all bool) {
	for len(s.pending) > 0 && (all || !s.pending[0].at.After(time.Now())) {
		a := s.pending[0]
		s.pending = s.pending[1:]
		s.logf("%s", a.what)
		a.do()
	}
}

// exp draws an exponential wait with the given mean.
func (s *scheduler) exp(mean time.Duration) time.Duration {
	return time.Duration(-math.Log(1-s.rng.Float64()) * float64(mean))
}

// between draws uniformly in [lo, hi].
func (s *scheduler) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

// pick draws a fault kind: the next of first while any is left (the
// coverage phase), then by weight. A kind taken from first goes back if
// inject reports it could not be injected (no free target).
func (s *scheduler) pick(first *[]string, kinds []weighted, inject func(string) bool) {
	if len(*first) > 0 {
		k := (*first)[0]
		*first = (*first)[1:]
		if !inject(k) {
			*first = append([]string{k}, *first...)
		}
		return
	}
	inject(s.draw(kinds))
}

func (s *scheduler) draw(kinds []weighted) string {
	total := 0
	for _, w := range kinds {
		total += w.weight
	}
	n := s.rng.IntN(total)
	for _, w := range kinds {
		if n < w.weight {
			return w.kind
		}
		n -= w.weight
	}
	return kinds[len(kinds)-1].kind
}

// run injects faults until the deadline, supervising the processes.
// Faults of each class come at exponential gaps (a Poisson process),
// except in the coverage phase, where they come at fixed gaps short
// enough for every enabled kind to fit in the run.
func (s *scheduler) run(until time.Time) {
	c := s.c
	agentGap := agentFaultEvery / time.Duration(len(c.agents))
	agentCover := min(agentGap, c.cfg.duration/time.Duration(2*len(s.agentFirst)+2))
	infraCover := min(infraFaultEvery, c.cfg.duration/time.Duration(len(s.infraFirst)+2))
	gap := func(first []string, cover, mean time.Duration) time.Duration {
		if len(first) > 0 {
			return cover
		}
		return s.exp(mean)
	}
	nextAgent, nextInfra := time.Now().Add(agentCover), time.Now().Add(infraCover)
	for time.Now().Before(until) {
		wake := earliest(nextAgent, nextInfra, until, time.Now().Add(100*time.Millisecond))
		if len(s.pending) > 0 {
			wake = earliest(wake, s.pending[0].at)
		}
		time.Sleep(time.Until(wake))
		s.runDue(false)
		s.supervise()
		if now := time.Now(); !now.Before(nextAgent) {
			if len(s.agentKinds) > 0 {
				s.pick(&s.agentFirst, s.agentKinds, s.agentFault)
			}
			nextAgent = now.Add(gap(s.agentFirst, agentCover, agentGap))
		}
		if now := time.Now(); !now.Before(nextInfra) {
			if len(s.infraKinds) > 0 {
				s.pick(&s.infraFirst, s.infraKinds, s.infraFault)
			}
			nextInfra = now.Add(gap(s.infraFirst, infraCover, infraFaultEvery))
		}
	}
}

func earliest(ts ...time.Time) time.Time {
	e := ts[0]
	for _, t := range ts[1:] {
		if t.Before(e) {
			e = t
		}
	}
	return e
}

// healAll runs every pending heal and restart now, supervises once (and
// runs the restarts that schedules), and disarms the coordinator: one
// restarted with a failpoint near the end of the faults would otherwise
// kill itself during the drain, with nobody left to restart it.
func (s *scheduler) healAll() {
	s.runDue(true)
	for _, a := range s.c.agents {
		a.proxy.Heal()
	}
	s.supervise()
	s.runDue(true)
	c := s.c
	if fp := c.coord.failpoint; !c.coordDown && fp != "" {
		switch {
		case !c.coord.exited():
			// SIGKILL, not SIGTERM: a coordinator still starting has no
			// handler for SIGTERM yet, and it must survive SIGKILL anyway
			c.coord.kill()
		case c.coord.unexpected():
			c.crash(c.coord)
		default:
			c.fired++ // it fired between supervise and here
		}
		c.checkBolt(c.coordDB, "coordinator.db after disarming failpoint "+fp)
		c.startCoordinator("")
		c.restarts["coordinator"]++
		s.logf("edge-coordinator restarted without its failpoint %s (the faults are over)", fp)
	}
}

// freeAgent picks a random agent no fault is holding.
func (s *scheduler) freeAgent() *agentNode {
	var free []*agentNode
	for _, a := range s.c.agents {
		if !a.busy && !a.down {
			free = append(free, a)
		}
	}
	if len(free) == 0 {
		return nil
	}
	return free[s.rng.IntN(len(free))]
}

// agentFault injects a fault of kind on a free agent; false when none
// was free.
func (s *scheduler) agentFault(kind string) bool {
	c := s.c
	if kind == faultBadInput {
		site := c.agents[s.rng.IntN(len(c.agents))].site
		c.faults[kind]++
		s.logf("%s: %s", kind, c.injectBadInput(s.rng, site))
		return true
	}
	a := s.freeAgent()
	if a == nil || (kind == faultDiskFull && !a.tmpfs) {
		c.skipped++
		return false
	}
	c.faults[kind]++
	switch kind {
	case faultDelay, faultDrop, faultCut:
		d := s.between(time.Second, 12*time.Second)
		switch kind {
		case faultDelay:
			lat := s.between(50*time.Millisecond, time.Second)
			a.proxy.SetDelay(lat)
			s.logf("%s %s: %v each way for %v", kind, a.site, lat, d)
		case faultDrop:
			a.proxy.Drop()
			s.logf("%s %s: black hole for %v", kind, a.site, d)
		case faultCut:
			a.proxy.Cut()
			s.logf("%s %s: cut for %v", kind, a.site, d)
		}
		a.busy = true
		s.later(d, "heal link "+a.site, func() { a.proxy.Heal(); a.busy = false })
	case faultReset:
		a.proxy.Reset()
		s.logf("%s %s", kind, a.site)
	case faultAgentKill, faultClock:
		a.proc.kill()
		c.checkBolt(filepath.Join(a.dataDir, "agent.db"), fmt.Sprintf("%s agent.db after kill -9", a.site))
		if kind == faultClock {
			// a third of the restarts come back on the right time
			a.skew = 0
			if s.rng.IntN(3) > 0 {
				a.skew = s.between(-10*time.Minute, 10*time.Minute).Round(time.Second)
			}
		}
		a.busy, a.down = true, true
		wait := s.between(100*time.Millisecond, 3*time.Second)
		s.logf("%s %s: kill -9, restart in %v with clock skew %v", kind, a.site, wait, a.skew)
		s.later(wait, "restart "+a.site, func() {
			c.startAgent(a)
			c.restarts["agent"]++
			a.busy = false
		})
	case faultDiskFull:
		// the disk fills while the link is down too, so the outbox has
		// to grow on it (a connected agent's outbox stays empty and its
		// store reuses its free pages: a full disk would go unnoticed)
		path, err := fillDisk(a.dataDir)
		if err != nil {
			c.t.Errorf("fill %s's disk: %v", a.site, err)
			return true
		}
		a.proxy.Cut()
		a.filler, a.busy = path, true
		d := s.between(5*time.Second, 15*time.Second)
		s.logf("%s %s: disk full and link cut for %v", kind, a.site, d)
		s.later(d, "free disk "+a.site, func() {
			if err := os.Remove(a.filler); err != nil {
				c.t.Errorf("free %s's disk: %v", a.site, err)
			}
			a.proxy.Heal()
			a.filler, a.busy = "", false
		})
	}
	return true
}

// failpoints the coordinator may be armed with, and how many hits of
// each to let pass before it kills itself (updates are frequent, model
// events one per round).
var failpoints = []struct {
	name string
	upTo int
}{
	{coordinator.FailUpdateCommitted, 40},
	{coordinator.FailRoundClosed, 3},
	{coordinator.FailModelStored, 3},
	{coordinator.FailModelPublished, 3},
}

// infraFault injects a fault of kind; false when its target is down
// already.
func (s *scheduler) infraFault(kind string) bool {
	c := s.c
	switch kind {
	case faultCoordKill, faultCoordFail:
		if c.coordDown {
			c.skipped++
			return false
		}
		c.faults[kind]++
		c.coord.kill()
		c.checkBolt(c.coordDB, fmt.Sprintf("coordinator.db after %s #%d", kind, c.faults[kind]))
		c.coordDown = true
		down := time.Now()
		fp := ""
		wait := s.between(200*time.Millisecond, 3*time.Second)
		if kind == faultCoordFail {
			f := failpoints[s.rng.IntN(len(failpoints))]
			fp = fmt.Sprintf("%s:%d", f.name, 1+s.rng.IntN(f.upTo))
			wait = 200 * time.Millisecond
		}
		s.logf("%s: kill -9, restart in %v (failpoint %q)", kind, wait, fp)
		s.later(wait, "restart edge-coordinator", func() {
			c.startCoordinator(fp)
			c.restarts["coordinator"]++
			c.coordOut += time.Since(down)
		})
	case faultNATSKill:
		if c.natsDown {
			c.skipped++
			return false
		}
		c.faults[kind]++
		c.nats.kill()
		c.natsDown = true
		down := time.Now()
		wait := s.between(500*time.Millisecond, 3*time.Second)
		s.logf("%s: kill -9, restart in %v", kind, wait)
		s.later(wait, "restart nats-server", func() {
			c.startNATS()
			c.restarts["nats"]++
			c.natsOutages += time.Since(down)
		})
	}
	return true
}

// supervise notices processes that ended without the scheduler killing
// them: a coordinator failpoint that fired (expected: checked and
// restarted), or a crash (recorded, the process restarted so the run goes
// on).
func (s *scheduler) supervise() {
	c := s.c
	if !c.natsDown && c.nats.exited() {
		c.crash(c.nats)
		c.startNATS()
		c.restarts["nats"]++
	}
	if !c.coordDown && c.coord.exited() {
		p := c.coord
		switch {
		case p.unexpected() && p.outcome() == "exit 1" && strings.Contains(tail(p.logPath, 400), noNATSAtStart):
			// edge-coordinator does not retry its first connection: it
			// exits when NATS is down as it starts (reported, not a crash)
			c.startFailures++
			s.logf("edge-coordinator exited: NATS unreachable at its start")
		case p.unexpected():
			c.crash(p)
		default:
			c.fired++
			s.logf("edge-coordinator killed itself at failpoint %s", p.failpoint)
		}
		c.checkBolt(c.coordDB, "coordinator.db after "+p.name+" ended ("+p.outcome()+", failpoint "+p.failpoint+")")
		c.coordDown = true
		down := time.Now()
		s.later(s.between(200*time.Millisecond, 2*time.Second), "restart edge-coordinator", func() {
			c.startCoordinator("")
			c.restarts["coordinator"]++
			c.coordOut += time.Since(down)
		})
	}
	for _, a := range c.agents {
		if !a.down && a.proc.exited() {
			c.crash(a.proc)
			c.checkBolt(filepath.Join(a.dataDir, "agent.db"), a.site+" agent.db after it ended on its own")
			c.startAgent(a)
			c.restarts["agent"]++
		}
	}
}

// noNATSAtStart is how edge-coordinator says it found no NATS server
// when it started.
const noNATSAtStart = "nats: no servers available for connection"

// crash records a process that ended on its own.
func (c *cluster) crash(p *proc) {
	msg := fmt.Sprintf("%s ended on its own (%s) after %v; log tail:\n%s", p.name, p.outcome(), time.Since(p.started).Round(time.Millisecond), tail(p.logPath, 1500))
	c.crashes = append(c.crashes, msg)
	c.t.Errorf("%s", msg)
}

// fillDisk fills the file system of dir with one file and returns its
// path.
func fillDisk(dir string) (string, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	free := int64(st.Bavail) * st.Bsize
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, free); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return path, fmt.Errorf("fallocate %d bytes: %w", free, err)
	}
	// whatever is left (blocks freed since Statfs), byte pages at a time
	page := make([]byte, 4096)
	for {
		if _, err := f.Write(page); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path, nil
			}
			return path, err
		}
	}
}

// badInputCounts counts the malformed and forged messages a run sent.
type badInputCounts struct {
	// Updates sent, and those the stream acknowledged, by the refusal
	// the coordinator owes them (federated.Reason*). A publish whose
	// ack was lost (a timeout, NATS killed) may still have been stored,
	// so the coordinator refuses between Stored and Sent of each.
	Sent   map[string]int `json:"updates_sent"`
	Stored map[string]int `json:"updates_stored"`
	// Core messages: junk site reports, junk acks to agents, junk admin
	// requests (and how many of those were answered).
	Reports       int `json:"reports"`
	Acks          int `json:"acks"`
	AdminRequests int `json:"admin_requests"`
	AdminAnswered int `json:"admin_answered"`
}

// forgedSeq is far above any sequence an agent reaches: were a forged
// update ever accepted, its site's later updates would all be refused as
// replays, which the run's checks catch.
const forgedSeq = 1 << 40

// injectBadInput sends one burst of malformed and forged messages aimed
// at site, directly to NATS (the harness's connection).
func (c *cluster) injectBadInput(rng *mrand.Rand, site string) string {
	if c.badInput.Sent == nil {
		c.badInput.Sent, c.badInput.Stored = map[string]int{}, map[string]int{}
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		return err.Error()
	}
	junk := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		b[0] = 'x' // never the update magic
		return b
	}
	header := func(s string) federated.UpdateHeader {
		return federated.UpdateHeader{Site: s, Seq: forgedSeq + rng.Uint64N(1<<20), Round: 1, BaseModel: strings.Repeat("0", 64),
			BaseVersion: 1, Samples: 1, Created: time.Now().UTC()}
	}
	stranger, _, _ := quant.GenerateKey(rand.Reader)
	var other string
	for _, a := range c.agents {
		if a.site != site {
			other = a.site
			break
		}
	}
	type msg struct {
		subject, reason string
		data            []byte
	}
	var msgs []msg
	msgs = append(msgs, msg{federated.UpdateSubjectPrefix + site, federated.ReasonMalformed, junk(1 + rng.IntN(2000))})
	if m, err := federated.EncodeUpdateMsg(header(site), junk(32), stranger); err == nil {
		msgs = append(msgs, msg{federated.UpdateSubjectPrefix + site, federated.ReasonSignature, m}) // signed by another key
	}
	if m, err := federated.EncodeUpdateMsg(header(site), junk(32), c.siteKeys[site]); err == nil {
		m[len(m)-70] ^= 0xff // a payload byte: the signature no longer verifies
		msgs = append(msgs, msg{federated.UpdateSubjectPrefix + site, federated.ReasonSignature, m})
	}
	if m, err := federated.EncodeUpdateMsg(header("intruder"), junk(32), stranger); err == nil {
		msgs = append(msgs, msg{federated.UpdateSubjectPrefix + "intruder", federated.ReasonUnknownSite, m})
	}
	if m, err := federated.EncodeUpdateMsg(header(site), junk(32), c.siteKeys[site]); err == nil && other != "" {
		msgs = append(msgs, msg{federated.UpdateSubjectPrefix + other, federated.ReasonSubject, m}) // relayed by another site
	}
	stored := 0
	for _, m := range msgs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.Publish(ctx, m.subject, m.data)
		cancel()
		c.badInput.Sent[m.reason]++
		if err == nil {
			c.badInput.Stored[m.reason]++
			stored++
		}
	}
	if c.nc.Publish(federated.StatusSubjectPrefix+site, junk(200)) == nil {
		c.badInput.Reports++
	}
	if c.nc.Publish(federated.AckSubjectPrefix+site, junk(100)) == nil {
		c.badInput.Acks++
	}
	c.badInput.AdminRequests++
	endpoint := []string{coordinator.EndpointRoundStatus, coordinator.EndpointModelShow, coordinator.EndpointSites, coordinator.EndpointRoundList}[rng.IntN(4)]
	if _, err := c.nc.Request(federated.AdminSubjectPrefix+"."+endpoint, junk(64), time.Second); err == nil {
		c.badInput.AdminAnswered++
	}
	return fmt.Sprintf("%d of %d bad updates stored, junk report, ack and %s request", stored, len(msgs), endpoint)
}
