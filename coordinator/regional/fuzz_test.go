package regional

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

// FuzzDecode: no message and subject make Decode panic. A refusal
// returns no aggregate, wraps federated.ErrRegional and comes with a
// reason: ReasonSignature exactly when the error wraps
// federated.ErrSiteSignature, ReasonMalformed otherwise. An accepted
// aggregate is its region's (subject "" or the region's own subject),
// and re-encoded with the region's key it decodes to the same aggregate.
// Seeded with real aggregates signed by the region's key and by another
// one, on the right, another region's, and no subject.
func FuzzDecode(f *testing.F) {
	signer := func(seed byte) *quant.Signer {
		s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{seed, 0x52}))
		if err != nil {
			f.Fatal(err)
		}
		return s
	}
	eu, us := signer(1), signer(2)
	var regions federated.Regions
	if err := regions.Add("eu", eu.Public(), "s1", "s2"); err != nil {
		f.Fatal(err)
	}
	if err := regions.Add("us", us.Public(), "s3"); err != nil {
		f.Fatal(err)
	}
	keys := map[string]*quant.Signer{"eu": eu, "us": us}
	for _, tc := range []struct {
		region string
		by     *quant.Signer
		sites  []federated.RegionalSite
	}{
		{"eu", eu, []federated.RegionalSite{{Site: "s1", Seq: 1, Samples: 5, Norm: 0.5}}},
		{"eu", eu, []federated.RegionalSite{{Site: "s1", Seq: 2, Samples: 1}, {Site: "s2", Seq: 9, Samples: 1 << 40, Norm: 3}}},
		{"us", us, []federated.RegionalSite{{Site: "s3", Seq: 4, Samples: 7, Norm: 1}}},
		{"eu", us, []federated.RegionalSite{{Site: "s1", Seq: 3, Samples: 2, Norm: 1}}}, // another region's key
	} {
		b, err := federated.EncodeRegional(&federated.RegionalAggregate{Header: federated.RegionalHeader{Region: tc.region, Round: 7, Shift: 84, Sites: tc.sites},
			Hi: []int64{-1, 5, 0}, Lo: []uint64{1, 2, 3}}, tc.by)
		if err != nil {
			f.Fatal(err)
		}
		for _, subject := range []string{"", federated.RegionalSubjectPrefix + "eu", federated.RegionalSubjectPrefix + "us"} {
			f.Add(subject, b)
		}
		f.Add(federated.RegionalSubjectPrefix+tc.region, b[:len(b)-1])
		f.Add(federated.RegionalSubjectPrefix+tc.region, append(bytes.Clone(b), 0))
	}
	f.Add("", []byte{})
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		a, reason, err := Decode(subject, data, &regions)
		if err != nil {
			if a != nil || !errors.Is(err, federated.ErrRegional) {
				t.Fatalf("refusal %v (aggregate %v) does not wrap ErrRegional or returned an aggregate", err, a)
			}
			want := federated.ReasonMalformed
			if errors.Is(err, federated.ErrSiteSignature) {
				want = federated.ReasonSignature
			}
			if reason != want {
				t.Fatalf("refusal %v with reason %q, want %q", err, reason, want)
			}
			return
		}
		if reason != "" {
			t.Fatalf("accepted with reason %q", reason)
		}
		region := a.Header.Region
		if subject != "" && subject != federated.RegionalSubjectPrefix+region {
			t.Fatalf("region %q's aggregate accepted on %q", region, subject)
		}
		key, ok := keys[region]
		if !ok {
			t.Fatalf("accepted an aggregate of unknown region %q", region)
		}
		again, err := federated.EncodeRegional(a, key)
		if err != nil {
			t.Fatalf("an accepted aggregate does not encode: %v", err)
		}
		back, reason, err := Decode(subject, again, &regions)
		if err != nil || reason != "" {
			t.Fatalf("re-encoded aggregate refused (%s): %v", reason, err)
		}
		if !reflect.DeepEqual(back, a) {
			t.Fatalf("round trip: %+v, decoded %+v", back, a)
		}
	})
}
