package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/internal/ratelog"
)

// consumerName is the region's durable consumer of its update stream
// (federated.RegionUpdateStream; natsauth.RegionPermissions names it).
const consumerName = federated.RegionConsumer

// StreamMaxAge is how long the region's update stream keeps an update
// (the root's update stream's default, coordinator.DefaultUpdateMaxAge).
// The aggregator acks what it judged but may not purge the stream (its
// NATS permissions: create, update and info), so the age is the stream's
// only bound: without it the region's server kept every update its sites
// ever sent. An update waits that long for an aggregator that is down;
// its round is long over by then.
const StreamMaxAge = coordinator.DefaultUpdateMaxAge

// Run serves until ctx ends: it consumes the region's update stream on
// local (the region's NATS server, or its leaf-node hub's JetStream
// domain), answers its sites there, and on root follows the root's round
// (the state bucket's announcement, then the admin endpoint
// round.regional), seals the region's aggregate when every site of the
// region contributed or Lead before the round's deadline, and forwards
// the outbox to the root's regional stream. Every goroutine it starts is
// stopped before it returns; an ErrStore error stops it. Its stream and
// consumer on local are created (or updated) first, a transient failure
// (bus.Transient: the server's JetStream not ready) retried with capped,
// jittered backoff until ctx ends; a timeout behind which the server
// refused the user the request (bus.Denied) ends Run.
func (g *Aggregator) Run(ctx context.Context, local, root *nats.Conn) error {
	ljs, err := jetstream.New(local)
	if err != nil {
		return fmt.Errorf("local jetstream: %w", err)
	}
	rjs, err := jetstream.New(root)
	if err != nil {
		return fmt.Errorf("root jetstream: %w", err)
	}
	// the stream takes the region's sites' subjects only, under the
	// region's name (what its NATS permissions allow: natsauth)
	stream := federated.RegionUpdateStream(g.cfg.Region)
	var subjects []string
	for _, s := range g.cfg.Sites.Sites() {
		subjects = append(subjects, federated.UpdateSubjectPrefix+s)
	}
	// (the region's server not ready yet, its JetStream starting: retried
	// with capped, jittered backoff until ctx ends; a refusal ends Run)
	var cons jetstream.Consumer
	for bo := backoff.New(250*time.Millisecond, 5*time.Second, g.cfg.Seed^0x5e70); ; {
		_, err := ljs.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: stream,
			Subjects: subjects, Storage: jetstream.FileStorage,
			Duplicates: 2 * time.Minute, MaxMsgSize: federated.MaxUpdateBytes, MaxAge: StreamMaxAge})
		if err != nil {
			err = fmt.Errorf("create the region's update stream: %w", err)
		} else {
			cons, err = ljs.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: consumerName,
				AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 4096})
			if err != nil {
				err = fmt.Errorf("create the region's update consumer: %w", err)
			}
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil // stopped
		}
		if !bus.Transient(err) {
			return err
		}
		if denied := bus.Denied(local, err, stream); denied != nil {
			return denied
		}
		g.log.Warn("the region's server is not ready; retrying", "err", err)
		if !bo.Sleep(ctx) {
			return nil
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errc <- g.consume(ctx, local, rjs, cons) })
	wg.Go(func() { errc <- g.follow(ctx, root, rjs) })
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
		cancel()
	}
	wg.Wait()
	if first != nil && !errors.Is(first, context.Canceled) {
		return first
	}
	return nil
}

