package trace

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/kubefmt"
)

// bbolt layout (trace.db). Every Append is one transaction.
var (
	bucketMeta   = []byte("meta")   // schema, next sequence, event count, newest sample
	bucketEvents = []byte("events") // sequence (uint64 BE) -> record (tracefmt.EncodeEvent)
	bucketLive   = []byte("live")   // pod UID -> its PodArrival record, with its node once bound (pods not yet deleted)
	bucketNodes  = []byte("nodes")  // node name -> NodeInfo record (nodes not deleted)
	bucketSeen   = []byte("seen")   // "usage/<node>" | "edges/<node>" -> Unix nanoseconds of the newest sample recorded (a mark beyond the clock's skew bound is ignored)

	keySchema = []byte("schema")
	keySeq    = []byte("seq")   // last event sequence used
	keyCount  = []byte("count") // events in bucketEvents
	// keyNewest bounds the times of the samples and flows in bucketEvents
	// (int64 Unix nanoseconds: at least the newest); absent in a store
	// written before it, which sweepAhead then reads once
	keyNewest = []byte("newest")
)

const schemaVersion = "1"

// Defaults of StoreConfig.
const (
	DefaultMaxAge    = 168 * time.Hour
	DefaultMaxEvents = 1_000_000
)

// ErrConfig wraps configuration refusals; ErrStore a damaged store.
var (
	ErrConfig = errors.New("trace: bad config")
	ErrStore  = errors.New("trace: bad store")
)

