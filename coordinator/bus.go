package coordinator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/federated"
)

// busOptions are the update stream's limits and how the bus is set up
// (package coordinator/bus).
func (c *Coordinator) busOptions() bus.Options {
	return bus.Options{DuplicateWindow: c.cfg.DuplicateWindow, MaxAge: c.cfg.UpdateMaxAge, MaxBytes: c.cfg.UpdateMaxBytes,
		Replicas: c.replicas(), Seed: c.cfg.Seed, Warn: c.limited.Warn}
}

// replicas is the replica count of everything the coordinator creates in
// JetStream (the consumer follows its stream's).
func (c *Coordinator) replicas() int { return max(c.cfg.Replicas, 1) }

// openConsumer returns the coordinator's consumer of the update stream:
// the durable, delivering again at once what a previous run fetched and
// never acked (bus.Bus.OpenConsumer), or with high availability the
// active's own (bus.Bus.OpenEpochConsumer), starting after its
// checkpoint's floor.
func (c *Coordinator) openConsumer(ctx context.Context, b *bus.Bus) (jetstream.Consumer, error) {
	if c.ha == nil {
		return b.OpenConsumer(ctx, c.log)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cons, err := b.OpenEpochConsumer(ctx, c.ha.Epoch(), c.ha.Floor(), c.log)
	if err != nil {
		return nil, err
	}
	c.haCons = cons
	return cons, nil
}

// trimStream removes the updates the coordinator has judged and acked
// (everything below its consumer's ack floor): a judged update lives in
// the store (or in its summing round's sums), the stream need not keep it.
func (c *Coordinator) trimStream(ctx context.Context, cons jetstream.Consumer) {
	b := c.bus
	if b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil {
		c.limited.Warn("trim", "update consumer info", "err", err)
		return
	}
	floor := info.AckFloor.Stream
	if c.ha != nil {
		// what a new active would judge again stays
		floor = min(floor, c.ha.Floor())
	}
	if floor <= c.trimmedTo {
		return
	}
	s, err := b.JS.Stream(ctx, federated.UpdateStream)
	if err == nil {
		err = s.Purge(ctx, jetstream.WithPurgeSequence(floor+1))
	}
	if err != nil {
		c.limited.Warn("trim", "remove judged updates from the stream", "err", err)
		return
	}
	c.trimmedTo = floor
}

// busLoop trims the stream and writes the periodic online backups until
// ctx ends.
func (c *Coordinator) busLoop(ctx context.Context, cons jetstream.Consumer) {
	trim := time.NewTicker(max(c.cfg.PollInterval, time.Second))
	defer trim.Stop()
	var backup, ckpt <-chan time.Time
	if c.ha != nil {
		t := time.NewTicker(c.cfg.checkpointEvery())
		defer t.Stop()
		ckpt = t.C
	}
	if c.cfg.BackupEvery > 0 {
		t := time.NewTicker(c.cfg.BackupEvery)
		defer t.Stop()
		backup = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-trim.C:
			c.trimStream(ctx, cons)
		case <-ckpt:
			c.mu.Lock()
			err := c.checkpoint(ctx)
			c.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				c.limited.Warn("checkpoint", "periodic checkpoint", "err", err)
			}
		case <-backup:
			if path, n, err := c.BackupNow(); err != nil {
				c.limited.Warn("backup", "online backup", "err", err)
			} else {
				c.log.Info("online backup written", "path", path, "bytes", n)
			}
		}
	}
}

// backupDir is where online backups go.
func (c *Coordinator) backupDir() string {
	if c.cfg.BackupDir != "" {
		return c.cfg.BackupDir
	}
	return filepath.Join(c.cfg.DataDir, "backups")
}

// BackupNow writes an online backup into the backup directory
// (coordinator-TIME.db), keeps the newest BackupKeep and returns its path
// and size.
func (c *Coordinator) BackupNow() (string, int64, error) {
	dir := c.backupDir()
	path := filepath.Join(dir, "coordinator-"+c.clock.Now().UTC().Format("20060102T150405.000Z")+".db")
	n, err := c.Backup(path)
	if err != nil {
		return "", 0, err
	}
	pruneBackups(dir, filepath.Base(path), c.cfg.BackupKeep)
	return path, n, nil
}

// pruneBackups removes the oldest backups (coordinator-TIME.db, by name)
// of dir beyond the newest keep, never the one named newest. The
// directory is listed, not globbed: a path holding glob metacharacters
// ("data[1]", "backups*") is that directory, never none or its
// siblings, whose files must not be removed.
func pruneBackups(dir, newest string, keep int) {
	entries, _ := os.ReadDir(dir) // sorted by name: oldest first
	var old []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, "coordinator-") && strings.HasSuffix(n, ".db") {
			old = append(old, n)
		}
	}
	for len(old) > keep {
		if old[0] != newest {
			_ = os.Remove(filepath.Join(dir, old[0]))
		}
		old = old[1:]
	}
}
