//go:build linux

package edgectl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgesched/edgesched/internal/edgectl"
)

// helperEnv carries the arguments of TestHelperEdgectl's process;
// readyEnv the file it creates once SIGTERM cancels its context.
const (
	helperEnv = "EDGECTL_TEST_HELPER_ARGS"
	readyEnv  = "EDGECTL_TEST_HELPER_READY"
)

// TestHelperEdgectl is not a test: TestBoundedInputs runs the test binary
// again with it, as a process that is edgectl (signals turned into the
// command's context as cmd/edgectl does, 2 GiB of data at most so a read
// without bound ends there rather than on the machine).
func TestHelperEdgectl(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("helper process of TestBoundedInputs: runs only as its child")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: 2 << 30, Max: 2 << 30})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if p := os.Getenv(readyEnv); p != "" {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	cmd := edgectl.NewRootCommand(edgectl.Options{})
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "edgectl:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// rssGrowth bounds how far above an idle edgectl's max RSS a refusal
// may go. The largest is the pod CSV's: its 200,000 rows are parsed
// before the 200,001st is refused: 124 MB above 'edgectl version' (68
// MB) without the race detector, 440 MB above it (113 MB) with it, whose
// shadow memory makes the rest (the bound is tripled there). Reading
// without a bound went to 24 GB.
const rssGrowth = 256 << 20

// child is a finished edgectl process.
type child struct {
	code    int
	stderr  string
	maxRSS  int64 // KiB
	signals string
	killed  bool // it had to be killed: it ignored SIGTERM
}

// runChild runs edgectl with args (stdin: in, nil for none); termAfter
// (0: never) after the process has its signal handler (a SIGTERM sent
// before it would kill the process, not cancel the command: the test
// binary under the race detector can take over a second to start) it
// sends SIGTERM, and SIGKILL 5 s later, or at limit.
func runChild(t *testing.T, args []string, stdin *os.File, termAfter, limit time.Duration) child {
	t.Helper()
	raw, _ := json.Marshal(args)
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEdgectl$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw), readyEnv+"="+ready)
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var c child
	deadline := time.After(limit)
	var term, poll <-chan time.Time
	if termAfter > 0 {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		poll = tick.C
	}
	var kill <-chan time.Time
wait:
	for {
		select {
		case <-done:
			break wait
		case <-poll:
			if _, err := os.Stat(ready); err == nil {
				poll, term = nil, time.After(termAfter)
			}
		case <-term:
			term = nil
			c.signals += "SIGTERM "
			_ = cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(5 * time.Second)
		case <-kill:
			c.killed = true
			_ = cmd.Process.Kill()
			<-done
			break wait
		case <-deadline:
			c.killed = true
			_ = cmd.Process.Kill()
			<-done
			break wait
		}
	}
	c.code = cmd.ProcessState.ExitCode()
	c.stderr = stderr.String()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.maxRSS = ru.Maxrss
	}
	return c
}

