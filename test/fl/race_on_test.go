//go:build race

package fl

// raceEnabled: the test binary runs under the race detector (everything
// several times slower: timing bounds are measured without it).
const raceEnabled = true
