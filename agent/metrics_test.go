package agent

import (
	"bufio"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape GETs url and returns the samples of the text format by their
// printed name{labels}.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// copyRoot copies a captured /proc root (only the files the collector
// reads) into dir.
func copyRoot(t *testing.T, from, dir string) {
	t.Helper()
	for _, f := range []string{"stat", "meminfo", "loadavg", "net/dev", "net/snmp", "pressure/cpu", "pressure/io", "pressure/memory"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMetricsAndHealthz samples the real capture real1, then real2 (taken
// one second later) with the clock one second on, and checks /metrics
// against values computed by hand, then /healthz as sampling stalls.
func TestMetricsAndHealthz(t *testing.T) {
	root := t.TempDir()
	copyRoot(t, "telemetry/procfs/testdata/real1/proc", root)
	a, _, clk := newTestAgent(t, func(c *Config) {
		c.Proc.ProcRoot = root
		c.StallAfter = 5 * time.Second
	})
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()

	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not started") {
		t.Fatalf("healthz before Run: %d %q", code, body)
	}
	a.mu.Lock()
	a.started = clk.Now()
	a.mu.Unlock()
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz just after start: %d", code)
	}
	a.sampleOnce()
	copyRoot(t, "telemetry/procfs/testdata/real2/proc", root)
	clk.Set(t0.Add(time.Second))
	a.sampleOnce()

	m := scrape(t, srv.URL+"/metrics")
	want := map[string]float64{
		// real1 -> real2: busy 223 of 226 ticks (procfs TestParseStatReal).
		`edgesched_agent_cpu_utilisation_ratio{cpu="all"}`: 223.0 / 226,
		`edgesched_agent_cpu_utilisation_ratio{cpu="0"}`:   112.0 / 114,
		`edgesched_agent_memory_total_bytes`:               24684084 << 10,
		`edgesched_agent_memory_available_bytes`:           24016248 << 10,
		`edgesched_agent_load_average{window="1m"}`:        2.84,
		`edgesched_agent_procs{state="running"}`:           6,
		// PSI cpu some avg10=62.48 (percent) -> 0.6248.
		`edgesched_agent_pressure_avg10_ratio{kind="some",resource="cpu"}`: 0.6248,
		// total=5747001621 µs.
		`edgesched_agent_pressure_stalled_seconds_total{kind="some",resource="cpu"}`: 5747.001621,
		`edgesched_agent_network_bytes_total{device="eth0",direction="receive"}`:     445573431,
		`edgesched_agent_tcp_segments_total{kind="retrans"}`:                         11317,
		`edgesched_agent_samples_total`:                                              2,
		`edgesched_agent_sample_duration_seconds_count`:                              2,
		`edgesched_agent_sample_errors_total{source="proc"}`:                         0,
		`edgesched_agent_telemetry_source{source="proc"}`:                            1,
		`edgesched_agent_telemetry_source{source="ebpf"}`:                            0,
		`edgesched_agent_annotation_writes_total{result="ok"}`:                       0,
		`edgesched_agent_last_sample_timestamp_seconds`:                              float64(t0.Add(time.Second).Unix()),
		// The 1 s summary: the same CPU share, memory (24684084 - 24016248) /
		// 24684084, retransmits (11317 - 11317) / 1 s.
		`edgesched_agent_summary_cpu_utilisation_ratio`:      223.0 / 226,
		`edgesched_agent_summary_memory_used_ratio`:          667836.0 / 24684084,
		`edgesched_agent_summary_tcp_retransmits_per_second`: 0,
		// /proc/loadavg's first field (procfs testdata)
		`edgesched_agent_summary_load_average_1m`: 2.84,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok {
			t.Errorf("metric %s missing", k)
			continue
		}
		if math.Abs(got-v) > 1e-9*math.Max(1, math.Abs(v)) {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if _, ok := m["process_resident_memory_bytes"]; !ok {
		t.Error("process metrics missing")
	}
	for k := range m {
		if strings.HasPrefix(k, "edgesched_agent_summary{") {
			t.Errorf("%s: the summary mixing units in one metric is gone", k)
		}
	}
	if _, ok := m[`edgesched_agent_summary_runqueue_latency_p99_seconds`]; ok {
		t.Error("run-queue p99 exported without eBPF")
	}

	// A malformed file fails the sample: counted, health keeps until
	// StallAfter passes, then /healthz says why.
	os.WriteFile(filepath.Join(root, "loadavg"), []byte("garbage\n"), 0o644)
	clk.Set(t0.Add(3 * time.Second))
	a.sampleOnce()
	if m := scrape(t, srv.URL+"/metrics"); m[`edgesched_agent_sample_errors_total{source="proc"}`] != 1 || m[`edgesched_agent_samples_total`] != 2 {
		t.Fatalf("after a failed sample: errors %v, samples %v", m[`edgesched_agent_sample_errors_total{source="proc"}`], m[`edgesched_agent_samples_total`])
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz 2 s after the last good sample (bound 5 s): %d", code)
	}
	clk.Set(t0.Add(7 * time.Second))
	code, body := get(t, srv.URL+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "stalled") || !strings.Contains(body, "6s ago") || !strings.Contains(body, "loadavg") {
		t.Fatalf("healthz 6 s after the last good sample: %d %q", code, body)
	}
	// Fixed: healthy again.
	copyRoot(t, "telemetry/procfs/testdata/real2/proc", root)
	a.sampleOnce()
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz after recovery: %d", code)
	}
}
