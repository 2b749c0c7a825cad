package policy

import (
	"slices"
	"testing"
)

func TestExcludeMask(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  []string // features left out
		err   bool
	}{
		{nil, nil, false},
		{[]string{"telemetry"}, []string{"cpu_busy", "runq_p99", "mem_pressure", "retrans"}, false},
		{[]string{"dependencies", "carbon"}, []string{"carbon", "dep_zone_colocation", "dep_rtt"}, false},
		{[]string{"load"}, []string{"load"}, false},
		{[]string{"telemetri"}, nil, true},
	} {
		mask, err := ExcludeMask(c.names)
		if (err != nil) != c.err {
			t.Errorf("%v: error %v, want error %v", c.names, err, c.err)
			continue
		}
		var got []string
		for i, x := range mask {
			if x {
				got = append(got, featureList[i].Name)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: leaves out %v, want %v", c.names, got, c.want)
		}
	}
}
