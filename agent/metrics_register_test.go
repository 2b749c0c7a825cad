package agent

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsOnSharedRegistry: an agent given a registry that already
// holds collectors of its metrics' names reuses those of the same kind,
// and refuses with an error naming the metric (never a panic) the ones of
// another kind, and a second agent's sampled values.
func TestMetricsOnSharedRegistry(t *testing.T) {
	samplesHelp := "Successful samples of /proc (and the eBPF probes when loaded)."
	lastHelp := "Timestamp (the summary's ts) of the last annotation written."
	cases := []struct {
		name    string
		prepare func(reg *prometheus.Registry) // what the embedding program registered
		want    string                         // in the error; "" for success
	}{
		{"empty registry", func(*prometheus.Registry) {}, ""},
		{"Go and process collectors already there", func(reg *prometheus.Registry) {
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		}, ""},
		{"the same counter already there", func(reg *prometheus.Registry) {
			reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "_samples_total", Help: samplesHelp}))
		}, ""},
		{"a counter where the agent has a gauge", func(reg *prometheus.Registry) {
			reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "_annotation_last_write_timestamp_seconds", Help: lastHelp}))
		}, ns + "_annotation_last_write_timestamp_seconds"},
		{"same name, other labels", func(reg *prometheus.Registry) {
			reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "_annotation_writes_total", Help: "other"}, []string{"code"}))
		}, ns + "_annotation_writes_total"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			tc.prepare(reg)
			cfg := Config{NodeName: "n1", Registry: reg, Seed: 11}
			cfg.Proc.ProcRoot = "telemetry/procfs/testdata/real1/proc"
			cfg.Proc.SysRoot = "telemetry/procfs/testdata/real1/sys"
			before, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(cfg)
			if tc.want != "" {
				if !errors.Is(err, ErrMetrics) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("New: %v; want ErrMetrics naming %s", err, tc.want)
				}
				// the refused agent took back what it had registered
				after, err := reg.Gather()
				if err != nil || len(after) != len(before) {
					t.Fatalf("%d metric families after the refusal (%v), %d before", len(after), err, len(before))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a.m.samples.Inc()
			// One series of samples_total: the reused counter, counted into.
			if got := testutil.ToFloat64(a.m.samples); got != 1 {
				t.Fatalf("samples_total %v, want 1", got)
			}
			n, err := testutil.GatherAndCount(reg, ns+"_samples_total", ns+"_info")
			if err != nil || n != 2 {
				t.Fatalf("gathered %d series of samples_total and info (%v), want 2", n, err)
			}
		})
	}
}

// TestTwoAgentsOneRegistry: a second agent on the first one's registry
// gets an error naming the sampled metrics (their collector reads one
// agent), not a panic; the first keeps working.
func TestTwoAgentsOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{NodeName: "n1", Registry: reg, Seed: 1}
	cfg.Proc.ProcRoot = "telemetry/procfs/testdata/real1/proc"
	cfg.Proc.SysRoot = "telemetry/procfs/testdata/real1/sys"
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 2
	_, err = New(cfg)
	if !errors.Is(err, ErrMetrics) || !strings.Contains(err.Error(), ns+"_cpu_utilisation_ratio") {
		t.Fatalf("second agent: %v; want ErrMetrics naming the sampled metrics", err)
	}
	first.sampleOnce()
	if n, err := testutil.GatherAndCount(reg, ns+"_last_sample_timestamp_seconds"); err != nil || n != 1 {
		t.Fatalf("the first agent's sample: %d series (%v), want 1", n, err)
	}
	// the refused agent left nothing behind: one info series, the first's seed
	if n, err := testutil.GatherAndCount(reg, ns+"_info"); err != nil || n != 1 {
		t.Fatalf("%s_info: %d series (%v) after the refused second agent, want the first agent's only", ns, n, err)
	}
}

// TestSeeds: a zero Seed is replaced by a drawn non-zero one, shown by
// Seed() and edgesched_agent_info; a given one is kept; derived seeds
// depend on both the run's seed and the component's name.
func TestSeeds(t *testing.T) {
	for _, seed := range []uint64{0, 42} {
		cfg := Config{NodeName: "n1", Seed: seed}
		cfg.Proc.ProcRoot = "telemetry/procfs/testdata/real1/proc"
		cfg.Proc.SysRoot = "telemetry/procfs/testdata/real1/sys"
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case a.Seed() == 0:
			t.Fatal("the run's seed is 0")
		case seed != 0 && a.Seed() != seed:
			t.Fatalf("seed %d given, the agent uses %d", seed, a.Seed())
		case a.seed != DeriveSeed(a.Seed(), SeedAnnotator) || a.seed == a.Seed():
			t.Fatalf("annotator seed %d, want DeriveSeed(%d, %q)", a.seed, a.Seed(), SeedAnnotator)
		}
		want := `edgesched_agent_info{seed="` + strconv.FormatUint(a.Seed(), 10) + `"} 1`
		if err := testutil.GatherAndCompare(a.m.reg, strings.NewReader("# HELP edgesched_agent_info Always 1; seed is the run's seed (--seed, or the one drawn at start): every random stream of the agent derives from it.\n# TYPE edgesched_agent_info gauge\n"+want+"\n"), ns+"_info"); err != nil {
			t.Fatal(err)
		}
	}
	// DeriveSeed is a pure function of (seed, name) and separates both.
	if DeriveSeed(7, "a") != DeriveSeed(7, "a") || DeriveSeed(7, "a") == DeriveSeed(7, "b") || DeriveSeed(7, "a") == DeriveSeed(8, "a") {
		t.Fatal("DeriveSeed is not deterministic, or ignores its seed or name")
	}
}
