package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// seed adds every capture of name (a path under each testdata root).
func seed(f *testing.F, rel ...string) {
	for _, r := range rel {
		for _, root := range []string{"real1", "real2", "handmade", "minimal", "cgroupv1"} {
			if b, err := os.ReadFile(filepath.Join("testdata", root, r)); err == nil {
				f.Add(b)
			}
		}
	}
}

// checkErr fails unless err is nil or a *ParseError.
func checkErr(t *testing.T, err error) {
	var pe *ParseError
	if err != nil && (!errors.As(err, &pe) || !errors.Is(err, ErrMalformed)) {
		t.Fatalf("error %v is not a *ParseError", err)
	}
}

func FuzzParseStat(f *testing.F) {
	seed(f, "proc/stat")
	var st Stat
	f.Fuzz(func(t *testing.T, b []byte) {
		err := ParseStat("stat", b, &st)
		checkErr(t, err)
		if err == nil && len(st.CPUs) != len(st.Online) {
			t.Fatalf("%d CPUs, %d online flags", len(st.CPUs), len(st.Online))
		}
	})
}

func FuzzParseMeminfo(f *testing.F) {
	seed(f, "proc/meminfo")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMeminfo("meminfo", b)
		checkErr(t, err)
		if u := m.UsedFraction(); err == nil && (u < 0 || u > 1) {
			t.Fatalf("used fraction %v", u)
		}
	})
}

func FuzzParseLoadavg(f *testing.F) {
	seed(f, "proc/loadavg")
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLoadavg("loadavg", b)
		checkErr(t, err)
		if err == nil && (l.Load1 < 0 || l.Load5 < 0 || l.Load15 < 0) {
			t.Fatalf("negative load %+v", l)
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	seed(f, "proc/pressure/cpu", "proc/pressure/io", "proc/pressure/memory")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePressure("pressure", b)
		checkErr(t, err)
		if err == nil && (p.Some.Avg10 > 100 || p.Some.Total < 0 || p.Full.Total < 0) {
			t.Fatalf("out of range %+v", p)
		}
	})
}

func FuzzParseNetDev(f *testing.F) {
	seed(f, "proc/net/dev")
	f.Fuzz(func(t *testing.T, b []byte) {
		devs, err := ParseNetDev("dev", b, nil)
		checkErr(t, err)
		seen := map[string]bool{}
		for _, d := range devs {
			if d.Name == "" || seen[d.Name] {
				t.Fatalf("device name %q empty or repeated", d.Name)
			}
			seen[d.Name] = true
		}
	})
}

func FuzzParseSNMP(f *testing.F) {
	seed(f, "proc/net/snmp")
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ParseSNMP("snmp", b)
		checkErr(t, err)
	})
}

// FuzzParseCgroup feeds one input to every cgroup file parser.
func FuzzParseCgroup(f *testing.F) {
	seed(f, "sys/fs/cgroup/cpuacct/cpuacct.usage", "sys/fs/cgroup/unified/cpu.stat",
		"sys/fs/cgroup/memory/memory.usage_in_bytes", "sys/fs/cgroup/memory/memory.limit_in_bytes",
		"sys/fs/cgroup/cpuacct/edgesched-capture/cpuacct.usage", "sys/fs/cgroup/unified/edgesched-capture/cpu.stat",
		"sys/fs/cgroup/pods/burn/cpu.stat", "sys/fs/cgroup/pods/burn/cpu.max", "sys/fs/cgroup/pods/burn/memory.max")
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseCPUAcctUsage("usage", b)
		checkErr(t, err)
		if d < 0 {
			t.Fatalf("negative usage %v", d)
		}
		st, err := ParseCgroupCPUStat("cpu.stat", b)
		checkErr(t, err)
		if st.Usage < 0 || st.User < 0 || st.System < 0 {
			t.Fatalf("negative cpu.stat %+v", st)
		}
		_, err = ParseCgroupValue("value", b)
		checkErr(t, err)
		_, err = ParseMemoryLimit("limit", b)
		checkErr(t, err)
		x, err := ParseCPUMax("cpu.max", b)
		checkErr(t, err)
		if x < 0 {
			t.Fatalf("negative CPU limit %v", x)
		}
	})
}
