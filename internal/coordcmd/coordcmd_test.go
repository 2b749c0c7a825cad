package coordcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlags: bad command lines exit 1 with a message naming the problem,
// -h exits 0, before anything is opened or connected.
func TestFlags(t *testing.T) {
	dir := t.TempDir()
	bogusKey := filepath.Join(dir, "bogus.key")
	if err := os.WriteFile(bogusKey, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "-nats"},
		{"unknown flag", []string{"--bogus"}, 1, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"extra"}, 1, `unexpected arguments ["extra"]`},
		{"no key", []string{"--sites", dir}, 1, "--key and --sites are required"},
		{"bad key", []string{"--key", bogusKey, "--sites", dir}, 1, "--key:"},
		{"bad log level", []string{"--log-level", "loud"}, 1, "--log-level"},
		{"backup without --out", []string{"backup", "--data", dir}, 1, "--out FILE is required"},
		{"backup of no store", []string{"backup", "--data", dir, "--out", filepath.Join(dir, "b.db")}, 1, "no such file"},
		{"check without --key", []string{"check", "--data", dir}, 1, "--key is required"},
		{"check with a bad key", []string{"check", "--data", dir, "--key", bogusKey}, 1, "--key:"},
		{"restore without --from", []string{"restore", "--data", dir}, 1, "--from FILE is required"},
		{"restore of no backup", []string{"restore", "--data", dir, "--from", filepath.Join(dir, "none.db"), "--key", bogusKey}, 1, "--key:"},
		{"backup help", []string{"backup", "-h"}, 0, "usage: edge-coordinator backup"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := Main(context.Background(), tc.args, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d mentioning %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

func TestScenarioCalibration(t *testing.T) {
	if _, err := ScenarioCalibration("builtin:no-such"); err == nil {
		t.Fatal("unknown scenario: want an error")
	}
	calib, err := ScenarioCalibration("builtin:factory-vision")
	if err != nil {
		t.Fatal(err)
	}
	if calib == nil {
		t.Fatal("nil calibration")
	}
}
