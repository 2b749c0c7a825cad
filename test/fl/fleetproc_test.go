//go:build linux

package fl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// The processes of the fleet-scale run (fleetscale_test.go): the root
// coordinator and each regional aggregator are edge-coordinator child
// processes, and each NATS server a nats-server one, so their CPU time
// and memory are their own; /proc gives them while they run, rusage once
// they exited.

// clockTicks is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procUsage is a process's CPU time so far (user + system) and its peak
// resident set (VmHWM).
type procUsage struct {
	cpu  time.Duration
	peak uint64 // bytes
}

// readProcUsage reads pid's procUsage from /proc.
func readProcUsage(pid int) (procUsage, error) {
	var u procUsage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("read stat: %w", err)
	}
	// the command name (field 2) is in parentheses and may hold spaces:
	// the fields after its closing one start at field 3 (state), so
	// utime (14) and stime (15) are the 12th and 13th
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(f) < 13 {
		return u, fmt.Errorf("parse stat: %q", stat)
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return u, fmt.Errorf("parse stat: %w", err)
		}
		ticks += n
	}
	u.cpu = time.Duration(ticks) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read status: %w", err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return u, fmt.Errorf("parse VmHWM: %w", err)
			}
			u.peak = kb << 10
			return u, nil
		}
	}
	return u, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// fleetProc is one edge-coordinator process of a fleet run.
type fleetProc struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error // set before done closes
	logPath string
}

// startFleetProc starts bin with args, its output into logPath; the
// test's cleanup kills it should it still run (and logs its output
// when the test failed).
func startFleetProc(tb testing.TB, name, bin, logPath string, args ...string) *fleetProc {
	tb.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	p := &fleetProc{name: name, cmd: cmd, done: make(chan struct{}), logPath: logPath}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	tb.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Kill()
			<-p.done
		}
		if tb.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				tb.Logf("%s log (last 4 KB):\n%s", name, b[max(0, len(b)-4096):])
			}
		}
	})
	return p
}

func (p *fleetProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// usage is the running process's procUsage.
func (p *fleetProc) usage(tb testing.TB) procUsage {
	tb.Helper()
	if p.exited() {
		tb.Fatalf("%s exited: %v", p.name, p.waitErr)
	}
	u, err := readProcUsage(p.cmd.Process.Pid)
	if err != nil {
		tb.Fatalf("%s: %v", p.name, err)
	}
	return u
}

// stop ends the process with SIGTERM, expects a clean exit and returns
// its whole life's CPU time (user + system) from rusage.
func (p *fleetProc) stop(tb testing.TB) time.Duration {
	tb.Helper()
	if p.exited() {
		tb.Fatalf("%s exited on its own: %v", p.name, p.waitErr)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		tb.Fatalf("%s did not exit within a minute of SIGTERM", p.name)
	}
	if p.waitErr != nil {
		tb.Fatalf("%s stopped with %v", p.name, p.waitErr)
	}
	ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		tb.Fatalf("%s: no rusage", p.name)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// logged waits until the process's log has a line holding every one of
// parts (the process is up to that point), failing should it exit.
func (p *fleetProc) logged(tb testing.TB, within time.Duration, parts ...string) {
	tb.Helper()
	what := fmt.Sprintf("%s to log %q", p.name, parts)
	fltest.Eventually(tb, within, what, func() (bool, string) {
		if p.exited() {
			tb.Fatalf("%s exited: %v", p.name, p.waitErr)
		}
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			return false, err.Error()
		}
	lines:
		for line := range strings.Lines(string(b)) {
			for _, s := range parts {
				if !strings.Contains(line, s) {
					continue lines
				}
			}
			return true, ""
		}
		return false, filepath.Base(p.logPath) + " has no such line yet"
	})
}

// errAdmin is an error answer of the coordinator's admin API.
var errAdmin = errors.New("admin error")

// askAdmin calls the coordinator's admin endpoint on nc and decodes its
// answer into out.
func askAdmin(nc *nats.Conn, endpoint string, req coordinator.AdminRequest, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, federated.AdminSubjectPrefix+"."+endpoint, body)
	if err != nil {
		return fmt.Errorf("admin %s: %w", endpoint, err)
	}
	if e := msg.Header.Get(micro.ErrorHeader); e != "" {
		return fmt.Errorf("%w: %s: %s", errAdmin, endpoint, e)
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("admin %s: decode answer: %w", endpoint, err)
	}
	return nil
}

// natsProc is a nats-server process with JetStream: its client URL and
// its monitoring endpoint.
type natsProc struct {
	*fleetProc
	url, monitor string
}

// startNATSProc runs bin (nats-server) with JetStream on loopback, on
// ports it picks itself and writes into a ports file in dir, its store
// and log in dir too; it returns once the ports are known.
func startNATSProc(tb testing.TB, name, bin, dir string) *natsProc {
	tb.Helper()
	portsDir := filepath.Join(dir, name+"-ports")
	if err := os.Mkdir(portsDir, 0o700); err != nil {
		tb.Fatal(err)
	}
	p := startFleetProc(tb, name, bin, filepath.Join(dir, name+".log"), "-a", "127.0.0.1", "-p", "-1", "-m", "-1",
		"-js", "-sd", filepath.Join(dir, name+"-store"), "--ports_file_dir", portsDir)
	portsFile := filepath.Join(portsDir, fmt.Sprintf("%s_%d.ports", filepath.Base(bin), p.cmd.Process.Pid))
	var ports server.Ports
	fltest.Eventually(tb, 30*time.Second, name+"'s ports file", func() (bool, string) {
		if p.exited() {
			tb.Fatalf("%s exited: %v", name, p.waitErr)
		}
		b, err := os.ReadFile(portsFile)
		if err == nil {
			err = json.Unmarshal(b, &ports)
		}
		return err == nil && len(ports.Nats) > 0 && len(ports.Monitoring) > 0, fmt.Sprint(err)
	})
	return &natsProc{fleetProc: p, url: ports.Nats[0], monitor: ports.Monitoring[0]}
}

// inBytes is the bytes the server received from its clients so far
// (its /varz in_bytes).
func (n *natsProc) inBytes(tb testing.TB) int64 {
	tb.Helper()
	resp, err := http.Get(n.monitor + "/varz")
	if err != nil {
		tb.Fatalf("%s: %v", n.name, err)
	}
	defer resp.Body.Close()
	var v struct {
		InBytes int64 `json:"in_bytes"`
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s /varz: %s %v", n.name, resp.Status, err)
	}
	return v.InBytes
}
