package serving

import (
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// TestNodeIndex checks the pointer table against a Go map at sizes around
// its growth points (every key found with its value, foreign and nil keys
// not found, a repeated put overwrites), and that the table stays at most
// half full (so a miss always ends at an empty slot).
func TestNodeIndex(t *testing.T) {
	var none *nodeIndex
	if _, ok := none.get(&framework.NodeInfo{}); ok {
		t.Fatal("nil table found a key")
	}
	for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 100, 1023, 1024, 5000} {
		keys := make([]*framework.NodeInfo, n)
		want := make(map[*framework.NodeInfo]int32, n)
		tab := newNodeIndex(n)
		for i := range keys {
			keys[i] = &framework.NodeInfo{}
			tab.put(keys[i], int32(i))
			want[keys[i]] = int32(i)
		}
		if n > 0 { // overwrite one
			tab.put(keys[n/2], -7)
			want[keys[n/2]] = -7
		}
		if 2*n > len(tab.slots) {
			t.Fatalf("n=%d: %d slots, more than half full", n, len(tab.slots))
		}
		for k, w := range want {
			if got, ok := tab.get(k); !ok || got != w {
				t.Fatalf("n=%d: get = %d, %v; want %d", n, got, ok, w)
			}
		}
		for range 100 {
			if _, ok := tab.get(&framework.NodeInfo{}); ok {
				t.Fatalf("n=%d: a foreign key was found", n)
			}
		}
		if _, ok := tab.get(nil); ok {
			t.Fatalf("n=%d: nil key found", n)
		}
	}
}

// BenchmarkNodeIndex compares the table's lookup with a Go map's at 5,000
// nodes (the Score path's lookup).
func BenchmarkNodeIndex(b *testing.B) {
	const n = 5000
	keys := make([]*framework.NodeInfo, n)
	m := make(map[*framework.NodeInfo]int32, n)
	tab := newNodeIndex(n)
	for i := range keys {
		keys[i] = framework.NewNodeInfo()
		m[keys[i]] = int32(i)
		tab.put(keys[i], int32(i))
	}
	b.Run("table", func(b *testing.B) {
		var s int32
		for b.Loop() {
			for _, k := range keys {
				v, _ := tab.get(k)
				s += v
			}
		}
		_ = s
	})
	b.Run("map", func(b *testing.B) {
		var s int32
		for b.Loop() {
			for _, k := range keys {
				s += m[k]
			}
		}
		_ = s
	})
}