// StoreConfig configures a trace store. Start from DefaultStoreConfig.
type StoreConfig struct {
	// Path is the bbolt file (created with its directory).
	Path string
	// MaxAge and MaxEvents bound retention: after every Append the oldest
	// events (in recording order) go while there are more than MaxEvents
	// or the oldest is older than MaxAge by the clock. Defaults 168h and
	// 1,000,000; both must be positive. Samples and flows dated more than
	// kubefmt.MaxTelemetryClockSkew ahead of the clock go too, wherever
	// they are in the log (see Append).
	MaxAge    time.Duration
	MaxEvents int
	// Now is the clock (nil: time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultStoreConfig returns the defaults for the file at path.
func DefaultStoreConfig(path string) StoreConfig {
	return StoreConfig{Path: path, MaxAge: DefaultMaxAge, MaxEvents: DefaultMaxEvents}
}

// Validate names the first bad field.
func (c *StoreConfig) Validate() error {
	switch {
	case c.Path == "":
		return fmt.Errorf("%w: Path required", ErrConfig)
	case c.MaxAge <= 0:
		return fmt.Errorf("%w: MaxAge %v must be positive", ErrConfig, c.MaxAge)
	case c.MaxEvents < 1:
		return fmt.Errorf("%w: MaxEvents %d must be positive", ErrConfig, c.MaxEvents)
	}
	return nil
}

// Store is the workload trace in bbolt: an append-only event log with
// bounded retention, plus the current pods and nodes (so a long-running
// pod whose arrival was pruned is still exported). Methods are safe for
// concurrent use (bbolt serialises writers); Close after the last use.
type Store struct {
	cfg StoreConfig
	db  *bolt.DB
	log *slog.Logger
}

// OpenStore opens (or creates) the trace store.
func OpenStore(cfg StoreConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	db, err := boltkv.Open(cfg.Path, "trace store", keySchema, schemaVersion, bucketMeta, bucketEvents, bucketLive, bucketNodes, bucketSeen)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return &Store{cfg: cfg, db: db, log: log}, nil
}

// OpenStoreReadOnly opens an existing store for reading (edgectl trace
// export). bbolt locks the file while an agent has it open for writing, so
// this waits at most 5 s and then fails: export from a stopped agent's
// file, or from a copy taken while the agent was stopped.
func OpenStoreReadOnly(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrStore, path, err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketEvents, bucketLive, bucketNodes} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("no %s bucket: not a trace store", b)
			}
		}
		if v := tx.Bucket(bucketMeta).Get(keySchema); string(v) != schemaVersion {
			return fmt.Errorf("%w: schema %q, this build reads %q", boltkv.ErrSchema, v, schemaVersion)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrStore, path, err)
	}
	return &Store{cfg: StoreConfig{Path: path, Now: time.Now}, db: db, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// AppendResult counts what an Append did.
type AppendResult struct {
	// Recorded events; Skipped ones that were already recorded (a pod's
	// arrival seen again after a relist, a deletion of a pod not known,
	// a binding to the node already known, a sample not newer than the
	// newest of its node; a newest more than kubefmt.MaxTelemetryClockSkew
	// ahead of the store's clock is ignored and replaced); Pruned by
	// retention, and as samples or flows dated more than
	// kubefmt.MaxTelemetryClockSkew ahead of the store's clock (also
	// counted in Ahead); Refused records that were not written (the
	// RefusedError Append returned names each).
	Recorded, Skipped, Pruned, Refused int
	// Ahead counts the pruned samples and flows (NodeUsage, EdgeRate)
	// dated more than kubefmt.MaxTelemetryClockSkew ahead of the store's
	// clock: from a node whose clock ran ahead, written before the
	// recorder refused such samples, or recorded while this agent's own
	// clock ran ahead.
	Ahead int
}

// ErrRefused marks an Append that refused some records of its batch and
// appended the others (errors.Is; errors.As finds the RefusedError).
var ErrRefused = errors.New("trace: records refused")

// RefusedError is Append's error when it refused records of a batch: the
// other records were appended in its transaction (AppendResult counts
// them). Records holds one error per refused record in batch order, each
// naming the record's place in the batch, its kind, its pod (namespace,
// name and UID) or node, and the field; each wraps tracefmt.ErrRecord (a
// record the format refuses), or ErrStore (a binding whose pod's current
// record in the store does not decode: that record is left as it is).
type RefusedError struct {
	// Batch is the number of records Append was given.
	Batch   int
	Records []error
}

// maxListed bounds how many refusals Error spells out.
const maxListed = 8

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d of %d; the other %d were applied", ErrRefused, len(e.Records), e.Batch, e.Batch-len(e.Records))
	for i, err := range e.Records {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(e.Records)-maxListed)
			break
		}
		b.WriteString("; ")
		b.WriteString(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return b.String()
}

// Unwrap returns ErrRefused and the refusals.
func (e *RefusedError) Unwrap() []error { return append([]error{ErrRefused}, e.Records...) }

// refusal names the record i of a batch in its refusal.
func refusal(i int, e *tracefmt.Event, err error) error {
	return fmt.Errorf("record %d (%s of %s): %w", i, e.Kind, subject(e), err)
}

// subject names what an event is about, for errors (strings clipped).
func subject(e *tracefmt.Event) string {
	switch {
	case e.Pod != nil:
		return fmt.Sprintf("pod %s/%s, uid %s", clip(e.Pod.Namespace), clip(e.Pod.Name), clip(e.Pod.UID))
	case e.Usage != nil:
		return "node " + clip(e.Usage.Node)
	case e.Edge != nil:
		return fmt.Sprintf("edge %s/%s -> %s/%s seen by %s", clip(e.Edge.Src.Namespace), clip(e.Edge.Src.Name),
			clip(e.Edge.Dst.Namespace), clip(e.Edge.Dst.Name), clip(e.Edge.Reporter))
	case e.Node != nil:
		return "node " + clip(e.Node.Name)
	}
	return "no payload"
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", truncate(s, n), len(s))
}

// truncate cuts s to at most n bytes, at the start of the UTF-8
// character that crosses n (bytes that are not UTF-8 are cut at n).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			cut = i
			break
		}
	}
	return s[:cut]
}

