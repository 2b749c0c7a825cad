package procfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func collect(t *testing.T, cfg Config) *Sample {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var s Sample
	if err := c.Sample(&s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestCollectorCaptures runs the collector on the captured roots and
// checks the values that are not already covered by the parser tests:
// which optional sources are present and the cgroup readings.
func TestCollectorCaptures(t *testing.T) {
	cases := []struct {
		name      string
		cfg       Config
		psi       [NumPSI]bool
		cpuFull   bool
		devs      int
		tcp       bool
		cgVersion int
		cg        CgroupSample
	}{
		{
			// The root cgroup in the v1 hierarchies: cpuacct.usage
			// 25046994929490 ns, memory.usage_in_bytes 5733642240, quota -1
			// (none), limit_in_bytes 9223372036854771712 (none).
			name: "real1 root cgroup v1",
			cfg:  Config{ProcRoot: "testdata/real1/proc", SysRoot: "testdata/real1/sys", Cgroup: "/"},
			psi:  [NumPSI]bool{true, true, true}, cpuFull: true, devs: 4, tcp: true, cgVersion: 1,
			cg: CgroupSample{CPU: 25046994929490, Memory: 5733642240, HasMemory: true},
		},
		{
			// quota 50000 / period 100000 = 0.5 CPU; limit 268435456 = 256 MiB.
			name: "real cgroup v1 with limits",
			cfg:  Config{ProcRoot: "testdata/real1/proc", SysRoot: "testdata/cgroupv1/sys", Cgroup: "/edgesched-capture"},
			psi:  [NumPSI]bool{true, true, true}, cpuFull: true, devs: 4, tcp: true, cgVersion: 1,
			cg: CgroupSample{CPU: 1040460937, Memory: 749568, HasMemory: true, CPULimit: 0.5, MemoryLimit: 256 << 20},
		},
		{
			// Pure v2: usage_usec 7500000 = 7.5 s, memory.current 536870912 =
			// 512 MiB, memory.max "max", cpu.max 150000/100000 = 1.5 CPUs.
			name: "handmade cgroup v2",
			cfg:  Config{ProcRoot: "testdata/handmade/proc", SysRoot: "testdata/handmade/sys", Cgroup: "/pods/burn"},
			psi:  [NumPSI]bool{true, true, true}, cpuFull: false, devs: 2, tcp: false, cgVersion: 2,
			cg: CgroupSample{CPU: 7500 * time.Millisecond, Memory: 512 << 20, HasMemory: true, CPULimit: 1.5},
		},
		{
			name: "minimal",
			cfg:  Config{ProcRoot: "testdata/minimal/proc", SysRoot: "testdata/minimal/sys"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.CgroupVersion() != tc.cgVersion {
				t.Fatalf("cgroup version %d, want %d", c.CgroupVersion(), tc.cgVersion)
			}
			var s Sample
			if err := c.Sample(&s); err != nil {
				t.Fatal(err)
			}
			if s.Mem.MemTotal == 0 || s.Stat.Total.Idle == 0 || s.Load.Threads == 0 {
				t.Fatalf("required sources empty: %+v %+v %+v", s.Mem, s.Stat.Total, s.Load)
			}
			if s.HasPSI != tc.psi || s.PSI[PSICPU].HasFull != tc.cpuFull {
				t.Fatalf("PSI present %v (cpu full %v), want %v (%v)", s.HasPSI, s.PSI[PSICPU].HasFull, tc.psi, tc.cpuFull)
			}
			if len(s.NetDev) != tc.devs || s.HasTCP != tc.tcp {
				t.Fatalf("%d devices, tcp %v; want %d, %v", len(s.NetDev), s.HasTCP, tc.devs, tc.tcp)
			}
			if s.HasCgroup != (tc.cgVersion != 0) || s.Cgroup != tc.cg {
				t.Fatalf("cgroup %v %+v, want %+v", s.HasCgroup, s.Cgroup, tc.cg)
			}
		})
	}
}

func TestCollectorErrors(t *testing.T) {
	if _, err := New(Config{Cgroup: "kubepods"}); err == nil || !strings.Contains(err.Error(), "must start with /") {
		t.Fatalf("relative cgroup: %v", err)
	}
	if _, err := New(Config{Cgroup: "/a/../b"}); err == nil || !strings.Contains(err.Error(), "..") {
		t.Fatalf("cgroup with ..: %v", err)
	}
	_, err := New(Config{ProcRoot: "testdata/real1/proc", SysRoot: "testdata/real1/sys", Cgroup: "/no-such"})
	if err == nil || !strings.Contains(err.Error(), "/no-such") {
		t.Fatalf("missing cgroup: %v", err)
	}
	// A malformed file fails the sample with its name and line.
	dir := t.TempDir()
	for _, f := range []string{"stat", "meminfo"} {
		b, err := os.ReadFile(filepath.Join("testdata/minimal/proc", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	c, err := New(Config{ProcRoot: dir, SysRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	var s Sample
	if err := c.Sample(&s); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "loadavg") {
		t.Fatalf("missing loadavg: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "loadavg"), []byte("0.1 0.2 0.3 1/2 3\n"), 0o644)
	if err := c.Sample(&s); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "pressure"), 0o755)
	os.WriteFile(filepath.Join(dir, "pressure", "io"), []byte("some avg10=1 avg60=2 avg300=3\n"), 0o644)
	err = c.Sample(&s)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != filepath.Join(dir, "pressure", "io") || pe.Line != 1 {
		t.Fatalf("malformed PSI: %v", err)
	}
}

func TestSampleCopyTo(t *testing.T) {
	s := collect(t, Config{ProcRoot: "testdata/real1/proc", SysRoot: "testdata/real1/sys"})
	var dst Sample
	s.CopyTo(&dst)
	s.Stat.CPUs[0].User++
	s.NetDev[0].RxBytes++
	if dst.Stat.CPUs[0].User == s.Stat.CPUs[0].User || dst.NetDev[0].RxBytes == s.NetDev[0].RxBytes {
		t.Fatal("CopyTo shares slices with its source")
	}
}

// TestCollectorLive samples this machine's /proc and /sys twice and
// checks the readings are plausible and move forward.
func TestCollectorLive(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	cfg := Config{}
	if _, err := resolveCgroup("/sys", "/"); err == nil {
		cfg.Cgroup = "/" // the root cgroup, v1 or v2
	} else {
		t.Logf("no cgroup accounting readable here (%v): cgroup not sampled", err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var a, b Sample
	if err := c.Sample(&a); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := c.Sample(&b); err != nil {
			t.Fatal(err)
		}
		if b.Stat.Total.Busy()+b.Stat.Total.IdleAll() > a.Stat.Total.Busy()+a.Stat.Total.IdleAll() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/proc/stat did not advance in 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	u, ok := Utilisation(a.Stat.Total, b.Stat.Total)
	if !ok || u < 0 || u > 1 {
		t.Fatalf("utilisation %v, %v", u, ok)
	}
	if b.Mem.MemTotal < 64<<20 || b.Mem.UsedFraction() <= 0 || b.Mem.UsedFraction() >= 1 {
		t.Fatalf("meminfo %+v", b.Mem)
	}
	if len(b.Stat.CPUs) == 0 || b.Load.Threads == 0 {
		t.Fatalf("%d CPUs, %d threads", len(b.Stat.CPUs), b.Load.Threads)
	}
	if cfg.Cgroup != "" && (!b.HasCgroup || b.Cgroup.CPU < a.Cgroup.CPU || b.Cgroup.CPU == 0) {
		t.Fatalf("root cgroup CPU %v then %v", a.Cgroup.CPU, b.Cgroup.CPU)
	}
	t.Logf("live: %d CPUs, utilisation %.3f, memory used %.3f, load1 %.2f, PSI %v, %d devices, tcp %v, cgroup v%d",
		len(b.Stat.CPUs), u, b.Mem.UsedFraction(), b.Load.Load1, b.HasPSI, len(b.NetDev), b.HasTCP, c.CgroupVersion())
}

func BenchmarkSample(b *testing.B) {
	c, err := New(Config{Cgroup: "/"})
	if err != nil {
		b.Skipf("no root cgroup here: %v", err)
	}
	var s Sample
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Sample(&s); err != nil {
			b.Fatal(err)
		}
	}
}
