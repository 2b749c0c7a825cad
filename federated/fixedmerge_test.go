package federated

import (
	"errors"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/quant/esu"
)

// TestFixedSumMergeIsFlat: 40 updates split into regions of 5, 17, 1 and
// 17, each region's sums merged into the root's (with 3 updates added
// there directly), give the coordinate sums of all 40 added to one
// FixedSum bit for bit; a partial sum beyond n terms' bound is refused
// and adds nothing.
func TestFixedSumMergeIsFlat(t *testing.T) {
	const n, dim = 40, 5000
	us := fixedUpdates(t, n, dim, 0.01, esu.Int8, 3)
	shift, wshift, ok := FixedShifts(n, 5000, 10)
	if !ok {
		t.Fatal("bounds refused")
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	flat := NewFixedSum(dim, shift, wshift, 5000*10)
	addFixed(t, flat, us, all, 8, 2, 10)
	root := NewFixedSum(dim, shift, wshift, 5000*10)
	addFixed(t, root, us, all[:3], 1, 1, 10)
	at := 3
	for _, size := range []int{5, 17, 1, 14} {
		part := NewFixedSum(dim, shift, wshift, 5000*10)
		addFixed(t, part, us, all[at:at+size], 4, 2, 10)
		if err := root.Merge(part.Hi, part.Lo, size); err != nil {
			t.Fatal(err)
		}
		at += size
	}
	if at != n || !slices.Equal(root.Hi, flat.Hi) || !slices.Equal(root.Lo, flat.Lo) {
		t.Fatalf("merged sums differ from the flat ones (%d updates placed)", at)
	}
	before := slices.Clone(root.Hi)
	big := make([]int64, dim)
	big[dim-1] = 1 << 62 // 2^126 units: more than 1 term of at most 2*limit can be
	if err := root.Merge(big, make([]uint64, dim), 1); !errors.Is(err, ErrContribution) {
		t.Fatalf("oversized partial sums: %v, want ErrContribution", err)
	}
	if !slices.Equal(root.Hi, before) {
		t.Fatal("a refused merge changed the sums")
	}
	if err := root.Merge(big[:1], make([]uint64, 1), 1); !errors.Is(err, ErrContribution) {
		t.Fatalf("wrong length: %v, want ErrContribution", err)
	}
}