// consume judges the region's updates in groups of at most Batch until
// ctx ends; a group's messages are acked after its commit, those to be
// relayed (a round that does not sum) once the root's update stream took
// them (a message whose relay failed comes back, is judged the same again
// and relayed again: the root's stream drops a copy by its MsgID, its
// verdicts one past that window). The sites of relayed updates hear from
// the root. Every fetched message holds its bytes of a budget of
// MaxInflightBytes (ingest.Budget) until it is acked or nacked, or
// dropped when ctx ends.
func (g *Aggregator) consume(ctx context.Context, local *nats.Conn, rjs jetstream.JetStream, cons jetstream.Consumer) error {
	budget, err := ingest.NewBudget(g.cfg.MaxInflightBytes)
	if err != nil {
		return fmt.Errorf("region ingest: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fetched := make(chan jetstream.Msg, 2*g.cfg.Batch)
	var wg sync.WaitGroup
	wg.Go(func() { g.fetchLoop(ctx, cons, budget, fetched) })
	defer func() {
		cancel()
		wg.Wait()
		ingest.ReleaseLeft(budget, fetched, msgBytes) // (the stream delivers them again)
	}()
	bo := backoff.New(50*time.Millisecond, 5*time.Second, g.cfg.Seed^0x5e61)
	for ctx.Err() == nil {
		// wait for one message, then take what else has arrived (up to
		// Batch): while a group is committed the next one gathers, so
		// the slower the store the larger the groups (each commit writes
		// the round's sums once)
		var msgs []jetstream.Msg
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-fetched:
			msgs = append(msgs, m)
		}
	fill:
		for len(msgs) < g.cfg.Batch {
			select {
			case m := <-fetched:
				msgs = append(msgs, m)
			default:
				break fill
			}
		}
		group := make([]*incoming, len(msgs))
		for i, m := range msgs {
			group[i] = &incoming{subject: m.Subject(), data: m.Data()}
		}
		if len(group) == 0 {
			continue
		}
		if err := g.judge(group); err != nil {
			for _, m := range msgs {
				_ = m.NakWithDelay(time.Second)
				budget.Release(msgBytes(m))
			}
			if errors.Is(err, ErrStore) {
				return err
			}
			g.log.Warn("recording update verdicts failed; the stream delivers them again", "err", err)
			if !bo.Sleep(ctx) {
				break
			}
			continue
		}
		bo.Reset()
		for i, m := range msgs {
			if in := group[i]; in.relay {
				if err := g.relay(ctx, rjs, in); err != nil {
					g.log.Warn("relay an update to the root", "site", in.Msg.Header.Site, "seq", in.Msg.Header.Seq, "err", err)
					_ = m.NakWithDelay(time.Second)
				} else {
					_ = m.Ack()
				}
				continue
			}
			_ = m.Ack()
			if a := group[i].ack; a != nil {
				if raw, err := federated.Marshal(a); err == nil {
					_ = local.Publish(federated.AckSubjectPrefix+a.Site, raw)
				}
			}
		}
		for _, m := range msgs {
			budget.Release(msgBytes(m))
		}
	}
	return ctx.Err()
}

// fetchLoop pulls the region's updates (at most bus.FetchBytes a
// request) and hands them on in stream order until ctx ends, each once
// its bytes fit in budget; fetch errors are retried with capped,
// jittered backoff.
func (g *Aggregator) fetchLoop(ctx context.Context, cons jetstream.Consumer, budget *ingest.Budget, fetched chan<- jetstream.Msg) {
	bo := backoff.New(50*time.Millisecond, 5*time.Second, g.cfg.Seed^0xfe7c)
	for ctx.Err() == nil {
		_, err := bus.Fetch(ctx, cons, g.cfg.Batch, func(m jetstream.Msg) error {
			if !ingest.Admit(ctx, budget, msgBytes(m), fetched, m) {
				return ctx.Err()
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			g.log.Warn("fetch updates", "err", err)
			if !bo.Sleep(ctx) {
				return
			}
			continue
		}
		bo.Reset()
	}
}

// relay publishes a verified update to the root's update stream, on its
// site's subject with its MsgID, as the site would have.
func (g *Aggregator) relay(ctx context.Context, rjs jetstream.JetStream, in *incoming) error {
	h := in.Msg.Header
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := rjs.Publish(pctx, federated.UpdateSubjectPrefix+h.Site, in.data, jetstream.WithMsgID(federated.MsgID(h.Site, h.Seq)))
	return err
}

// follow tracks the root's round every PollInterval: opens a new one,
// seals the current one Lead before its deadline, and forwards the
// outbox. Errors talking to the root (a WAN outage) are logged and
// retried on the next tick; ErrStore stops it.
func (g *Aggregator) follow(ctx context.Context, root *nats.Conn, rjs jetstream.JetStream) error {
	t := time.NewTicker(g.cfg.PollInterval)
	defer t.Stop()
	// (a warning a minute at most: a WAN outage fails every tick, and an
	// aggregate the root never takes, one over its max_payload, stops the
	// region following rounds, which an operator must see)
	lim := ratelog.New(g.log, time.Minute)
	var kv jetstream.KeyValue
	for {
		if err := g.step(ctx, root, rjs, &kv); err != nil {
			if errors.Is(err, ErrStore) {
				return err
			}
			if ctx.Err() == nil {
				lim.Warn("follow", "following the root's round failed; retried every poll", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (g *Aggregator) step(ctx context.Context, root *nats.Conn, rjs jetstream.JetStream, kv *jetstream.KeyValue) error {
	if _, err := g.Forward(ctx, rjs); err != nil {
		return err
	}
	if *kv == nil {
		b, err := rjs.KeyValue(ctx, federated.StateBucket)
		if err != nil {
			return fmt.Errorf("root state bucket: %w", err)
		}
		*kv = b
	}
	e, err := (*kv).Get(ctx, federated.KeyRound)
	if err != nil {
		return fmt.Errorf("root round announcement: %w", err)
	}
	a, err := federated.DecodeAnnouncement(e.Value())
	if err != nil {
		return err
	}
	g.mu.Lock()
	var cur uint64
	if g.cur != nil {
		cur = g.cur.Round.Round
	}
	g.mu.Unlock()
	if a.Round > cur {
		rr, err := RequestRound(ctx, root, a.Round)
		if err != nil {
			return err
		}
		if err := g.Open(rr); err != nil {
			return err
		}
	}
	if a.Round == cur && !g.clock.Now().Before(a.Deadline.Add(-g.cfg.Lead)) {
		if err := g.Seal(cur); err != nil {
			return err
		}
		_, err := g.Forward(ctx, rjs)
		return err
	}
	return nil
}

// RequestRound asks the root's admin API for round n's RegionalRound.
func RequestRound(ctx context.Context, root *nats.Conn, n uint64) (*coordinator.RegionalRound, error) {
	body, _ := json.Marshal(coordinator.AdminRequest{Round: n})
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := root.RequestWithContext(rctx, federated.AdminSubjectPrefix+"."+coordinator.EndpointRegionalRound, body)
	if err != nil {
		return nil, fmt.Errorf("request round %d: %w", n, err)
	}
	if e := msg.Header.Get(micro.ErrorHeader); e != "" {
		return nil, fmt.Errorf("request round %d: %s", n, e)
	}
	var rr coordinator.RegionalRound
	if err := json.Unmarshal(msg.Data, &rr); err != nil || rr.Round == nil {
		return nil, fmt.Errorf("request round %d: bad answer: %v", n, err)
	}
	return &rr, nil
}

// Forward publishes the outbox's aggregates to the root's regional
// stream, each with its MsgID, and removes each once the stream
// acknowledged it; it returns how many it forwarded. An aggregate that
// could not be published stays for the next call.
func (g *Aggregator) Forward(ctx context.Context, rjs jetstream.JetStream) (int, error) {
	type item struct {
		round uint64
		data  []byte
	}
	var items []item
	if err := g.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
			items = append(items, item{getU64Key(k), append([]byte(nil), v...)})
			return nil
		})
	}); err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		id := (&federated.RegionalAggregate{Header: federated.RegionalHeader{Region: g.cfg.Region, Round: it.round}}).MsgID()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := rjs.Publish(pctx, federated.RegionalSubjectPrefix+g.cfg.Region, it.data, jetstream.WithMsgID(id))
		cancel()
		if err != nil {
			return n, fmt.Errorf("forward round %d's aggregate: %w", it.round, err)
		}
		if err := g.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOutbox).Delete(u64(it.round)) }); err != nil {
			return n, err
		}
		g.log.Info("aggregate forwarded to the root", "round", it.round, "bytes", len(it.data))
		n++
	}
	return n, nil
}

func getU64Key(k []byte) uint64 { return boltkv.FromU64(k) }

// msgBytes is what a fetched message holds of consume's budget.
func msgBytes(m jetstream.Msg) int { return len(m.Data()) }
