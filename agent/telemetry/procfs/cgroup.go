package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CgroupSample is one reading of a cgroup's CPU and memory accounting.
type CgroupSample struct {
	// CPU is the cumulative CPU time of the cgroup's tasks (cgroup v1
	// cpuacct.usage, v2 cpu.stat usage_usec).
	CPU time.Duration
	// Memory is the memory charged to the cgroup in bytes (v1
	// memory.usage_in_bytes, v2 memory.current); HasMemory is false when
	// the memory controller is not available for the cgroup.
	Memory    uint64
	HasMemory bool
	// CPULimit is the number of CPUs the cgroup may use (CFS quota /
	// period); 0 means no limit.
	CPULimit float64
	// MemoryLimit is the cgroup's memory limit in bytes; 0 means no limit
	// (v2 "max", or v1's page-rounded maximum).
	MemoryLimit uint64
}

// cgroupFiles are the resolved files of one cgroup.
type cgroupFiles struct {
	version             int
	cpu                 string // cpuacct.usage (v1) or cpu.stat (v2)
	cpuV2               bool
	mem, memLimit       string // "" when there is no memory controller
	cpuMax              string // v2 cpu.max; "" when absent
	cfsQuota, cfsPeriod string // v1; "" when absent
}

// cleanCgroupPath checks a cgroup path as /proc/PID/cgroup writes it
// ("/a/b", relative to a hierarchy's root) and returns it cleaned.
func cleanCgroupPath(p string) (string, error) {
	if p == "" || p[0] != '/' {
		return "", fmt.Errorf("cgroup path %q: must start with /", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." {
			return "", fmt.Errorf("cgroup path %q: must not contain . or ..", p)
		}
	}
	return filepath.Clean(p), nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// resolveCgroup finds the accounting files of cgroup path under sysRoot.
// A unified (v2-only) hierarchy mounted at fs/cgroup is used when present;
// otherwise the v1 controllers (cpuacct, possibly co-mounted with cpu, and
// memory), and for CPU time the v2 hierarchy of a hybrid layout
// (fs/cgroup/unified) when no v1 cpuacct controller is mounted.
func resolveCgroup(sysRoot, path string) (cgroupFiles, error) {
	base := filepath.Join(sysRoot, "fs", "cgroup")
	if exists(filepath.Join(base, "cgroup.controllers")) {
		dir := filepath.Join(base, path)
		if !exists(filepath.Join(dir, "cpu.stat")) {
			return cgroupFiles{}, fmt.Errorf("cgroup %s: no %s (cgroup v2)", path, filepath.Join(dir, "cpu.stat"))
		}
		f := cgroupFiles{version: 2, cpu: filepath.Join(dir, "cpu.stat"), cpuV2: true}
		if exists(filepath.Join(dir, "memory.current")) {
			f.mem, f.memLimit = filepath.Join(dir, "memory.current"), filepath.Join(dir, "memory.max")
		}
		if exists(filepath.Join(dir, "cpu.max")) {
			f.cpuMax = filepath.Join(dir, "cpu.max")
		}
		return f, nil
	}
	f := cgroupFiles{version: 1}
	for _, c := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		if p := filepath.Join(base, c, path, "cpuacct.usage"); exists(p) {
			f.cpu = p
			break
		}
	}
	if f.cpu == "" {
		p := filepath.Join(base, "unified", path, "cpu.stat")
		if !exists(p) {
			return cgroupFiles{}, fmt.Errorf("cgroup %s: no cpuacct.usage under %s/{cpuacct,cpu,cpuacct} and no %s", path, base, p)
		}
		f.cpu, f.cpuV2 = p, true
	}
	for _, c := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
		if p := filepath.Join(base, c, path, "cpu.cfs_quota_us"); exists(p) {
			f.cfsQuota, f.cfsPeriod = p, filepath.Join(base, c, path, "cpu.cfs_period_us")
			break
		}
	}
	if p := filepath.Join(base, "memory", path, "memory.usage_in_bytes"); exists(p) {
		f.mem, f.memLimit = p, filepath.Join(base, "memory", path, "memory.limit_in_bytes")
	}
	return f, nil
}

