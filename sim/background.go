package sim

import (
	"fmt"
	"math/rand/v2"
)

// BackgroundLoad puts work outside Kubernetes on a random share of a
// fleet's nodes: each node, independently with probability Share, is busy
// outside Kubernetes for a share of its CPU drawn uniformly from [Min,
// Max] (NodeSpec.Background). A stress for policies that read telemetry:
// the busy nodes' requests look like everyone else's. The zero value puts
// none anywhere.
type BackgroundLoad struct {
	Share, Min, Max float64
}

// Validate checks 0 <= Share <= 1 and 0 <= Min <= Max <= MaxBackground;
// its error names the one at fault (share or cpu).
func (b *BackgroundLoad) Validate() error {
	switch {
	case !inRange(b.Share, 1):
		return fmt.Errorf("%w: background load share %v, want a share of the nodes in [0, 1]", ErrInvalid, b.Share)
	case !inRange(b.Min, MaxBackground) || !inRange(b.Max, MaxBackground) || b.Min > b.Max:
		return fmt.Errorf("%w: background load cpu [%v, %v], want [min, max] CPU shares with 0 <= min <= max <= %g", ErrInvalid, b.Min, b.Max, float64(MaxBackground))
	}
	return nil
}

// streamBackground is BackgroundLoad's stream of the seed it is given.
const streamBackground = 0xb6

// Apply draws the background load of nodes from seed: two numbers per
// node in order, so a node's draw does not depend on the nodes after it.
// A node with a background of its own keeps it.
func (b *BackgroundLoad) Apply(nodes []NodeSpec, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, streamBackground))
	for i := range nodes {
		u, v := rng.Float64(), rng.Float64()
		if nodes[i].Background == 0 && u < b.Share {
			nodes[i].Background = b.Min + (b.Max-b.Min)*v
		}
	}
}
