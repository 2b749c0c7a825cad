package flclient

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/quant"
)

// Reading the coordinator's state without JetStream consumers.
//
// A site reads the state bucket and the model store only through
// JetStream direct gets (the last message of a subject, the next message
// of a subject), which answer to the requester's own inbox. It creates no
// consumer: the fleet's NATS permissions refuse consumer creation to
// sites, because a push consumer delivers to any subject its creator
// names, with the server's rights (federated/natsauth). Changes are
// noticed through the bucket's own subjects ($KV.EDGESCHED_STATE.KEY,
// which every put is published on), used only as a hint to read the key
// again, and by polling every StatePoll, which also covers notifications
// lost while the link was down.

// stateKeys are the bucket keys a site follows.
var stateKeys = []string{federated.KeyModel, federated.KeyRound}

// watch follows the state bucket's keys and sends each new revision to
// out (oldest first), until ctx ends. Failures (no bucket yet, link down)
// are retried with backoff.
func (c *Client) watch(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, out chan<- jetstream.KeyValueEntry) {
	hints := make(chan *nats.Msg, 64)
	b := backoff.New(c.cfg.BackoffMin, c.cfg.BackoffMax, c.cfg.Seed^0x77)
	var sub *nats.Subscription
	for ctx.Err() == nil && sub == nil {
		var err error
		if sub, err = nc.ChanSubscribe("$KV."+federated.StateBucket+".>", hints); err != nil {
			c.log.Debug("subscribe to state changes", "err", err)
			if !b.Sleep(ctx) {
				return
			}
		}
	}
	if sub == nil {
		return
	}
	defer sub.Unsubscribe()
	t := time.NewTicker(c.cfg.StatePoll)
	defer t.Stop()
	seen := map[string]uint64{}
	var kv jetstream.KeyValue
	for {
		err := func() error {
			if kv == nil {
				gctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
				defer cancel()
				var err error
				if kv, err = js.KeyValue(gctx, federated.StateBucket); err != nil {
					return err
				}
			}
			var fresh []jetstream.KeyValueEntry
			for _, key := range stateKeys {
				gctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
				e, err := kv.Get(gctx, key)
				cancel()
				switch {
				case errors.Is(err, jetstream.ErrKeyNotFound):
					continue
				case err != nil:
					return err
				}
				// a different revision, not only a higher one: a bucket
				// made again from scratch starts over at 1 (what the
				// entry says is checked downstream)
				if e.Revision() != seen[key] {
					fresh = append(fresh, e)
				}
			}
			slices.SortFunc(fresh, func(a, b jetstream.KeyValueEntry) int { return cmp.Compare(a.Revision(), b.Revision()) })
			for _, e := range fresh {
				select {
				case out <- e:
					seen[e.Key()] = e.Revision()
				case <-ctx.Done():
					return nil
				}
			}
			return nil
		}()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Debug("read state", "err", err)
			kv = nil
			if !b.Sleep(ctx) {
				return
			}
			continue
		}
		b.Reset()
		select {
		case <-ctx.Done():
			return
		case <-hints:
			// drain a burst of notifications into one read
			for len(hints) > 0 {
				<-hints
			}
		case <-t.C:
		}
	}
}

// errDamagedObject wraps what fetchObject refuses for what the store
// holds, not for reaching it: metadata claiming more than an artifact may
// be, or no chunks, and chunks that exceed the object's size or do not
// hash to its digest. Fetching the same object again cannot help, so a
// model refused for it is not retried (trust.go: reason artifact).
var errDamagedObject = errors.New("flclient: damaged object")

// fetchObject reads an object of the model store by direct gets: its
// metadata (last message on its meta subject), then its chunks one by one
// (next message on its chunk subject), checking size and digest. Objects
// larger than an artifact may be are refused before any chunk is read.
func fetchObject(ctx context.Context, js jetstream.JetStream, name string) ([]byte, error) {
	obs, err := js.ObjectStore(ctx, federated.ModelBucket)
	if err != nil {
		return nil, fmt.Errorf("model bucket: %w", err)
	}
	info, err := obs.GetInfo(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", name, err)
	}
	switch {
	case info.Deleted:
		return nil, fmt.Errorf("object %s: %w", name, jetstream.ErrObjectNotFound)
	case info.Size > quant.MaxArtifactBytes:
		return nil, fmt.Errorf("%w: object %s: %d bytes exceeds the artifact cap of %d", errDamagedObject, name, info.Size, quant.MaxArtifactBytes)
	case info.NUID == "":
		return nil, fmt.Errorf("%w: object %s: metadata without chunks", errDamagedObject, name)
	}
	st, err := js.Stream(ctx, "OBJ_"+federated.ModelBucket)
	if err != nil {
		return nil, fmt.Errorf("model stream: %w", err)
	}
	subj := fmt.Sprintf("$O.%s.C.%s", federated.ModelBucket, info.NUID)
	buf := make([]byte, 0, info.Size)
	seq := uint64(1)
	for uint64(len(buf)) < info.Size {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if err != nil {
			return nil, fmt.Errorf("object %s: chunk after %d of %d bytes: %w", name, len(buf), info.Size, err)
		}
		if uint64(len(buf)+len(m.Data)) > info.Size {
			return nil, fmt.Errorf("%w: object %s: chunks exceed its size of %d bytes", errDamagedObject, name, info.Size)
		}
		buf = append(buf, m.Data...)
		seq = m.Sequence + 1
	}
	sum := sha256.Sum256(buf)
	if want := objectDigest(sum[:]); info.Digest != want {
		return nil, fmt.Errorf("%w: object %s: digest %s, its content hashes to %s", errDamagedObject, name, info.Digest, want)
	}
	return buf, nil
}

// objectDigest is the object store's digest notation of a SHA-256 sum.
func objectDigest(sum []byte) string {
	return "SHA-256=" + base64.URLEncoding.EncodeToString(sum)
}