// readCgroup reads the files of f into s, reusing buf.
func readCgroup(f cgroupFiles, buf []byte, s *CgroupSample) ([]byte, error) {
	*s = CgroupSample{}
	var err error
	if buf, err = readFile(f.cpu, buf); err != nil {
		return buf, err
	}
	if f.cpuV2 {
		st, err := ParseCgroupCPUStat(f.cpu, buf)
		if err != nil {
			return buf, err
		}
		s.CPU = st.Usage
	} else if s.CPU, err = ParseCPUAcctUsage(f.cpu, buf); err != nil {
		return buf, err
	}
	if f.mem != "" {
		if buf, err = readFile(f.mem, buf); err != nil {
			return buf, err
		}
		if s.Memory, err = ParseCgroupValue(f.mem, buf); err != nil {
			return buf, err
		}
		s.HasMemory = true
		if buf, err = readFile(f.memLimit, buf); err == nil {
			if s.MemoryLimit, err = ParseMemoryLimit(f.memLimit, buf); err != nil {
				return buf, err
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return buf, err
		}
	}
	switch {
	case f.cpuMax != "":
		if buf, err = readFile(f.cpuMax, buf); err != nil {
			return buf, err
		}
		if s.CPULimit, err = ParseCPUMax(f.cpuMax, buf); err != nil {
			return buf, err
		}
	case f.cfsQuota != "":
		if buf, err = readFile(f.cfsQuota, buf); err != nil {
			return buf, err
		}
		quota, err := parseSingleInt(f.cfsQuota, buf)
		if err != nil {
			return buf, err
		}
		if buf, err = readFile(f.cfsPeriod, buf); err != nil {
			return buf, err
		}
		period, err := ParseCgroupValue(f.cfsPeriod, buf)
		if err != nil {
			return buf, err
		}
		if s.CPULimit, err = cfsLimit(f.cfsQuota, quota, period); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// cfsLimit is quota/period CPUs; a quota of -1 means none.
func cfsLimit(name string, quota int64, period uint64) (float64, error) {
	switch {
	case quota == -1:
		return 0, nil
	case quota <= 0:
		return 0, perr(name, 1, "quota %d: want -1 or > 0", quota)
	case period == 0:
		return 0, perr(name, 1, "period 0")
	}
	return float64(quota) / float64(period), nil
}

// singleLine returns the one line of a one-value file.
func singleLine(name string, b []byte) ([]byte, error) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	if bytes.IndexByte(b, '\n') >= 0 {
		return nil, perr(name, 2, "more than one line")
	}
	if len(b) == 0 {
		return nil, perr(name, 1, "empty")
	}
	return b, nil
}

// ParseCgroupValue parses a file holding one unsigned integer
// (memory.usage_in_bytes, memory.current, cpu.cfs_period_us).
func ParseCgroupValue(name string, b []byte) (uint64, error) {
	line, err := singleLine(name, b)
	if err != nil {
		return 0, err
	}
	x, ok := parseUint(line)
	if !ok {
		return 0, perr(name, 1, "bad number %q", line)
	}
	return x, nil
}

func parseSingleInt(name string, b []byte) (int64, error) {
	line, err := singleLine(name, b)
	if err != nil {
		return 0, err
	}
	x, ok := parseInt(line)
	if !ok {
		return 0, perr(name, 1, "bad number %q", line)
	}
	return x, nil
}

// ParseCPUAcctUsage parses cgroup v1 cpuacct.usage: nanoseconds.
func ParseCPUAcctUsage(name string, b []byte) (time.Duration, error) {
	x, err := ParseCgroupValue(name, b)
	if err != nil {
		return 0, err
	}
	if x > 1<<63-1 {
		return 0, perr(name, 1, "%d ns overflows", x)
	}
	return time.Duration(x), nil
}

// CgroupCPUStat is the time accounting of a cgroup v2 cpu.stat.
type CgroupCPUStat struct {
	Usage, User, System time.Duration
}

// ParseCgroupCPUStat parses cgroup v2 cpu.stat: "key value" lines, of
// which usage_usec is required and user_usec and system_usec are read;
// the others (nr_periods, throttled_usec, ... when the cpu controller is
// enabled) are checked to be numbers and skipped.
func ParseCgroupCPUStat(name string, b []byte) (CgroupCPUStat, error) {
	var s CgroupCPUStat
	var f [][]byte
	seen := map[string]bool{}
	err := lines(b, func(n int, line []byte) error {
		f = fields(f, line)
		if len(f) != 2 {
			return perr(name, n, "%d fields, want \"key value\"", len(f))
		}
		x, ok := parseUint(f[1])
		if !ok {
			return perr(name, n, "%s: bad number %q", f[0], f[1])
		}
		var dst *time.Duration
		switch string(f[0]) {
		case "usage_usec":
			dst = &s.Usage
		case "user_usec":
			dst = &s.User
		case "system_usec":
			dst = &s.System
		default:
			return nil
		}
		if seen[string(f[0])] {
			return perr(name, n, "%s repeated", f[0])
		}
		seen[string(f[0])] = true
		if x > uint64(1<<63-1)/uint64(time.Microsecond) {
			return perr(name, n, "%s: %d µs overflows", f[0], x)
		}
		*dst = time.Duration(x) * time.Microsecond
		return nil
	})
	if err != nil {
		return CgroupCPUStat{}, err
	}
	if !seen["usage_usec"] {
		return CgroupCPUStat{}, perr(name, 0, "no usage_usec line")
	}
	return s, nil
}

// unlimitedV1 is the smallest memory.limit_in_bytes treated as "no
// limit": v1 writes PAGE_COUNTER_MAX pages (9223372036854771712 with 4 KiB
// pages) when none is set.
const unlimitedV1 = 1 << 62

// ParseMemoryLimit parses memory.max ("max" or bytes, v2) or
// memory.limit_in_bytes (bytes, v1): 0 means no limit.
func ParseMemoryLimit(name string, b []byte) (uint64, error) {
	line, err := singleLine(name, b)
	if err != nil {
		return 0, err
	}
	if string(line) == "max" {
		return 0, nil
	}
	x, ok := parseUint(line)
	if !ok {
		return 0, perr(name, 1, "bad limit %q, want bytes or max", line)
	}
	if x >= unlimitedV1 {
		return 0, nil
	}
	return x, nil
}

// ParseCPUMax parses cgroup v2 cpu.max, "QUOTA PERIOD" in µs with QUOTA
// possibly "max": the CPUs the cgroup may use, 0 for no limit.
func ParseCPUMax(name string, b []byte) (float64, error) {
	line, err := singleLine(name, b)
	if err != nil {
		return 0, err
	}
	f := fields(nil, line)
	if len(f) != 2 {
		return 0, perr(name, 1, "%d fields, want \"QUOTA PERIOD\"", len(f))
	}
	period, ok := parseUint(f[1])
	if !ok || period == 0 {
		return 0, perr(name, 1, "bad period %q", f[1])
	}
	if string(f[0]) == "max" {
		return 0, nil
	}
	quota, ok := parseUint(f[0])
	if !ok || quota == 0 {
		return 0, perr(name, 1, "bad quota %q, want µs or max", f[0])
	}
	return float64(quota) / float64(period), nil
}
