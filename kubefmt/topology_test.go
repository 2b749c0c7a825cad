package kubefmt

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// a topology as an operator writes it: two zones on one grid with a daily
// curve, a third on a flat one, and a slow link between two of them
const exampleTopology = `{"version":1,` +
	`"zones":[{"name":"edge-a","carbonZone":"north"},{"name":"edge-b","carbonZone":"north"},{"name":"edge-c","carbonZone":"south"}],` +
	`"carbonZones":[{"name":"north","gramsPerKWh":[120,110,100,100,100,110,150,220,300,320,310,300,290,280,280,290,320,380,420,400,330,250,180,140]},` +
	`{"name":"south","gramsPerKWh":[650]}],` +
	`"network":{"intraZoneMs":0.5,"interZoneMs":12,"pairs":[{"a":"edge-a","b":"edge-c","ms":45}]}}`

func TestTopologyRoundTrip(t *testing.T) {
	got, err := DecodeTopology([]byte(exampleTopology))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Zones) != 3 || got.Zones[2] != (TopologyZone{"edge-c", "south"}) || len(got.CarbonZones[0].GramsPerKWh) != 24 ||
		got.Network == nil || got.Network.Pairs[0] != (ZonePair{"edge-a", "edge-c", 45}) {
		t.Fatalf("decoded %+v", got)
	}
	// Encode sorts: the same topology written in another order (and a pair
	// given the other way round) encodes to the example's bytes
	shuffled := *got
	shuffled.Zones = []TopologyZone{got.Zones[2], got.Zones[0], got.Zones[1]}
	shuffled.CarbonZones = []CarbonZone{got.CarbonZones[1], got.CarbonZones[0]}
	nw := *got.Network
	nw.Pairs = []ZonePair{{"edge-c", "edge-a", 45}}
	shuffled.Network = &nw
	b, err := shuffled.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != exampleTopology {
		t.Fatalf("encoded\n%s\nwant\n%s", b, exampleTopology)
	}
	// the smallest topology: a version alone (every zone flat, default RTTs)
	if tp, err := DecodeTopology([]byte(`{"version":1}`)); err != nil || tp.Network != nil || len(tp.Zones) != 0 {
		t.Fatalf("minimal topology: %+v, %v", tp, err)
	}
}

