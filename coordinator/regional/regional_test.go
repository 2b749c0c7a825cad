package regional

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

func key(t *testing.T, seed byte) *quant.Signer {
	t.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{seed, 0x52}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDecode: an aggregate decodes on its region's subject (or with no
// subject); on another region's subject it is malformed, signed with
// another key it is a signature refusal, and junk is malformed.
func TestDecode(t *testing.T) {
	eu, other := key(t, 1), key(t, 2)
	var regions federated.Regions
	if err := regions.Add("eu", eu.Public(), "s1"); err != nil {
		t.Fatal(err)
	}
	enc := func(s *quant.Signer) []byte {
		b, err := federated.EncodeRegional(&federated.RegionalAggregate{Header: federated.RegionalHeader{Region: "eu", Round: 3, Shift: 84,
			Sites: []federated.RegionalSite{{Site: "s1", Seq: 1, Samples: 5, Norm: 0.5}}}, Hi: []int64{1, 2}, Lo: []uint64{3, 4}}, s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := enc(eu)
	for _, tc := range []struct {
		name, subject string
		data          []byte
		reason        string // "" : decodes
	}{
		{"own subject", federated.RegionalSubjectPrefix + "eu", good, ""},
		{"no subject", "", good, ""},
		{"another region's subject", federated.RegionalSubjectPrefix + "us", good, federated.ReasonMalformed},
		{"another key", federated.RegionalSubjectPrefix + "eu", enc(other), federated.ReasonSignature},
		{"junk", "", []byte("not an aggregate"), federated.ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, reason, err := Decode(tc.subject, tc.data, &regions)
			if tc.reason == "" {
				if err != nil || a == nil || a.Header.Region != "eu" {
					t.Fatalf("Decode: %v (reason %q), want the eu aggregate", err, reason)
				}
				return
			}
			if a != nil || reason != tc.reason || !errors.Is(err, federated.ErrRegional) && !errors.Is(err, federated.ErrSiteSignature) {
				t.Fatalf("Decode: %v, %q, %v; want reason %q", a, reason, err, tc.reason)
			}
		})
	}
}