// Append records the valid events of evs in one transaction and applies
// retention. NodeInfo events update the current nodes (a NodeInfo whose
// Node has zero CPU removes the node); the other kinds go to the event
// log, with the de-duplication AppendResult describes.
//
// A record that cannot be written (one the format refuses, see
// tracefmt.Event.Validate; a binding of a pod whose current record does
// not decode, or would outgrow tracefmt.MaxRecordBytes with its node) is
// refused on its own: the others are appended and the error is a
// *RefusedError naming each refused record and its field (errors.Is(err,
// ErrRefused)), with the counts in the result. Any other error is the
// transaction's: then nothing of the batch was written and the result is
// zero. Nothing stored before is changed by a refusal.
//
// Retention also deletes, wherever they are in the log, the samples and
// flows (NodeUsage, EdgeRate) dated more than kubefmt.MaxTelemetryClockSkew
// ahead of the store's clock, which no reader is given either (Events,
// Export, ServiceDependencies): a store keeps a bound on its samples'
// times and reads the log for them only when that bound is beyond the
// clock's skew (and once in a store written before it), so an Append
// stays as cheap as the head of the log.
func (s *Store) Append(evs ...tracefmt.Event) (AppendResult, error) {
	var res AppendResult
	refused := make([]error, len(evs)) // by batch index; nil: not refused
	enc := make([][]byte, len(evs))
	good := 0
	for i := range evs {
		b, err := tracefmt.EncodeEvent(evs[i])
		if err != nil {
			refused[i] = refusal(i, &evs[i], err)
			continue
		}
		enc[i] = b
		good++
	}
	var inTx map[int]error // refusals found in the transaction
	if good > 0 {
		err := s.db.Update(func(tx *bolt.Tx) error {
			res, inTx = AppendResult{}, map[int]error{}
			meta, events, live, nodes, seen := tx.Bucket(bucketMeta), tx.Bucket(bucketEvents), tx.Bucket(bucketLive), tx.Bucket(bucketNodes), tx.Bucket(bucketSeen)
			seq, count := boltkv.GetU64(meta, keySeq), boltkv.GetU64(meta, keyCount)
			now := s.cfg.Now()
			horizon := now.Add(kubefmt.MaxTelemetryClockSkew).UnixNano()
			bounded, newest := meta.Get(keyNewest) != nil, int64(boltkv.GetU64(meta, keyNewest))
			for i, e := range evs {
				if enc[i] == nil {
					continue
				}
				record := true
				switch e.Kind {
				case tracefmt.NodeInfo:
					record = false
					var err error
					if e.Node.CPUMilli == 0 {
						err = nodes.Delete([]byte(e.Node.Name))
					} else {
						err = nodes.Put([]byte(e.Node.Name), enc[i])
					}
					if err != nil {
						return err
					}
					res.Recorded++
				case tracefmt.PodArrival:
					if live.Get([]byte(e.Pod.UID)) != nil {
						record = false
					} else if err := live.Put([]byte(e.Pod.UID), enc[i]); err != nil {
						return err
					}
				case tracefmt.PodDeletion:
					if live.Get([]byte(e.Pod.UID)) == nil {
						record = false
					} else if err := live.Delete([]byte(e.Pod.UID)); err != nil {
						return err
					}
				case tracefmt.PodBinding:
					raw := live.Get([]byte(e.Pod.UID))
					if raw == nil {
						record = false
						break
					}
					cur, err := tracefmt.DecodeEvent(raw)
					if err != nil {
						inTx[i] = refusal(i, &evs[i], fmt.Errorf("%w: the pod's current record does not decode: %w", ErrStore, err))
						continue
					}
					if cur.Pod.Node == e.Pod.Node {
						record = false
						break
					}
					cur.Pod.Node = e.Pod.Node
					b, err := tracefmt.EncodeEvent(cur)
					if err != nil {
						inTx[i] = refusal(i, &evs[i], fmt.Errorf("the pod's current record with its node: %w", err))
						continue
					}
					if err := live.Put([]byte(e.Pod.UID), b); err != nil {
						return err
					}
				case tracefmt.NodeUsage, tracefmt.EdgeRate:
					// one sample per node and time: usage samples must move
					// forward; the edges of one window share its time, so
					// only an older window is refused
					key, t := "", uint64(e.Time.UnixNano())
					if e.Kind == tracefmt.EdgeRate {
						key = "edges/" + e.Edge.Reporter
					} else {
						key = "usage/" + e.Usage.Node
					}
					last := boltkv.GetU64(seen, []byte(key))
					if last > uint64(horizon) {
						// a mark from a node whose clock ran ahead, written
						// before the recorder refused such samples: it would
						// hold back the node's samples until the clock
						// caught up with it (for ever, for year 9999)
						s.log.Warn("ignoring a high-water mark ahead of the clock", "key", key,
							"mark", time.Unix(0, int64(last)).UTC(), "now", s.cfg.Now())
						last = 0
					}
					if last != 0 && (t < last || (t == last && e.Kind == tracefmt.NodeUsage)) {
						record = false
					} else if err := seen.Put([]byte(key), boltkv.U64(t)); err != nil {
						return err
					}
				}
				if !record {
					if e.Kind != tracefmt.NodeInfo {
						res.Skipped++
					}
					continue
				}
				if e.Kind == tracefmt.NodeUsage || e.Kind == tracefmt.EdgeRate {
					newest = max(newest, e.Time.UnixNano())
				}
				seq++
				if err := events.Put(boltkv.U64(seq), enc[i]); err != nil {
					return err
				}
				count++
				res.Recorded++
			}
			if !bounded || newest > horizon {
				var err error
				if res.Ahead, newest, err = sweepAhead(events, &count, horizon); err != nil {
					return err
				}
			}
			pruned, err := s.prune(events, &count, now)
			if err != nil {
				return err
			}
			res.Pruned = pruned + res.Ahead
			for _, kv := range [][2][]byte{{keySeq, boltkv.U64(seq)}, {keyCount, boltkv.U64(count)}, {keyNewest, boltkv.U64(uint64(newest))}} {
				if err := meta.Put(kv[0], kv[1]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return AppendResult{}, fmt.Errorf("append to trace: %w", err)
		}
		if res.Ahead > 0 {
			s.log.Warn("pruned trace samples dated ahead of the clock", "events", res.Ahead,
				"now", s.cfg.Now(), "max_skew", kubefmt.MaxTelemetryClockSkew)
		}
	}
	var errs []error
	for i, err := range refused {
		if err == nil {
			err = inTx[i]
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return res, nil
	}
	res.Refused = len(errs)
	return res, &RefusedError{Batch: len(evs), Records: errs}
}

// prune deletes the oldest events while there are more than MaxEvents or
// the oldest is older than MaxAge before now.
func (s *Store) prune(events *bolt.Bucket, count *uint64, now time.Time) (int, error) {
	cutoff := now.Add(-s.cfg.MaxAge).UnixNano()
	c := events.Cursor()
	pruned := 0
	// always the first: a bbolt cursor's Next after Delete skips a key
	for k, v := c.First(); k != nil; k, v = c.First() {
		if *count <= uint64(s.cfg.MaxEvents) {
			t, ok := tracefmt.RecordTime(v)
			if ok && t >= cutoff {
				break
			}
		}
		if err := c.Delete(); err != nil {
			return pruned, err
		}
		*count--
		pruned++
	}
	return pruned, nil
}

// sweepAhead deletes the samples and flows (NodeUsage, EdgeRate) dated
// after horizon (Unix nanoseconds) wherever they are in the log, and
// returns how many, and the newest time of those left (math.MinInt64:
// none).
func sweepAhead(events *bolt.Bucket, count *uint64, horizon int64) (int, int64, error) {
	newest := int64(math.MinInt64)
	var drop [][]byte
	err := events.ForEach(func(k, v []byte) error {
		switch kind, t, ok := tracefmt.RecordHeader(v); {
		case !ok || (kind != tracefmt.NodeUsage && kind != tracefmt.EdgeRate):
		case t > horizon:
			drop = append(drop, append([]byte(nil), k...))
		default:
			newest = max(newest, t)
		}
		return nil
	})
	if err != nil {
		return 0, newest, err
	}
	for _, k := range drop {
		if err := events.Delete(k); err != nil {
			return 0, newest, err
		}
		*count--
	}
	return len(drop), newest, nil
}

// ahead reports whether record v is a sample or flows window (NodeUsage,
// EdgeRate) dated after horizon (Unix nanoseconds): not to be read.
func ahead(v []byte, horizon int64) bool {
	kind, t, ok := tracefmt.RecordHeader(v)
	return ok && (kind == tracefmt.NodeUsage || kind == tracefmt.EdgeRate) && t > horizon
}

// horizon is the latest time (Unix nanoseconds) a sample or flows window
// read now may have: the store's clock plus kubefmt.MaxTelemetryClockSkew.
func (s *Store) horizon() int64 { return s.cfg.Now().Add(kubefmt.MaxTelemetryClockSkew).UnixNano() }

// Stats summarises the store.
type Stats struct {
	Events         int
	Oldest, Newest time.Time // recording order's first and last event times (zero when empty)
	LivePods       int
	Nodes          int
	LastSeq        uint64
}

// Stats reads the store's counts.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.db.View(func(tx *bolt.Tx) error {
		meta, events := tx.Bucket(bucketMeta), tx.Bucket(bucketEvents)
		st.Events, st.LastSeq = int(boltkv.GetU64(meta, keyCount)), boltkv.GetU64(meta, keySeq)
		c := events.Cursor()
		if _, v := c.First(); v != nil {
			if t, ok := tracefmt.RecordTime(v); ok {
				st.Oldest = time.Unix(0, t).UTC()
			}
		}
		if _, v := c.Last(); v != nil {
			if t, ok := tracefmt.RecordTime(v); ok {
				st.Newest = time.Unix(0, t).UTC()
			}
		}
		st.LivePods, st.Nodes = tx.Bucket(bucketLive).Stats().KeyN, tx.Bucket(bucketNodes).Stats().KeyN
		return nil
	})
	return st, err
}

// Events calls fn for every event in recording order, with its sequence,
// except the samples and flows dated more than
// kubefmt.MaxTelemetryClockSkew ahead of the store's clock (the next
// Append prunes them). A record that does not decode stops the walk with
// an ErrStore error naming its sequence (nothing is changed).
func (s *Store) Events(fn func(seq uint64, e tracefmt.Event) error) error {
	horizon := s.horizon()
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
			if ahead(v, horizon) {
				return nil
			}
			e, err := tracefmt.DecodeEvent(v)
			if err != nil {
				return fmt.Errorf("%w: event %d: %w", ErrStore, boltkv.FromU64(k), err)
			}
			return fn(boltkv.FromU64(k), e)
		})
	})
}

// LivePods returns the pods recorded as arrived and not yet deleted
// (their arrival records, with their node once bound).
func (s *Store) LivePods() ([]tracefmt.Event, error) { return s.current(bucketLive) }

// Nodes returns the current nodes (NodeInfo records).
func (s *Store) Nodes() ([]tracefmt.Event, error) { return s.current(bucketNodes) }

func (s *Store) current(bucket []byte) ([]tracefmt.Event, error) {
	var out []tracefmt.Event
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			e, err := tracefmt.DecodeEvent(v)
			if err != nil {
				return fmt.Errorf("%w: %s %q: %w", ErrStore, bucket, k, err)
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}
