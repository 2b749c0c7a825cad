//go:build unix

package fl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// storeRig is a coordinator store made by a real run (round 1 published,
// round 2 collecting from model version 2) with what edge-coordinator
// needs to start on a copy of it.
type storeRig struct {
	f        *fleet
	url      string
	store    string // the clean coordinator.db
	keyPath  string
	sitesDir string
	model    string
}

func newStoreRig(t *testing.T) *storeRig {
	t.Helper()
	srv := fltest.StartNATS(t)
	f := newFleet(t, srv.ClientURL(), 1)
	dir := t.TempDir()
	cfg := f.coordinatorConfig(filepath.Join(dir, "data"))
	// Rounds start on request: with AutoRounds the one agent's quick
	// updates would carry round 2 past collecting before a poll saw it.
	c, stop := f.runCoordinator(cfg, fltest.SmallModel(t, 1))
	a := f.startAgent(f.sites[0], filepath.Join(dir, "agent"), f.synthetic(0), nil)
	if _, err := c.StartRound(context.Background()); err != nil {
		t.Fatal(err)
	}
	fltest.Eventually(t, 30*time.Second, "round 1 published", func() (bool, string) {
		r, err := c.RoundRecord(1)
		return err == nil && r.State == coordinator.StatePublished, fmt.Sprint(r, err)
	})
	a.halt()
	if r, err := c.StartRound(context.Background()); err != nil || r.Round != 2 || r.State != coordinator.StateCollecting {
		t.Fatalf("second round: %+v, %v; want round 2 collecting", r, err)
	}
	stop()
	rig := &storeRig{f: f, url: srv.ClientURL(), store: filepath.Join(dir, "data", "coordinator.db")}
	var err error
	if rig.keyPath, _, err = quant.WriteKeyPair(dir, "coordinator", f.coordKey); err != nil {
		t.Fatal(err)
	}
	rig.sitesDir = filepath.Join(dir, "sites")
	if err := os.Mkdir(rig.sitesDir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, pub, err := quant.WriteKeyPair(filepath.Join(dir, "agent"), "sitekey", f.keys[f.sites[0]])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pub, filepath.Join(rig.sitesDir, f.sites[0]+".pub")); err != nil {
		t.Fatal(err)
	}
	rig.model = filepath.Join(dir, "start.esm")
	if err := nn.WriteFile(rig.model, fltest.SmallModel(t, 1), "model", nil, nil); err != nil {
		t.Fatal(err)
	}
	return rig
}

// copyStore copies the clean store into a new data directory, applies
// damage to the copy, and returns the directory.
func (rig *storeRig) copyStore(t *testing.T, damage func(t *testing.T, path string)) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(rig.store)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(data, "coordinator.db"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	if damage != nil {
		damage(t, filepath.Join(data, "coordinator.db"))
	}
	return data
}

// args is edge-coordinator's command line on data.
func (rig *storeRig) args(data string) []string {
	return []string{"--server", rig.url, "--data", data, "--key", rig.keyPath, "--sites", rig.sitesDir, "--model", rig.model,
		"--calibrate", "builtin:factory-vision", "--round-duration", "1h", "--log-level", "info"}
}

// editRecord rewrites the value under key of bucket in a stopped store.
func editRecord(t *testing.T, path string, bucket, key []byte, edit func(v []byte) []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return fmt.Errorf("no bucket %s", bucket)
		}
		v := b.Get(key)
		if v == nil {
			return fmt.Errorf("no %s/%x", bucket, key)
		}
		return b.Put(key, edit(append([]byte(nil), v...)))
	}); err != nil {
		t.Fatal(err)
	}
}

func u64key(v uint64) []byte {
	var k [8]byte
	for i := range 8 {
		k[7-i] = byte(v >> (8 * i))
	}
	return k[:]
}

