//go:build race

package edgectl_test

// raceEnabled: the test binary runs under the race detector (memory
// bounds are looser there).
const raceEnabled = true
