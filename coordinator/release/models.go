package release

import (
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// MaxCachedModels bounds the decoded float models a Models keeps: one
// version a round, rollbacks and the regional endpoint (any round's base,
// on a region's request) would otherwise keep every version ever decoded.
const MaxCachedModels = 4

// Models decodes stored float models (LoadFloat, checked against Own and
// Other) and keeps the newest MaxCachedModels of them by version, and the
// parameter count of every version it decoded, which is what judging an
// update needs of its base. The zero value with the keys set is ready. Not
// safe for concurrent use: the coordinator calls it under its lock.
type Models struct {
	Own   *quant.Signer
	Other *quant.Keyring

	cache map[uint64]*nn.Model
	dims  map[uint64]int
}

// Float returns the float model of a stored version. The oldest cached
// version goes first when the cache is full: the current round's base is
// the newest or close to it.
func (m *Models) Float(tx *bolt.Tx, version uint64) (*nn.Model, error) {
	if f, ok := m.cache[version]; ok {
		return f, nil
	}
	f, err := LoadFloat(tx, version, m.Own, m.Other)
	if err != nil {
		return nil, err
	}
	if m.cache == nil {
		m.cache = map[uint64]*nn.Model{}
	}
	for len(m.cache) >= MaxCachedModels {
		delete(m.cache, slices.Min(slices.Collect(maps.Keys(m.cache))))
	}
	m.cache[version] = f
	if m.dims == nil {
		m.dims = map[uint64]int{}
	}
	m.dims[version] = f.NumParams()
	return f, nil
}

// Dims returns the parameter count of a stored version (decoding it only
// the first time).
func (m *Models) Dims(tx *bolt.Tx, version uint64) (int, error) {
	if n, ok := m.dims[version]; ok {
		return n, nil
	}
	f, err := m.Float(tx, version)
	if err != nil {
		return 0, err
	}
	return f.NumParams(), nil
}

// Cached returns the versions whose decoded models m holds (at most
// MaxCachedModels), ascending.
func (m *Models) Cached() []uint64 { return slices.Sorted(maps.Keys(m.cache)) }
