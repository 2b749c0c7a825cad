package coordcmd

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/quant"
)

// TestFlags: bad command lines exit 2 (docs/cli.md) with a message naming
// the problem, failures 1, -h 0, before anything is opened or connected.
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
		{"help", []string{"-h"}, 0, "-s, --server"},
		{"deprecated --nats", []string{"--nats", "nats://127.0.0.1:1"}, 2, "Flag --nats has been deprecated, use --server instead"},
		{"unknown flag", []string{"--bogus"}, 2, "unknown flag: --bogus"},
		{"stray argument", []string{"extra"}, 2, `unknown command "extra" for "edge-coordinator"`},
		{"mistyped verb", []string{"--data", dir, "bakup"}, 2, "Did you mean this?\n\tbackup"},
		{"mistyped flag", []string{"--min-update", "2"}, 2, "did you mean --min-updates?"},
		{"version with an argument", []string{"version", "x"}, 2, "version takes no arguments"},
		{"no key", []string{"--sites", dir}, 2, "--key and --sites are required"},
		{"bad key", []string{"--key", bogusKey, "--sites", dir}, 1, "--key:"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "--log-level"},
		{"backup without --out", []string{"backup", "--data", dir}, 2, "--out FILE is required"},
		{"backup of no store", []string{"backup", "--data", dir, "--out", filepath.Join(dir, "b.db")}, 1, "no such file"},
		{"check without --key", []string{"check", "--data", dir}, 2, "--key is required"},
		{"check with a bad key", []string{"check", "--data", dir, "--key", bogusKey}, 1, "--key:"},
		{"restore without --from", []string{"restore", "--data", dir}, 2, "--from FILE is required"},
		{"restore of no backup", []string{"restore", "--data", dir, "--from", filepath.Join(dir, "none.db"), "--key", bogusKey}, 1, "--key:"},
		{"backup help", []string{"backup", "-h"}, 0, "edge-coordinator backup --data DIR --out FILE"},
		{"backup's unknown flag", []string{"backup", "--dta", dir}, 2, "did you mean --data?"},
		{"region without --region", []string{"region", "--key", bogusKey, "--sites", dir}, 2, "--region, --key and --sites are required"},
		{"region with a bad key", []string{"region", "--region", "eu", "--key", bogusKey, "--sites", dir}, 1, "--key:"},
		{"region help", []string{"region", "-h"}, 0, "-region-server"},
		{"negative byte budget", []string{"--key", bogusKey, "--sites", dir, "--max-inflight-bytes", "-1"}, 2, "--max-inflight-bytes -1: want 0 (256 MiB) or more"},
		{"region's negative byte budget", []string{"region", "--region", "eu", "--key", bogusKey, "--sites", dir, "--max-inflight-bytes", "-1"}, 2, "--max-inflight-bytes -1: want 0 (256 MiB) or more"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), tc.args, &stdout, &stderr)
			out := &stderr
			if tc.code == 0 {
				out = &stdout // the help
			}
			if code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d mentioning %q", code, stdout.String(), stderr.String(), tc.code, tc.want)
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

// TestTrainGraphSAGEFlag: --train-graphsage needs a model that reads
// dep_affinity (it gives it the shipped GraphSAGE pair to train); the
// refusal names the model and says which one has weights.
func TestTrainGraphSAGEFlag(t *testing.T) {
	dir := t.TempDir()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{5}))
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := quant.WriteKeyPair(dir, "coord", s)
	if err != nil {
		t.Fatal(err)
	}
	sites := filepath.Join(dir, "sites")
	if err := os.MkdirAll(sites, 0o755); err != nil {
		t.Fatal(err)
	}
	site, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{6}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := quant.WriteKeyPair(sites, "site-a", site); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--key", key, "--sites", sites, "--data", filepath.Join(dir, "data"), "--model", "edge", "--train-graphsage"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--train-graphsage: model edge does not read dep_affinity") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 naming the model", code, stderr.String())
	}
}
