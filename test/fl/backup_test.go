//go:build unix

package fl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/quant"
)

// TestStoreBackupRestore: the running coordinator (two rounds done)
// writes an online backup
// (admin endpoint store.backup); its store is then damaged (garbage over
// pages); 'edge-coordinator check' refuses the damaged store and passes
// the backup; 'edge-coordinator restore' installs the backup (keeping the
// damaged file aside); the coordinator then starts on it with the rounds
// and models it had when the backup was taken.
func TestStoreBackupRestore(t *testing.T) {
	bin := buildEdgeCoordinator(t)
	srv := fltest.StartNATS(t)
	f := newFleet(t, srv.ClientURL(), 1)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := f.coordinatorConfig(data)
	cfg.AutoRounds, cfg.Rounds = true, 2 // then the store stays as it is
	c, stop := f.runCoordinator(cfg, fltest.SmallModel(t, 1))
	f.startAgent(f.sites[0], filepath.Join(dir, "agent"), f.synthetic(0), nil)
	fltest.Eventually(t, 30*time.Second, "two rounds and their models published", func() (bool, string) {
		r, err := c.RoundRecord(2)
		if err != nil || r.State != coordinator.StatePublished {
			return false, fmt.Sprint(r, err)
		}
		m, err := c.ModelRecord(3)
		return err == nil && m.Status == coordinator.ModelPublished, fmt.Sprint(m, err)
	})
	nc := fltest.Connect(t, srv.ClientURL(), "operator")
	m, err := nc.Request("edgesched.admin."+coordinator.EndpointStoreBackup, nil, 10*time.Second)
	if err != nil || m.Header.Get("Nats-Service-Error") != "" {
		t.Fatalf("store.backup: %v %s", err, m.Header.Get("Nats-Service-Error"))
	}
	var info coordinator.BackupInfo
	if err := json.Unmarshal(m.Data, &info); err != nil || info.Bytes == 0 {
		t.Fatalf("store.backup answered %s: %v", m.Data, err)
	}
	t.Logf("online backup: %s (%d bytes)", info.Path, info.Bytes)
	models, _ := c.Models(0)
	rounds, _ := c.Rounds(0)
	stop()
	db := filepath.Join(data, "coordinator.db")
	f2, err := os.OpenFile(db, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f2.WriteAt(bytes.Repeat([]byte{0xa5}, 3*4096), 2*4096); err != nil {
		t.Fatal(err)
	}
	f2.Close()
	keyPath, _, err := quant.WriteKeyPair(dir, "coordinator", f.coordKey)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	if out, err := run("check", "--data", data, "--key", keyPath); err == nil || !strings.Contains(out, db) {
		t.Fatalf("check of the damaged store: %v\n%s", err, out)
	} else {
		t.Logf("check: %s", strings.TrimSpace(out))
	}
	if out, err := run("check", "--file", info.Path, "--key", keyPath); err != nil {
		t.Fatalf("check of the backup: %v\n%s", err, out)
	}
	out, err := run("restore", "--data", data, "--from", info.Path, "--key", keyPath)
	if err != nil || !strings.Contains(out, "replaced") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	t.Logf("restore: %s", strings.TrimSpace(out))
	c2, err := coordinator.New(cfg)
	if err != nil {
		t.Fatalf("the restored store: %v", err)
	}
	defer c2.Close()
	models2, _ := c2.Models(0)
	rounds2, _ := c2.Rounds(0)
	if len(models2) != len(models) || len(rounds2) != len(rounds) || models2[0].Int8Model != models[0].Int8Model || rounds2[0].State != rounds[0].State {
		t.Fatalf("restored %d models, %d rounds; had %d, %d at the backup", len(models2), len(rounds2), len(models), len(rounds))
	}
}
