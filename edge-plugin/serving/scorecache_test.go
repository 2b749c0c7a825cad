package serving

import "testing"

// TestCachedPodKeys checks the cache's size rule: 64 MiB of 8-byte slots,
// at most 8,192 keys, at least one.
func TestCachedPodKeys(t *testing.T) {
	for _, tc := range []struct{ nodes, want int }{
		{0, 8192},
		{100, 8192},     // 83,886 would fit
		{1000, 8192},    // 8,388 would fit
		{5000, 1677},    // 64 MiB / 40,000 B
		{20000, 419},    // 64 MiB / 160,000 B
		{10_000_000, 1}, // under one key's worth: still one
	} {
		if got := cachedPodKeys(tc.nodes); got != tc.want {
			t.Errorf("cachedPodKeys(%d) = %d, want %d", tc.nodes, got, tc.want)
		}
	}
}
