package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// What the harness did to a process.
const (
	intentNone int32 = iota
	intentKill       // SIGKILL (a fault)
	intentTerm       // SIGTERM (the clean stop at the end)
)

// proc is a child process with its log file (appended across restarts).
type proc struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error // set before done closes
	intent  atomic.Int32
	// failpoint armed in this incarnation (coordinator only).
	failpoint string
	logPath   string
	started   time.Time
}

// startProc starts path with args and extra environment, its output
// appended to logPath. Children die with the test process (Pdeathsig).
func startProc(name, path string, args, env []string, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logf, "=== %s start %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), name, strings.Join(env, " "), strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), logPath: logPath, started: time.Now()}
	go func() {
		p.waitErr = cmd.Wait()
		fmt.Fprintf(logf, "=== %s exit %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), name, p.outcome())
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	p.intent.Store(intentKill)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// term sends SIGTERM and waits up to within; a process still running then
// is killed and reported.
func (p *proc) term(within time.Duration) error {
	if p.exited() {
		return fmt.Errorf("%s had already exited: %s", p.name, p.outcome())
	}
	p.intent.Store(intentTerm)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.waitErr != nil {
			return fmt.Errorf("%s stopped with %s", p.name, p.outcome())
		}
		return nil
	case <-time.After(within):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within %v of SIGTERM (killed)", p.name, within)
	}
}

// signalled is the signal that ended the process (0 if none).
func (p *proc) signalled() syscall.Signal {
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// outcome describes how the process ended.
func (p *proc) outcome() string {
	if p.waitErr == nil {
		return "exit 0"
	}
	if s := p.signalled(); s != 0 {
		return "signal " + s.String()
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return fmt.Sprintf("exit %d", ee.ExitCode())
	}
	return p.waitErr.Error()
}

// unexpected reports whether an exited process ended on its own, other
// than by an armed failpoint (which SIGKILLs itself).
func (p *proc) unexpected() bool {
	if p.intent.Load() != intentNone {
		return false
	}
	return !(p.failpoint != "" && p.signalled() == syscall.SIGKILL)
}

// crashMarks are log lines of a crashed Go program or a race.
var crashMarks = regexp.MustCompile(`(?m)^(panic: |fatal error: |WARNING: DATA RACE|SIGSEGV|unexpected fault address)`)

// scanLog returns the crash marks of a log with a little context.
func scanLog(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	var out []string
	for _, loc := range crashMarks.FindAllIndex(b, -1) {
		end := min(loc[0]+400, len(b))
		if i := bytes.Index(b[loc[0]:end], []byte("\n\n")); i > 0 {
			end = loc[0] + i
		}
		out = append(out, string(b[loc[0]:end]))
	}
	return out
}

// tail is the end of a log, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
