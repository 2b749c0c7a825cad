package sage

import (
	"hash/fnv"
	"math/rand/v2"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// MaxFanout bounds a layer's sampled neighbours.
const MaxFanout = policy.MaxSageFanout

// aggregators returns one mean aggregator per fan-out: a service with at
// most fanout neighbours averages all of them weighted by call rate (all
// alike when every rate is 0); a busier one averages fanout neighbours
// drawn with replacement in proportion to call rate, from a generator
// seeded with seed, the layer and the service's name. Neighbours are in
// name order, so the result does not depend on the order g lists
// services or calls in.
func (c *compiled) aggregators(fanouts []int, seed uint64) []nn.Mean {
	out := make([]nn.Mean, len(fanouts))
	counts := []int{}
	for k, fan := range fanouts {
		m := &out[k]
		m.Off = make([]int32, 1, len(c.nbr)+1)
		for v, nb := range c.nbr {
			var total float64
			for _, e := range nb {
				total += e.rate
			}
			switch {
			case len(nb) == 0:
			case len(nb) <= fan:
				for _, e := range nb {
					w := 1 / float64(len(nb))
					if total > 0 {
						w = e.rate / total
					}
					m.Idx = append(m.Idx, e.idx)
					m.W = append(m.W, float32(w))
				}
			default:
				rng := rand.New(rand.NewPCG(seed, nameStream(k, c.g.Services[v].Name)))
				if cap(counts) < len(nb) {
					counts = make([]int, len(nb))
				}
				counts = counts[:len(nb)]
				clear(counts)
				for range fan {
					counts[draw(rng, nb, total)]++
				}
				for i, e := range nb {
					if counts[i] > 0 {
						m.Idx = append(m.Idx, e.idx)
						m.W = append(m.W, float32(counts[i])/float32(fan))
					}
				}
			}
			m.Off = append(m.Off, int32(len(m.Idx)))
		}
	}
	return out
}

// draw picks a neighbour with probability proportional to its rate
// (uniformly when total is 0).
func draw(rng *rand.Rand, nb []neighbour, total float64) int {
	if total <= 0 {
		return rng.IntN(len(nb))
	}
	r := rng.Float64() * total
	for i, e := range nb {
		if r < e.rate {
			return i
		}
		r -= e.rate
	}
	return len(nb) - 1
}

// nameStream is the sampling stream of a service at a layer.
func nameStream(layer int, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte{byte(layer)})
	h.Write([]byte(name))
	return h.Sum64()
}
