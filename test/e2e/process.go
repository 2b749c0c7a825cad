//go:build unix

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DefaultStopGrace is the time a process gets between SIGTERM and SIGKILL.
const DefaultStopGrace = 10 * time.Second

// Process is a program the harness started: in its own process group,
// with stdout and stderr in a log file.
type Process struct {
	Name    string // short name used in messages and the log file name
	LogPath string
	// URL is the https base address of the program's secure port when the
	// harness chose it (StartScheduler sets it, e.g. for GET URL+"/metrics"
	// with the admin token); empty otherwise.
	URL   string
	cmd   *exec.Cmd
	log   *os.File
	grace time.Duration

	done     chan struct{} // closed when the process has exited
	waitErr  error
	stopOnce sync.Once
	stopping chan struct{} // closed when Stop begins
}

// StartProcess starts bin with args, logging to dir/name.log. It registers
// a cleanup that stops the process by its PID and, if t failed, prints
// the log's tail. grace <= 0 means DefaultStopGrace. The environment is
// the test's, minus KINE_* and KUBECONFIG, so the caller's flags decide.
func StartProcess(t testing.TB, dir, name string, grace time.Duration, bin string, args ...string) (*Process, error) {
	t.Helper()
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "### %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KINE_") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, log: f, grace: grace,
		done: make(chan struct{}), stopping: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Logf("e2e: started %s (pid %d), log %s", name, cmd.Process.Pid, logPath)
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Logf("e2e: %v", err)
		}
		if t.Failed() {
			p.dumpLog(t)
		}
	})
	return p, nil
}

// PID is the process id (also its process group id).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and how, if Stop did not
// ask it to.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		select {
		case <-p.stopping:
			return true, nil
		default:
			return true, fmt.Errorf("%s exited unexpectedly: %v (log %s)", p.Name, p.waitErr, p.LogPath)
		}
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process, waits for it to exit for the grace
// period, then sends SIGKILL to its process group. It is idempotent; it
// returns an error only if the process could not be stopped.
func (p *Process) Stop() error {
	var err error
	p.stopOnce.Do(func() {
		close(p.stopping)
		pid := p.cmd.Process.Pid
		select {
		case <-p.done:
			return
		default:
		}
		if e := syscall.Kill(pid, syscall.SIGTERM); e != nil && !errors.Is(e, syscall.ESRCH) {
			err = fmt.Errorf("SIGTERM %s (pid %d): %w", p.Name, pid, e)
		}
		select {
		case <-p.done:
			return
		case <-time.After(p.grace):
		}
		// Its own group: pgid == pid, and only this process's children are in it.
		if e := syscall.Kill(-pid, syscall.SIGKILL); e != nil && !errors.Is(e, syscall.ESRCH) {
			err = fmt.Errorf("SIGKILL %s (pgid %d): %w", p.Name, pid, e)
			return
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			err = fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, pid)
		}
	})
	return err
}

// Signal sends sig to the process (e.g. SIGSTOP and SIGCONT to pause and
// resume it). A process that has exited is not an error.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%v %s (pid %d): %w", sig, p.Name, p.cmd.Process.Pid, err)
	}
	return nil
}

// LogTail returns up to the last n bytes of the process's log.
func (p *Process) LogTail(n int64) string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	if i := bytes.IndexByte(b, '\n'); i >= 0 && int64(len(b)) == n {
		b = b[i+1:] // start at a whole line
	}
	return string(b)
}

const logTailBytes = 24 << 10

func (p *Process) dumpLog(t testing.TB) {
	t.Logf("e2e: ---- last %d KiB of %s (%s) ----\n%s\n---- end of %s log ----",
		logTailBytes>>10, p.Name, p.LogPath, p.LogTail(logTailBytes), p.Name)
}

// FreePort returns a TCP port that was free on 127.0.0.1. Another process
// may take it before it is used; the harness retries start-up when a
// listener fails to bind.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
