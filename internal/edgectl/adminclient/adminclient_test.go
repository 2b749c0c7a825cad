package adminclient_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
	"github.com/edgesched/edgesched/internal/edgectl/edgectltest"
	"github.com/edgesched/edgesched/internal/testutil/filefixture"
)

// TestAdminVerbs drives a round and the model registry through the CLI
// against a real coordinator: round start -> the site trains -> a
// candidate model (version 2, manual publishing) -> promote -> rollback
// to version 1 (published as version 3); sites shows the site's report.
func TestAdminVerbs(t *testing.T) {
	// The site is held back until the second start has been refused:
	// with MinUpdates 1 a running site can end round 1 before it.
	f := edgectltest.NewAdminFleet(t)
	s := "--server=" + f.URL
	out, _, err := run(t, "round", "start", s)
	if err != nil || !strings.Contains(out, "round 1 opened (sync): training from model version 1") {
		t.Fatalf("round start: %v\n%s", err, out)
	}
	if _, _, err := run(t, "round", "start", s); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("second round start while collecting: %v", err)
	}
	f.StartSite()
	edgectltest.WaitFor(t, "round 1 to end", func() bool {
		r, err := f.Coord.RoundRecord(1)
		return err == nil && r.Result != 0
	})
	out, _, err = run(t, "round", "status", "1", s)
	if flat := strings.Join(strings.Fields(out), " "); err != nil || !strings.Contains(flat, "updates 1 accepted") || !strings.Contains(flat, "model version 2") {
		t.Fatalf("round status:\n%s %v", out, err)
	}
	out, _, err = run(t, "round", "list", s, "-o", "json")
	var rounds []coordinator.Round
	if err != nil || json.Unmarshal([]byte(out), &rounds) != nil || len(rounds) != 1 || rounds[0].Accepted != 1 {
		t.Fatalf("round list json: %v\n%s", err, out)
	}
	// A coordinator without --ha has no replicas to show.
	out, _, err = run(t, "replicas", s)
	if err != nil || !strings.Contains(out, "not highly available") {
		t.Fatalf("replicas:\n%s %v", out, err)
	}
	// Manual publishing: version 2 waits as a candidate.
	out, _, err = run(t, "model", "list", s)
	if err != nil || !strings.Contains(out, "v2       candidate") || !strings.Contains(out, "v1       published") {
		t.Fatalf("model list:\n%s %v", out, err)
	}
	out, _, err = run(t, "model", "promote", "2", s)
	if err != nil || !strings.Contains(out, "model version 2 published") {
		t.Fatalf("promote:\n%s %v", out, err)
	}
	edgectltest.WaitFor(t, "the site to install version 2", func() bool {
		st, err := f.Site.Status()
		return err == nil && st.Installed != nil && st.Installed.Version == 2
	})
	out, _, err = run(t, "model", "rollback", "1", s)
	if err != nil || !strings.Contains(out, "weights of version 1 published as version 3") {
		t.Fatalf("rollback:\n%s %v", out, err)
	}
	out, _, err = run(t, "model", "show", "3", s, "-o", "json")
	var m coordinator.Model
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m.Version != 3 || !strings.Contains(m.Note, "rollback to version 1") {
		t.Fatalf("model show json: %v\n%s", err, out)
	}
	v1, err := f.Coord.ModelRecord(1)
	if err != nil || m.FloatModel != v1.FloatModel {
		t.Fatalf("rollback weights: version 3 float %s, version 1 float %s (%v)", m.FloatModel, v1.FloatModel, err)
	}
	// Round 2 makes candidate version 4; a rollback publishes version 5;
	// promoting 4 now would move sites backwards and is refused.
	if _, _, err := run(t, "round", "start", s); err != nil {
		t.Fatal(err)
	}
	edgectltest.WaitFor(t, "round 2 to end", func() bool {
		r, err := f.Coord.RoundRecord(2)
		return err == nil && r.Result == 4
	})
	if out, _, err = run(t, "model", "rollback", "1", s); err != nil || !strings.Contains(out, "as version 5") {
		t.Fatalf("second rollback: %v\n%s", err, out)
	}
	out, _, err = run(t, "model", "promote", "4", s)
	if err == nil || !strings.Contains(err.Error(), "older than the published 5") {
		t.Fatalf("promoting an old version: %v\n%s", err, out)
	}
	edgectltest.WaitFor(t, "the site's report of version 5", func() bool {
		out, _, err = run(t, "sites", s, "-o", "json")
		var ss []coordinator.SiteStatus
		return err == nil && json.Unmarshal([]byte(out), &ss) == nil && len(ss) == 1 && ss[0].Report != nil && ss[0].Report.ModelVersion == 5
	})
	out, _, err = run(t, "sites", s)
	if err != nil || !strings.Contains(out, "store-1") || !strings.Contains(out, "v5") {
		t.Fatalf("sites:\n%s %v", out, err)
	}
	fields := strings.Fields(strings.Split(out, "\n")[1])
	// SITE REGISTERED LAST-SEEN(2 fields: "Ns ago") LAST-ROUND MODEL OUTBOX ACCEPTED ...
	if len(fields) < 9 || fields[4] != "2" || fields[5] != "v5" || fields[6] != "0" || fields[7] != "2" {
		t.Fatalf("sites row %q: want last round 2, model v5, outbox 0, accepted 2", fields)
	}
}

