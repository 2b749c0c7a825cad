package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgesched/edgesched/coordinator/metrics"
)

// TestInflightGauge: edgesched_coordinator_ingest_inflight_bytes reads
// what SetInflight gave it at each gathering, 0 before and after nil.
func TestInflightGauge(t *testing.T) {
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	const name = "edgesched_coordinator_ingest_inflight_bytes"
	held := int64(0)
	for _, tc := range []struct {
		name string
		set  func()
		want float64
	}{
		{"before SetInflight", func() {}, 0},
		{"ingest holds 3 MiB", func() { m.SetInflight(func() int64 { return held }); held = 3 << 20 }, 3 << 20},
		{"read again at each gathering", func() { held = 17 }, 17},
		{"nil", func() { m.SetInflight(nil) }, 0},
	} {
		tc.set()
		got, err := testutil.GatherAndCount(m.Gatherer, name)
		if err != nil || got != 1 {
			t.Fatalf("%s: %d series of %s (%v), want 1", tc.name, got, name, err)
		}
		mfs, err := m.Gatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				if v := mf.GetMetric()[0].GetGauge().GetValue(); v != tc.want {
					t.Errorf("%s: %s = %v, want %v", tc.name, name, v, tc.want)
				}
			}
		}
	}
}