func TestDecodeTopologyRefuses(t *testing.T) {
	carbon := func(values string) string {
		return `{"version":1,"carbonZones":[{"name":"g","gramsPerKWh":[` + values + `]}]}`
	}
	pair := func(a, b, ms string) string {
		return `{"version":1,"network":{"intraZoneMs":1,"interZoneMs":2,"pairs":[{"a":"` + a + `","b":"` + b + `","ms":` + ms + `}]}}`
	}
	curve := func(n int) string { return strings.TrimSuffix(strings.Repeat("1,", n), ",") }
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", `version: 1`, "invalid character"},
		{"wrong version", `{"version":2}`, "version 2"},
		{"no version", `{}`, "version 0"},
		{"unknown field", `{"version":1,"nodes":[]}`, `unknown field "nodes"`},
		{"unknown zone field", `{"version":1,"zones":[{"name":"a","rtt":3}]}`, `unknown field "rtt"`},
		{"unknown network field", `{"version":1,"network":{"intraZoneMs":1,"interZoneMs":2,"wanMs":3}}`, `unknown field "wanMs"`},
		{"case-folded key", `{"version":1,"Zones":[]}`, `unknown field "Zones"`},
		{"repeated key", `{"version":1,"zones":[],"zones":[]}`, `"zones" given twice`},
		{"object for a list", `{"version":1,"zones":{"name":"a"}}`, "an object where an array"},
		{"list for an object", `{"version":1,"network":[]}`, "an array where an object"},
		{"trailing data", `{"version":1} {}`, "data after"},
		{"empty zone name", `{"version":1,"zones":[{"name":""}]}`, "zones[0].name: empty zone name"},
		{"zone twice", `{"version":1,"zones":[{"name":"a"},{"name":"a"}]}`, "zones[1]: a given twice"},
		{"unknown carbon zone", `{"version":1,"zones":[{"name":"a","carbonZone":"g"}]}`, `carbon zone "g" is not in carbonZones`},
		{"carbon zone twice", `{"version":1,"carbonZones":[{"name":"g","gramsPerKWh":[1]},{"name":"g","gramsPerKWh":[2]}]}`, "carbonZones[1]: g given twice"},
		{"space in carbon zone", `{"version":1,"carbonZones":[{"name":"g h","gramsPerKWh":[1]}]}`, "carbon zone name"},
		{"empty curve", carbon(""), "0 hourly values, want 1 to 168"},
		{"curve longer than a week", carbon(curve(MaxCarbonCurve + 1)), "169 hourly values"},
		{"negative intensity", carbon("100,-1"), "gramsPerKWh[1] = -1"},
		{"intensity too high", carbon("1e6"), "gramsPerKWh[0] = 1e+06"},
		{"intensity overflows", carbon("1e400"), "cannot unmarshal"},
		{"NaN as a string", carbon(`"NaN"`), "cannot unmarshal"},
		{"negative RTT", `{"version":1,"network":{"intraZoneMs":-1,"interZoneMs":2}}`, "intraZoneMs -1"},
		{"RTT too high", pair("a", "b", "2e6"), "ms 2e+06"},
		{"pair with itself", pair("a", "a", "3"), "a zone with itself"},
		{"empty pair zone", pair("a", "", "3"), "pairs[0].b: empty zone name"},
		{"pair twice, either way round", `{"version":1,"network":{"intraZoneMs":1,"interZoneMs":2,"pairs":[{"a":"x","b":"y","ms":1},{"a":"y","b":"x","ms":2}]}}`, "pairs[1]: y-x given twice"},
		{"too many zones in pairs", `{"version":1,"network":{"intraZoneMs":1,"interZoneMs":2,"pairs":[` + manyPairs(MaxTopologyZones/2+1) + `]}}`, "more than 1024 zones named"},
		{"too many zones", `{"version":1,"zones":[` + strings.TrimSuffix(strings.Repeat(`{"name":"z"},`, MaxTopologyZones+1), ",") + `]}`, "1025 zones"},
		{"too large", `{"version":1,"zones":[{"name":"` + strings.Repeat("x", MaxTopologyBytes) + `"}]}`, "bytes, at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := DecodeTopology([]byte(tc.in))
			if !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %+v, %v; want ErrTopology naming %q", tp, err, tc.want)
			}
		})
	}
	// whatever decodes encodes: 1e5 re-encodes as 100000 (6 bytes for 3),
	// so this input fits the limit but its canonical encoding does not,
	// and Decode refuses it already (check, configmap and the plugin agree)
	var grow strings.Builder
	grow.WriteString(`{"version":1,"carbonZones":[`)
	for i := range MaxTopologyZones {
		if i > 0 {
			grow.WriteByte(',')
		}
		fmt.Fprintf(&grow, `{"name":"z%d","gramsPerKWh":[%s]}`, i, strings.TrimSuffix(strings.Repeat("1e5,", MaxCarbonCurve), ","))
	}
	grow.WriteString(`]}`)
	if n := grow.Len(); n > MaxTopologyBytes {
		t.Fatalf("the growing input is %d bytes, over the limit itself", n)
	}
	if _, err := DecodeTopology([]byte(grow.String())); !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), "bytes encoded, at most") {
		t.Fatalf("a topology whose canonical encoding is over the limit: %v", err)
	}
	// names keep their bytes in the encoding ("<" is not escaped)
	if b, err := (&Topology{Version: 1, Zones: []TopologyZone{{Name: "a<b"}}}).Encode(); err != nil || !strings.Contains(string(b), `"a<b"`) {
		t.Fatalf("encoding of a<b: %s, %v", b, err)
	}
	// Encode refuses what Decode refuses: a NaN intensity cannot be written
	bad := &Topology{Version: 1, CarbonZones: []CarbonZone{{"g", []float64{math.NaN()}}}}
	if _, err := bad.Encode(); !errors.Is(err, ErrTopology) {
		t.Fatalf("NaN intensity encoded: %v", err)
	}
}

// manyPairs is n pairs of zones named nowhere else, 2n zones in all.
func manyPairs(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"a":"p%d","b":"q%d","ms":1}`, i, i)
	}
	return b.String()
}

// FuzzDecodeTopology: no input panics, and whatever decodes encodes and
// decodes again to the same topology.
func FuzzDecodeTopology(f *testing.F) {
	f.Add([]byte(exampleTopology))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"zones":[{"name":"a"}],"network":{"intraZoneMs":0,"interZoneMs":0,"pairs":[]}}`))
	f.Add([]byte(`{"version":1,"zones":[],"zones":[{"name":"a","name":"b"}]}`))
	f.Add([]byte(`{"version":1,"carbonZones":[{"name":"g","gramsPerKWh":[1e5,0]}],"network":{"pairs":[{"a":"x","b":"y","ms":1e6}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tp, err := DecodeTopology(b)
		if err != nil {
			if !errors.Is(err, ErrTopology) {
				t.Fatalf("error without ErrTopology: %v", err)
			}
			return
		}
		enc, err := tp.Encode()
		if err != nil {
			t.Fatalf("a decoded topology does not encode: %v", err)
		}
		back, err := DecodeTopology(enc)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		again, err := back.Encode()
		if err != nil || string(again) != string(enc) {
			t.Fatalf("re-encoded differs:\n%s\n%s (%v)", enc, again, err)
		}
		if len(back.Zones) != len(tp.Zones) || len(back.CarbonZones) != len(tp.CarbonZones) || !reflect.DeepEqual(back.Network == nil, tp.Network == nil) {
			t.Fatalf("round trip changed the topology: %+v vs %+v", back, tp)
		}
	})
}
