package federated_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	. "github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/quant"
)

func regionalKey(t testing.TB, seed byte) *quant.Signer {
	t.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{seed, 0x4e}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRegions: a site belongs to one region; a region's key verifies its
// own aggregates only; LoadRegions reads REGION.pub and REGION.sites.
func TestRegions(t *testing.T) {
	a, b := regionalKey(t, 1), regionalKey(t, 2)
	var r Regions
	for _, tc := range []struct {
		name   string
		region string
		key    *quant.Signer
		sites  []string
		ok     bool
	}{
		{"first", "eu", a, []string{"s1", "s2"}, true},
		{"second", "us", b, []string{"s3"}, true},
		{"a site in two regions", "ap", b, []string{"s1"}, false},
		{"a region twice", "eu", b, nil, false},
		{"a bad region name", "EU!", b, nil, false},
		{"a bad site name", "ap", b, []string{"S 4"}, false},
		{"a site twice in one region", "ap", b, []string{"s4", "s5", "s4"}, false},
	} {
		if err := r.Add(tc.region, tc.key.Public(), tc.sites...); (err == nil) != tc.ok {
			t.Fatalf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if g, _ := r.RegionOf("s3"); g != "us" || !slices.Equal(r.Names(), []string{"eu", "us"}) || !slices.Equal(r.Sites("eu"), []string{"s1", "s2"}) {
		t.Fatalf("region of s3 %q, names %v, eu's sites %v", g, r.Names(), r.Sites("eu"))
	}
	if _, ok := r.RegionOf("s9"); ok {
		t.Fatal("s9 has a region")
	}
	if _, ok := r.RegionKey("ap"); ok || slices.Contains(r.Names(), "ap") {
		t.Fatal("a refused region was registered")
	}
	agg := &RegionalAggregate{Header: RegionalHeader{Region: "eu", Round: 3, Shift: 80, Sites: []RegionalSite{{Site: "s1", Seq: 4, Samples: 10, Norm: 1}}},
		Hi: []int64{1, -1}, Lo: []uint64{2, 3}}
	good, err := EncodeRegional(agg, a)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := EncodeRegional(agg, b) // us's key signing as eu
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeRegional(good, &r); err != nil || !slices.Equal(got.Hi, agg.Hi) || got.Header.Sites[0] != agg.Header.Sites[0] || got.MsgID() != "region:eu:3" {
		t.Fatalf("decode: %+v %v", got, err)
	}
	if _, err := DecodeRegional(forged, &r); !errors.Is(err, ErrSiteSignature) || !errors.Is(err, ErrRegional) {
		t.Fatalf("forged: %v, want ErrSiteSignature and ErrRegional", err)
	}
	// a region of 2,000 sites: a header of about 150 KB, beyond the
	// control messages' 64 KB
	big := *agg
	big.Header.Sites = nil
	for i := range 2000 {
		big.Header.Sites = append(big.Header.Sites, RegionalSite{Site: fmt.Sprintf("site-%05d", i), Seq: 1 + uint64(i), Samples: 100, Norm: 0.7071067811865476})
	}
	raw, err := EncodeRegional(&big, a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeRegional(raw, &r); err != nil || len(got.Header.Sites) != 2000 {
		t.Fatalf("2,000 sites (%d bytes): %v", len(raw), err)
	}
	dir := t.TempDir()
	if _, _, err := quant.WriteKeyPair(dir, "eu", a); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "eu.sites"), []byte("s1\n# a comment\ns2 # inline\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadRegions(dir)
	if err != nil || !slices.Equal(loaded.Sites("eu"), []string{"s1", "s2"}) {
		t.Fatalf("LoadRegions: %v %v", loaded.Sites("eu"), err)
	}
}

// FuzzDecodeRegional: any input decodes or is refused with ErrRegional,
// never panics; what decodes re-encodes (same key) to an aggregate that
// decodes to the same header and sums.
func FuzzDecodeRegional(f *testing.F) {
	key := regionalKey(f, 1)
	var r Regions
	if err := r.Add("eu", key.Public(), "s1", "s2"); err != nil {
		f.Fatal(err)
	}
	for _, sites := range [][]RegionalSite{{{Site: "s1", Seq: 1, Samples: 5, Norm: 0.5}}, {{Site: "s1", Seq: 2, Samples: 1}, {Site: "s2", Seq: 9, Samples: 1 << 40, Norm: 3}}} {
		b, err := EncodeRegional(&RegionalAggregate{Header: RegionalHeader{Region: "eu", Round: 7, Shift: 84, Sites: sites}, Hi: []int64{-1, 5, 0}, Lo: []uint64{1, 2, 3}}, key)
		if err != nil {
			f.Fatal(err)
		}
		addSeeds(f, b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeRegional(b, &r)
		if err != nil {
			if a != nil || !errors.Is(err, ErrRegional) {
				t.Fatalf("refusal %v (value %v) does not wrap ErrRegional or returned a value", err, a)
			}
			return
		}
		again, err := EncodeRegional(a, key)
		if err != nil {
			t.Fatalf("a decoded aggregate does not encode: %v", err)
		}
		back, err := DecodeRegional(again, &r)
		if err != nil {
			t.Fatalf("re-encoded aggregate refused: %v", err)
		}
		if !reflect.DeepEqual(back, a) {
			t.Fatalf("round trip: %+v, decoded %+v", back, a)
		}
	})
}

// FuzzLoadRegions: no REGION.sites file makes LoadRegions panic; a
// refusal names the file's problem; a file listing a site twice is
// refused; what it accepts is the file's site IDs (comments and blank
// lines dropped), each a valid site in that region alone and listed
// once. Seeded with the documented form.
func FuzzLoadRegions(f *testing.F) {
	f.Add([]byte("s1\n# a comment\ns2 # inline\n\n"))
	f.Add([]byte("site-a\r\nsite-b\r\n"))
	f.Add([]byte("s1\ns1\n"))
	f.Add([]byte("s1\ns2 # \n s1\r\n"))
	f.Add([]byte("S 4\n"))
	f.Add([]byte("#\n  # \n\t\n"))
	f.Add([]byte{})
	key := regionalKey(f, 1)
	f.Fuzz(func(t *testing.T, sites []byte) {
		dir := t.TempDir()
		if _, _, err := quant.WriteKeyPair(dir, "eu", key); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "eu.sites"), sites, 0o600); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, line := range strings.Split(strings.ReplaceAll(string(sites), "\r\n", "\n"), "\n") {
			line, _, _ = strings.Cut(line, "#")
			if line = strings.TrimSpace(line); line != "" {
				want = append(want, line)
			}
		}
		r, err := LoadRegions(dir)
		if err != nil {
			if !errors.Is(err, ErrRegional) && !errors.Is(err, boundedio.ErrTooLarge) {
				t.Fatalf("refusal %v does not wrap ErrRegional", err)
			}
			return
		}
		slices.Sort(want)
		if len(slices.Compact(slices.Clone(want))) != len(want) {
			t.Fatalf("a file listing a site twice was accepted: eu's sites %q", r.Sites("eu"))
		}
		if got := r.Sites("eu"); !slices.Equal(got, want) || !slices.Equal(r.Names(), []string{"eu"}) {
			t.Fatalf("regions %v, eu's sites %q; the file lists %q", r.Names(), got, want)
		}
		for _, s := range want {
			if g, ok := r.RegionOf(s); !ok || g != "eu" || !ValidSite(s) {
				t.Fatalf("site %q: region %q %v", s, g, ok)
			}
		}
	})
}

// TestLoadRegionsSitesFile: REGION.sites is site IDs one a line,
// comments and blank lines dropped; a site on two lines (a copy-paste
// slip in a hand-edited allow-list) would count twice wherever the
// region's sites are counted, so it is refused with an error naming the
// file, both lines, the region and the site, as a bad site ID is.
func TestLoadRegionsSitesFile(t *testing.T) {
	key := regionalKey(t, 1)
	for _, tc := range []struct {
		name  string
		file  string
		want  []string // nil: refused
		wants []string // the refusal says these
	}{
		{"the documented form", "s1\n# a comment\ns2 # inline\n\n", []string{"s1", "s2"}, nil},
		{"CRLF, unsorted", "s2\r\ns1\r\n", []string{"s1", "s2"}, nil},
		{"empty", "", []string{}, nil},
		{"a site on two lines", "s1\ns2\ns1\n", nil, []string{"eu.sites line 3", `region "eu"`, `site "s1" twice`, "first on line 1"}},
		{"a site twice, once with a comment", "s1\n\n# again:\n  s1\t# the same\n", nil, []string{"eu.sites line 4", `site "s1" twice`, "first on line 1"}},
		{"a site twice in CRLF", "s1\r\ns1\r\n", nil, []string{"eu.sites line 2", `site "s1" twice`}},
		{"a bad site ID", "s1\nS 4\n", nil, []string{`site "S 4" is not a DNS label`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, _, err := quant.WriteKeyPair(dir, "eu", key); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "eu.sites"), []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := LoadRegions(dir)
			if tc.want != nil {
				if err != nil || !slices.Equal(r.Sites("eu"), tc.want) {
					t.Fatalf("eu's sites %v, %v; want %v", r.Sites("eu"), err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrRegional) || r != nil {
				t.Fatalf("eu's sites %v, %v; want a refusal wrapping ErrRegional", r.Sites("eu"), err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestLoadRegionsLongLine: a line longer than bufio.Scanner's default
// 64 KiB (a long comment) is read whole; it used to end the file's
// reading silently, leaving the region without the sites after it. A
// file over the cap is refused.
func TestLoadRegionsLongLine(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := quant.WriteKeyPair(dir, "eu", regionalKey(t, 1)); err != nil {
		t.Fatal(err)
	}
	sites := filepath.Join(dir, "eu.sites")
	if err := os.WriteFile(sites, []byte("s1\n# "+strings.Repeat("x", 70_000)+"\ns2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := LoadRegions(dir); err != nil || !slices.Equal(r.Sites("eu"), []string{"s1", "s2"}) {
		t.Fatalf("LoadRegions: eu's sites %v, %v; want [s1 s2]", r.Sites("eu"), err)
	}
	if err := os.WriteFile(sites, []byte("s1\n# "+strings.Repeat("x", 1<<20)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRegions(dir); !errors.Is(err, boundedio.ErrTooLarge) {
		t.Fatalf("a sites file over 1 MiB: %v, want ErrTooLarge", err)
	}
}
