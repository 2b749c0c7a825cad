//go:build !race

package edgectl

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = false
