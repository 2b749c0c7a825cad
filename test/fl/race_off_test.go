//go:build !race

package fl

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = false