// TestVersionArg: a version or round is a positive decimal that fits 64
// bits, after at most one "v"; nothing may follow or precede it.
func TestVersionArg(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64 // 0: refused
	}{
		{"12", 12},
		{"v12", 12},
		{"1", 1},
		{"18446744073709551615", 18446744073709551615},
		{"v18446744073709551615", 18446744073709551615},
		{"0", 0},
		{"v0", 0},
		{"", 0},
		{"v", 0},
		{"vv12", 0},
		{"V12", 0},
		{"12abc", 0},
		{"12 ", 0},
		{" 12", 0},
		{"12\n", 0},
		{"1.5", 0},
		{"1e3", 0},
		{"-1", 0},
		{"+12", 0},
		{"0x10", 0},
		{"1_000", 0},
		{"18446744073709551616", 0},
		{"99999999999999999999999", 0},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := adminclient.VersionArg("version", c.in)
			if c.want != 0 {
				if err != nil || got != c.want {
					t.Fatalf("VersionArg(%q) = %d, %v; want %d", c.in, got, err, c.want)
				}
				return
			}
			if want := fmt.Sprintf("version %q: want a positive number", c.in); err == nil || err.Error() != want || got != 0 {
				t.Fatalf("VersionArg(%q) = %d, %v; want the error %q", c.in, got, err, want)
			}
		})
	}
}

func TestAdminErrors(t *testing.T) {
	f := edgectltest.StartAdminFleet(t)
	srv := "--server=" + f.URL
	// a credentials file over the cap (sparse): nats.go reads it whole at
	// every connection attempt (a 2 GiB one took 4 GB and minutes, deaf
	// to Ctrl-C)
	dir := t.TempDir()
	bigCreds := filefixture.Sparse(t, dir, "big.creds", adminclient.MaxSecretFileBytes+1)
	down := []string{"--server", "nats://127.0.0.1:1", "--timeout", "1s"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown version", []string{"model", "show", "99", srv}, "not found: model version 99"},
		{"bad version", []string{"model", "promote", "x", srv}, `version "x": want a positive number`},
		{"bad output", []string{"sites", srv, "-o", "yml"}, `-o/--output: unknown value "yml" (did you mean yaml?); valid values: table, json, yaml`},
		{"no round yet", []string{"round", "status", srv}, "coordinator: not found: no round yet (409)"},
		{"bad limit", []string{"round", "list", srv, "--limit", "0"}, "--limit 0: want 1 to 1000"},
		// above what the coordinator lists (it answers 400): refused first
		{"limit above the coordinator's", []string{"model", "list", srv, "--limit", "1001"}, "--limit 1001: want 1 to 1000"},
		{"nothing listening", []string{"sites", "--server", "nats://127.0.0.1:1", "--timeout", "1s"}, "connect to nats://127.0.0.1:1"},
		{"unknown flag", []string{"sites", "--bogus"}, "unknown flag: --bogus"},
		{"credentials over the cap", append([]string{"sites", "--creds", bigCreds}, down...), "--creds: " + bigCreds + ": input exceeds its size limit"},
		{"credentials a directory", append([]string{"sites", "--creds", dir}, down...), "--creds: " + dir + ": not a regular file (a directory)"},
		{"client certificate a directory", append([]string{"sites", "--tlscert", dir, "--tlskey", bigCreds}, down...), "--tlscert: " + dir + ": not a regular file (a directory)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := run(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: got %v, want an error containing %q", c.args, err, c.want)
			}
			if strings.HasPrefix(c.want, "--limit") && !cli.IsUsage(err) {
				t.Fatalf("%v: %v is not a usage error (exit 2)", c.args, err)
			}
			if n := strings.Count(err.Error(), "coordinator: "); n > 1 {
				t.Fatalf("%v: %q names the coordinator %d times", c.args, err, n)
			}
		})
	}
	// No coordinator on a live server: the error says so.
	plain, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go plain.Start()
	if !plain.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	defer plain.Shutdown()
	_, _, err = run(t, "round", "list", "--server", plain.ClientURL())
	if err == nil || !strings.Contains(err.Error(), "no coordinator answers") {
		t.Fatalf("no coordinator: %v", err)
	}
}
