package coordinator

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPruneBackups: the newest keep backups of the directory stay, the
// others go; files that are not backups stay; and a backup directory
// whose path holds glob metacharacters prunes only itself (with a glob,
// "backups*" also matched its sibling "backups-old", whose backups were
// removed, and "b[1]" matched nothing and kept every backup).
func TestPruneBackups(t *testing.T) {
	backups := []string{"coordinator-20261201T000000.000Z.db", "coordinator-20261202T000000.000Z.db",
		"coordinator-20261203T000000.000Z.db", "coordinator-20261204T000000.000Z.db"}
	cases := []struct {
		name, dir string
		keep      int
		want      []string // what stays in dir, sorted
	}{
		{"keep 2", "backups", 2, []string{backups[2], backups[3], "notes.txt"}},
		{"keep all", "backups", 4, append(slices.Clone(backups), "notes.txt")},
		{"keep more", "backups", 9, append(slices.Clone(backups), "notes.txt")},
		{"keep 0 keeps the newest", "backups", 0, []string{backups[3], "notes.txt"}},
		{"star in the path", "backups*", 1, []string{backups[3], "notes.txt"}},
		{"brackets in the path", "b[1]", 1, []string{backups[3], "notes.txt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir, sibling := filepath.Join(root, tc.dir), filepath.Join(root, "backups-old")
			for _, d := range []string{dir, sibling, filepath.Join(root, "b1")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				for _, f := range append(slices.Clone(backups), "notes.txt") {
					if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			pruneBackups(dir, backups[3], tc.keep)
			if got := names(t, dir); !slices.Equal(got, tc.want) {
				t.Errorf("%s holds %v, want %v", tc.dir, got, tc.want)
			}
			for _, d := range []string{sibling, filepath.Join(root, "b1")} {
				if got := names(t, d); len(got) != len(backups)+1 {
					t.Errorf("sibling %s holds %v: pruning %s removed its files", filepath.Base(d), got, tc.dir)
				}
			}
		})
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
