package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A sweep after a checkpoint removes at most SweepLimit leftover
// checkpoint objects (the oldest first; the rest wait for the next
// checkpoint), within SweepTimeout: it runs under the coordinator's
// mutex, as Ship does, so a slow NATS holds judging up for at most that
// long after a checkpoint (what it leaves waits for the next one).
const (
	SweepLimit   = 16
	SweepTimeout = 2 * time.Second
)

// Sweep counts what the sweeps of leftover checkpoint objects did
// (Active.TakeSweep).
type Sweep struct {
	Removed int // leftover objects removed
	Failed  int // listings, pointer reads and removals that failed
}

// TakeSweep returns what the sweeps did since its last call and starts
// the count again. The caller serialises it with Ship.
func (a *Active) TakeSweep() Sweep {
	s := a.swept
	a.swept = Sweep{}
	return s
}

// objectName is the checkpoint object of an attempt of the active of
// epoch at store generation gen (nonce: the attempt's own).
func objectName(epoch, gen, nonce uint64) string {
	return fmt.Sprintf("e%d-g%d-%016x.db", epoch, gen, nonce)
}

// objectEpochGen is the epoch and store generation of a checkpoint
// object's name as Ship writes it (objectName: the nonce 16 lowercase
// hex digits) or as versions before the nonce did (e<epoch>-g<gen>.db).
// Any other name, one with digits written otherwise (a leading zero, an
// upper-case nonce) or of epoch 0 (no active's) included, is none: ok is
// false.
func objectEpochGen(name string) (epoch, gen uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, "e")
	if !ok {
		return 0, 0, false
	}
	es, rest, ok := strings.Cut(rest, "-g")
	if !ok {
		return 0, 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".db")
	if !ok {
		return 0, 0, false
	}
	gs, nonce, withNonce := strings.Cut(rest, "-")
	epoch, eerr := strconv.ParseUint(es, 10, 64)
	gen, gerr := strconv.ParseUint(gs, 10, 64)
	if eerr != nil || gerr != nil || epoch == 0 {
		return 0, 0, false
	}
	canonical := fmt.Sprintf("e%d-g%d.db", epoch, gen)
	if withNonce {
		n, err := strconv.ParseUint(nonce, 16, 64)
		if err != nil {
			return 0, 0, false
		}
		canonical = objectName(epoch, gen, n)
	}
	if name != canonical {
		return 0, 0, false
	}
	return epoch, gen, true
}

// leftover is a checkpoint object a sweep may remove.
type leftover struct {
	name       string
	epoch, gen uint64
}

// sweep removes the checkpoint objects left behind by attempts no
// pointer named (an active that crashed between storing its object and
// updating the pointer, or a write whose answer was lost and that the
// active never learnt about), once the pointer names name, this active's
// checkpoint of store generation gen: the objects whose names parse
// (objectEpochGen) as of an earlier epoch or of an earlier generation of
// this epoch. A name that does not parse, this generation's other
// attempts and every later epoch's object (a successor's) stay. Before
// each removal the pointer is read again from the HA bucket's leader
// (pointer): once it no longer names name as this epoch's, a later active
// claimed it and the sweep stops (a claim copies the pointer, and what
// the pointer named stays). At most SweepLimit removals, within
// SweepTimeout and ctx (their end stops it, logged); a failure is logged
// and counted (TakeSweep), never returned: the checkpoint is taken.
func (a *Active) sweep(ctx context.Context, name string, gen uint64) {
	ctx, cancel := context.WithTimeout(ctx, SweepTimeout)
	defer cancel()
	infos, err := a.obj.List(ctx)
	switch {
	case errors.Is(err, jetstream.ErrNoObjectsFound):
		return
	case err != nil:
		a.sweepFailed("list the checkpoints", "", err)
		return
	}
	var old []leftover
	for _, i := range infos {
		e, g, ok := objectEpochGen(i.Name)
		if ok && i.Name != name && (e < a.epoch || (e == a.epoch && g < gen)) {
			old = append(old, leftover{i.Name, e, g})
		}
	}
	slices.SortFunc(old, func(x, y leftover) int {
		return cmp.Or(cmp.Compare(x.epoch, y.epoch), cmp.Compare(x.gen, y.gen), strings.Compare(x.name, y.name))
	})
	if len(old) > SweepLimit {
		a.log.Info("sweep checkpoints: more leftovers than a sweep removes, the rest at the next checkpoint", "leftovers", len(old), "limit", SweepLimit)
		old = old[:SweepLimit]
	}
	removed := 0
	for _, o := range old {
		if ctx.Err() != nil {
			break
		}
		p, _, found, err := a.pointer(ctx)
		if err != nil {
			if ctx.Err() == nil {
				a.sweepFailed("read the checkpoint pointer", o.name, err)
			}
			break
		}
		if !found || p.Epoch != a.epoch || p.Object != name {
			a.log.Info("sweep checkpoints: the pointer moved on, stopped", "pointer_epoch", p.Epoch, "pointer_object", p.Object)
			break
		}
		err = a.obj.Delete(ctx, o.name)
		if err == nil {
			removed++
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if !errors.Is(err, jetstream.ErrObjectNotFound) { // (not: gone already)
			a.sweepFailed("remove a leftover checkpoint", o.name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		a.log.Info("sweep checkpoints: stopped, the rest at the next checkpoint", "removed", removed, "err", err)
	}
	a.swept.Removed += removed
	if removed > 0 {
		a.log.Info("sweep checkpoints: leftovers removed", "removed", removed, "checkpoint", name)
	}
}

// sweepFailed logs and counts a failure of a sweep.
func (a *Active) sweepFailed(what, object string, err error) {
	a.swept.Failed++
	a.log.Warn("sweep checkpoints: "+what, "object", object, "err", err)
}
