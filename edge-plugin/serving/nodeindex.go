package serving

import (
	"math/bits"
	"unsafe"

	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// nodeIndex maps the snapshot's NodeInfo objects to view indices. Score
// looks up every feasible node of every cycle in it (and PreScore every
// candidate), so it is an open-addressing table keyed by the object's
// address (linear probing, at most half full, multiplicative hash):
// about a third of a Go map's lookup time at 5,000 nodes, where the
// lookups were a fifth of the cycle. Go's heap objects do not move, so an
// address is a stable key for as long as the table holds the pointer
// (which also keeps the object alive). Immutable once built: cycles that
// still hold one may read it while a newer one is built.
type nodeIndex struct {
	slots []nodeSlot
	shift uint // 64 - log2(len(slots))
}

type nodeSlot struct {
	k *framework.NodeInfo
	v int32
}

// newNodeIndex returns an empty table for up to n keys.
func newNodeIndex(n int) *nodeIndex {
	b := max(3, bits.Len(uint(2*n))) // at most half full, at least 8 slots
	return &nodeIndex{slots: make([]nodeSlot, 1<<b), shift: uint(64 - b)}
}

func (t *nodeIndex) home(k *framework.NodeInfo) uint64 {
	return (uint64(uintptr(unsafe.Pointer(k))) * 0x9e3779b97f4a7c15) >> t.shift
}

// put sets k's index (k non-nil; at most n distinct keys).
func (t *nodeIndex) put(k *framework.NodeInfo, v int32) {
	mask := uint64(len(t.slots) - 1)
	for h := t.home(k); ; h = (h + 1) & mask {
		if s := &t.slots[h]; s.k == nil || s.k == k {
			s.k, s.v = k, v
			return
		}
	}
}

// get returns k's index. A nil table or key finds nothing.
func (t *nodeIndex) get(k *framework.NodeInfo) (int32, bool) {
	if t == nil || k == nil {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for h := t.home(k); ; h = (h + 1) & mask {
		switch s := &t.slots[h]; s.k {
		case k:
			return s.v, true
		case nil:
			return 0, false
		}
	}
}

// NodeIndex maps the snapshot's NodeInfo objects to view indices
// (Cycle.ByInfo); immutable once built.
type NodeIndex = nodeIndex

// Get returns k's view index.
func (t *nodeIndex) Get(k *framework.NodeInfo) (int32, bool) {
	if t == nil {
		return 0, false
	}
	return t.get(k)
}