// TestBoundedInputs reproduces finding 7 of issue 21 (edgectl read whole
// files, hung on FIFOs, ignored SIGTERM, cut long training configs and
// trained silently on empty ones), each case a process running edgectl:
// every input must be refused with an error naming the file and the
// limit (or the kind of file), quickly, within bounded memory (max RSS
// at most rssGrowth above that of 'edgectl version' in the same build),
// and a read blocked on stdin must end on SIGTERM.
func TestBoundedInputs(t *testing.T) {
	base := runChild(t, []string{"version"}, nil, 0, 60*time.Second)
	if base.killed || base.code != 0 {
		t.Fatalf("edgectl version: exit %d:\n%s", base.code, tail(base.stderr))
	}
	growth := int64(rssGrowth)
	if raceEnabled {
		growth *= 3
	}
	t.Logf("edgectl version: max RSS %d MB; a refusal may use %d MB more", base.maxRSS>>10, growth>>20)
	dir := t.TempDir()
	sparse := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil { // sparse: no disk used
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	fifo := filepath.Join(dir, "pods.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// a pod list one row over the 200,000-row limit (about 9 MB)
	var csv bytes.Buffer
	csv.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
	for i := range 200_001 {
		fmt.Fprintf(&csv, "pod-%d,1000,1024,0,0,,BE,Running,%d,%d,%d\n", i, i, i+100, i)
	}
	bigCSV := filepath.Join(dir, "pods.csv")
	if err := os.WriteFile(bigCSV, csv.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	// a training config whose settings come after 1 MiB of comments: cut at
	// 1 MiB, they would be lost without a word
	longCfg := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(longCfg, []byte(strings.Repeat("# padding\n", 110_000)+"seed: 7\niterations: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyCfg := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(emptyCfg, []byte("# nothing but a comment\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe() // a stdin that never ends
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()

	cases := []struct {
		name      string
		args      []string
		stdin     *os.File
		termAfter time.Duration
		want      string
	}{
		{"pods from /dev/zero", []string{"sim", "--pods", "/dev/zero", "--policies", "best-fit", "--progress", "never"}, nil, 0, "not a regular file (a character device)"},
		{"pods from a FIFO", []string{"sim", "--pods", fifo, "--policies", "best-fit", "--progress", "never"}, nil, 0, "not a regular file (a named pipe (FIFO))"},
		{"pod CSV over the row limit", []string{"sim", "--pods", bigCSV, "--policies", "best-fit", "--progress", "never"}, nil, 0, "more than 200000 rows"},
		{"--keys a 256 MiB file", []string{"model", "verify", "--model-keys", sparse("big.pub", 256<<20), filepath.Join(dir, "x.esa")}, nil, 0, "the limit is 4096"},
		{"model inspect a 1 GiB file", []string{"model", "inspect", sparse("big.esa", 1<<30)}, nil, 0, "input exceeds its size limit"},
		{"training config over 1 MiB", []string{"train", "--config", longCfg, "--out", filepath.Join(dir, "out1"), "--progress", "never"}, nil, 0, "the limit is 1048576"},
		{"empty training config", []string{"train", "--config", emptyCfg, "--out", filepath.Join(dir, "out2"), "--progress", "never"}, nil, 0, "has no settings"},
		{"stdin that never ends, then SIGTERM", []string{"topology", "configmap", "-"}, pr, time.Second, "context canceled"},
		// the ONNX reader opened a FIFO and waited for a writer, forever
		{"model import from a FIFO", []string{"model", "import", fifo, "--out", filepath.Join(dir, "m.esm")}, nil, 0, "not a regular file (a named pipe (FIFO))"},
		// a curve mark per step: 1e-300 never ended (and filled memory)
		{"--step 1e-300", []string{"sim", "--step", "1e-300", "--policies", "best-fit", "--progress", "never"}, nil, 0, "--step: sim: invalid value: inflate step 1e-300 makes more than 100000 curve marks up to the target 1.3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c := runChild(t, tc.args, tc.stdin, tc.termAfter, 60*time.Second)
			took := time.Since(start).Round(time.Millisecond)
			t.Logf("exit %d after %v (%s), max RSS %d MB: %s", c.code, took, strings.TrimSpace(c.signals), c.maxRSS>>10, firstLine(c.stderr))
			switch {
			case c.killed:
				t.Fatalf("edgectl had to be killed (%s): it neither refused the input nor ended on SIGTERM", strings.TrimSpace(c.signals))
			case c.code != 1:
				t.Fatalf("exit code %d, want 1 (refused):\n%s", c.code, tail(c.stderr))
			case !strings.Contains(c.stderr, tc.want):
				t.Fatalf("stderr %q, want it to name %q", tail(c.stderr), tc.want)
			case (c.maxRSS-base.maxRSS)<<10 > growth:
				t.Fatalf("max RSS %d MB, %d MB above edgectl version's: the input was read beyond its limit", c.maxRSS>>10, (c.maxRSS-base.maxRSS)>>10)
			}
		})
	}
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "edgectl:") {
			return l
		}
	}
	return tail(s)
}

func tail(s string) string {
	if len(s) > 600 {
		return "..." + s[len(s)-600:]
	}
	return s
}
