package store

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestSitesAfter: every page of the merged listing (records b, d, f; the
// registry's a, b, c, g) is the slice of the whole list that a plain
// filter-and-sort gives, from every starting name (those listed, ones in
// between, one past the end) and every limit, and walking the pages of
// two gives the whole list once; a damaged record is an error naming it.
func TestSitesAfter(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recorded := []string{"site-b", "site-d", "site-f"}
	also := []string{"site-a", "site-b", "site-c", "site-g"}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(BucketSites)
		if err != nil {
			return err
		}
		for i, s := range recorded {
			if err := PutRecord(b, []byte(s), &Site{Site: s, Accepted: i + 1}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// the reference: the union, sorted, without duplicates
	all := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(recorded), also...))))
	names := func(ss []Site) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Site)
		}
		return out
	}
	page := func(after string, limit int) []Site {
		var ss []Site
		if err := db.View(func(tx *bolt.Tx) (err error) {
			ss, err = SitesAfter(tx, after, limit, also)
			return err
		}); err != nil {
			t.Fatalf("SitesAfter(%q, %d): %v", after, limit, err)
		}
		return ss
	}
	for _, after := range []string{"", "site-a", "site-b", "site-bb", "site-c", "site-e", "site-f", "site-g", "site-z"} {
		var rest []string
		for _, s := range all {
			if s > after {
				rest = append(rest, s)
			}
		}
		for _, limit := range []int{0, 1, 2, 3, 10} {
			want := rest
			if limit > 0 && len(want) > limit {
				want = want[:limit]
			}
			got := page(after, limit)
			if !slices.Equal(names(got), want) {
				t.Errorf("SitesAfter(%q, %d) = %v, want %v", after, limit, names(got), want)
			}
			for _, s := range got {
				// a record keeps its counts; a registered site without one is zero
				if wantAcc := slices.Index(recorded, s.Site) + 1; s.Accepted != wantAcc {
					t.Errorf("SitesAfter(%q, %d): %s accepted %d, want %d", after, limit, s.Site, s.Accepted, wantAcc)
				}
			}
		}
	}
	var walked []string
	for after, pages := "", 0; ; pages++ {
		if pages > len(all) {
			t.Fatalf("paging did not end: %v", walked)
		}
		p := names(page(after, 2))
		walked = append(walked, p...)
		if len(p) < 2 {
			break
		}
		after = p[len(p)-1]
	}
	if !slices.Equal(walked, all) {
		t.Errorf("pages of 2 gave %v, want %v", walked, all)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(BucketSites).Put([]byte("site-d"), []byte("damaged")) }); err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error { _, err := SitesAfter(tx, "", 0, also); return err })
	if err == nil || !strings.Contains(err.Error(), "site-d") {
		t.Errorf("a damaged record: %v, want an error naming site-d", err)
	}
}

// TestVerdictKept: a verdict is looked up from the first kept sequence
// (from) up to the mark, down to JudgedWindow (4,096) below it.
func TestVerdictKept(t *testing.T) {
	for _, tc := range []struct {
		seq, from, hwm uint64
		want           bool
	}{
		{5, 1, 10, true},       // within the window, above from
		{5, 6, 10, false},      // below from: the older layout kept none
		{6, 6, 10, true},       // from itself
		{10, 1, 10, true},      // the mark itself
		{4905, 1, 9000, true},  // 4,095 below the mark
		{4904, 1, 9000, false}, // 4,096 below: pruned
	} {
		if got := VerdictKept(tc.seq, tc.from, tc.hwm); got != tc.want {
			t.Errorf("VerdictKept(%d, %d, %d) = %v, want %v", tc.seq, tc.from, tc.hwm, got, tc.want)
		}
	}
}