// TestDamagedStoreClearError reproduces finding 3 of issue 21: a damaged
// coordinator.db made edge-coordinator panic (invalid freelist page,
// index out of range, a fault on its memory map), a flipped key or a
// changed deadline in a round record was accepted silently, and a flipped
// byte in a stored model made it retry "signature does not verify" every
// second for ever. Each damage is applied to a copy of a real store and
// edge-coordinator started on it: it must exit with status 1 (not a Go
// panic's 2) within 30 s, with one error naming the file, and no panic or
// goroutine dump. The undamaged copy starts and serves.
func TestDamagedStoreClearError(t *testing.T) {
	bin := buildEdgeCoordinator(t)
	rig := newStoreRig(t)
	garbage := func(off, n int64) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, n)
			rng := rand.New(rand.NewPCG(uint64(off), uint64(n)))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if _, err := f.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		damage func(*testing.T, string)
		want   string // in the error, besides the file's path
	}{
		{"garbage over pages 2-5", garbage(2*4096, 4*4096), ""},
		{"garbage over the free list page", func(t *testing.T, path string) { garbage(pageOf(t, path, "freelist"), 4096)(t, path) }, ""},
		{"garbage over a leaf page", func(t *testing.T, path string) { garbage(pageOf(t, path, "leaf"), 4096)(t, path) }, ""},
		{"truncated to 3 pages", func(t *testing.T, path string) {
			if err := os.Truncate(path, 3*4096); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a flipped key in a round record", func(t *testing.T, path string) {
			editRecord(t, path, []byte("rounds"), u64key(1), func(v []byte) []byte {
				return bytes.Replace(v, []byte(`"deadline"`), []byte(`"deadlinf"`), 1)
			})
		}, "rounds/1"},
		{"a changed deadline", func(t *testing.T, path string) {
			editRecord(t, path, []byte("rounds"), u64key(2), func(v []byte) []byte {
				i := bytes.Index(v, []byte(`"deadline":"`)) + len(`"deadline":"`) + 3 // the year's last digit
				v[i] = '0' + (v[i]-'0'+1)%10
				return v
			})
		}, "rounds/2"},
		{"a flipped byte in the current round's base model", func(t *testing.T, path string) {
			editRecord(t, path, []byte("blobs"), []byte(fmt.Sprintf("%020d/%s", 2, quant.Float32)), func(v []byte) []byte {
				v[len(v)/2] ^= 0x10
				return v
			})
		}, "version 2"},
	}
	t.Run("undamaged copy serves", func(t *testing.T) {
		data := rig.copyStore(t, nil)
		p := startCoordProc(t, bin, rig.args(data), "", filepath.Join(t.TempDir(), "log"))
		waitServing(t, rig.url, p)
		p.stop(t)
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := rig.copyStore(t, tc.damage)
			logPath := filepath.Join(t.TempDir(), "log")
			p := startCoordProc(t, bin, rig.args(data), "", logPath)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				b, _ := os.ReadFile(logPath)
				t.Fatalf("edge-coordinator still running 30 s after starting on a damaged store:\n%s", tail(string(b), 3000))
			}
			b, _ := os.ReadFile(logPath)
			out := string(b)
			code := p.cmd.ProcessState.ExitCode()
			var errLine string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "edge-coordinator:") {
					errLine = l
				}
			}
			t.Logf("exit %d: %s", code, errLine)
			switch {
			case code != 1 || strings.Contains(out, "goroutine ") || strings.Contains(out, "fatal error"):
				t.Fatalf("exit %d, want 1 with a clear error and no panic:\n%s", code, head(out, 4000))
			case !strings.Contains(errLine, filepath.Join(data, "coordinator.db")) || !strings.Contains(errLine, tc.want):
				t.Fatalf("error %q, want it to name %s and %q", errLine, filepath.Join(data, "coordinator.db"), tc.want)
			}
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func head(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// pageOf returns the byte offset of the first page of type typ (bbolt's
// "leaf", "branch", "freelist") in a stopped store.
func pageOf(t *testing.T, path, typ string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second}) // read-write: the free list loaded
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var off int64 = -1
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return err
			}
			if p.Type == typ {
				off = int64(id) * int64(db.Info().PageSize)
				return nil
			}
		}
	})
	if err != nil || off < 0 {
		t.Fatalf("no %s page in %s: %v", typ, path, err)
	}
	return off
}
