package coordinator

import (
	"io"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/internal/boltkv"
)

// The store's record types, states and reasons, under the names the
// coordinator's API has always used (coordinator/store holds them).
type (
	Round        = store.Round
	Site         = store.Site
	Model        = store.Model
	Event        = store.Event
	DamagedError = store.DamagedError
)

// Round states.
const (
	StateCollecting  = store.StateCollecting
	StateAggregating = store.StateAggregating
	StatePublished   = store.StatePublished
	StateFailed      = store.StateFailed
)

// Model statuses.
const (
	ModelPending   = store.ModelPending
	ModelPublished = store.ModelPublished
	ModelCandidate = store.ModelCandidate
)

// Reasons a round fails (Round.Reason).
const (
	FailReasonQuorum     = store.FailReasonQuorum
	FailReasonAggregate  = store.FailReasonAggregate
	FailReasonDP         = store.FailReasonDP
	FailReasonNonFinite  = store.FailReasonNonFinite
	FailReasonQuantize   = store.FailReasonQuantize
	FailReasonSanity     = store.FailReasonSanity
	FailReasonCalibrate  = store.FailReasonCalibrate
	FailReasonSuperseded = store.FailReasonSuperseded
)

// ErrStore wraps a damaged or foreign database.
var ErrStore = store.ErrStore

// u64 and getU64 are the store's big-endian uint64 keys and values.
var u64, getU64 = boltkv.U64, boltkv.GetU64

// view and update are the coordinator's store transactions: a bbolt panic
// or a fault on its memory map (a file damaged while running) becomes an
// ErrStore error naming the file, which stops the daemon.
func (c *Coordinator) view(fn func(tx *bolt.Tx) error) error {
	return store.Guard(c.path, func() error { return c.db.View(fn) })
}

func (c *Coordinator) update(fn func(tx *bolt.Tx) error) error {
	err := store.Guard(c.path, func() error { return c.db.Update(fn) })
	if err == nil {
		c.gen.Add(1)
	}
	if err == nil && c.metrics != nil {
		c.metrics.Commits.Inc()
		c.countSyncs()
	}
	return err
}

// countSyncs counts a commit's fdatasyncs the way bbolt makes them (two a
// commit, and one when the commit grew the file); strace of a benchmark
// process agrees (docs/federated.md "Coordinator throughput").
func (c *Coordinator) countSyncs() {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	n := 2.0
	if st, err := os.Stat(c.path); err == nil {
		if st.Size() > c.fileSize {
			n++
		}
		c.fileSize = st.Size()
	}
	c.metrics.Syncs.Add(n)
}

// BackupTo writes a consistent copy of the running coordinator's store to
// w (an online backup: one read transaction, updates go on meanwhile) and
// returns its size.
func (c *Coordinator) BackupTo(w io.Writer) (int64, error) {
	var n int64
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// Backup writes an online backup of the store to path (through a
// temporary file, synced, then renamed: a crash leaves no half backup
// under the name) and returns its size.
func (c *Coordinator) Backup(path string) (int64, error) {
	return store.WriteBackup(path, c.BackupTo)
}
