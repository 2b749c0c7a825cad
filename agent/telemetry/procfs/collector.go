package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// Config says where the collector reads. The zero value reads the host's
// /proc and /sys and no cgroup.
type Config struct {
	// ProcRoot is the procfs mount. Empty means /proc. Tests point it at
	// captured files; an agent in a container at the host's /proc mounted
	// elsewhere.
	ProcRoot string
	// SysRoot is the sysfs mount (cgroup files are under SysRoot/fs/cgroup).
	// Empty means /sys.
	SysRoot string
	// Cgroup, when not empty, is a cgroup path as /proc/PID/cgroup writes
	// it (e.g. "/kubepods/burstable/pod1"), whose CPU time, memory and
	// limits each Sample also reads. Empty means none.
	Cgroup string
}

// DefaultConfig returns the zero Config with its defaults filled in.
func DefaultConfig() Config {
	return Config{ProcRoot: "/proc", SysRoot: "/sys"}
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	if c.Cgroup != "" {
		if _, err := cleanCgroupPath(c.Cgroup); err != nil {
			return fmt.Errorf("procfs: %w", err)
		}
	}
	return nil
}

// PSI resources, the index of Sample.PSI.
const (
	PSICPU = iota
	PSIMemory
	PSIIO
	NumPSI
)

// psiFiles are the file names of the PSI resources, by index.
var psiFiles = [NumPSI]string{PSICPU: "cpu", PSIMemory: "memory", PSIIO: "io"}

// PSIName names PSI resource i ("cpu", "memory", "io").
func PSIName(i int) string { return psiFiles[i] }

// Sample is one reading of every source. Its slices are reused by the
// next Collector.Sample into the same value; copy it with Clone to keep it.
type Sample struct {
	Stat Stat
	Mem  Meminfo
	Load Loadavg
	// PSI is the pressure of each resource, valid where HasPSI is true
	// (absent when the kernel has no PSI).
	PSI    [NumPSI]Pressure
	HasPSI [NumPSI]bool
	// NetDev lists the network devices (absent: empty).
	NetDev []NetDev
	// TCP is valid when HasTCP (absent without /proc/net/snmp).
	TCP    TCP
	HasTCP bool
	// Cgroup is valid when Config.Cgroup is set.
	Cgroup    CgroupSample
	HasCgroup bool
}

// CopyTo copies s into dst, reusing dst's slices.
func (s *Sample) CopyTo(dst *Sample) {
	cpus, online, devs := dst.Stat.CPUs[:0], dst.Stat.Online[:0], dst.NetDev[:0]
	*dst = *s
	dst.Stat.CPUs = append(cpus, s.Stat.CPUs...)
	dst.Stat.Online = append(online, s.Stat.Online...)
	dst.NetDev = append(devs, s.NetDev...)
}

// Collector reads the sources of a Config. It keeps one read buffer: it
// is not safe for concurrent use (the agent samples from one goroutine).
type Collector struct {
	cfg    Config
	cgroup cgroupFiles
	buf    []byte
	paths  struct {
		stat, meminfo, loadavg, netdev, snmp string
		psi                                  [NumPSI]string
	}
}

// New returns a collector for cfg. With a cgroup it resolves the
// cgroup's files (v2 or v1) and fails if they do not exist.
func New(cfg Config) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := DefaultConfig()
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = d.ProcRoot
	}
	if cfg.SysRoot == "" {
		cfg.SysRoot = d.SysRoot
	}
	c := &Collector{cfg: cfg}
	if cfg.Cgroup != "" {
		p, _ := cleanCgroupPath(cfg.Cgroup)
		cg, err := resolveCgroup(cfg.SysRoot, p)
		if err != nil {
			return nil, fmt.Errorf("procfs: %w", err)
		}
		c.cgroup = cg
	}
	r := cfg.ProcRoot
	c.paths.stat, c.paths.meminfo, c.paths.loadavg = filepath.Join(r, "stat"), filepath.Join(r, "meminfo"), filepath.Join(r, "loadavg")
	c.paths.netdev, c.paths.snmp = filepath.Join(r, "net", "dev"), filepath.Join(r, "net", "snmp")
	for i, name := range psiFiles {
		c.paths.psi[i] = filepath.Join(r, "pressure", name)
	}
	return c, nil
}

// CgroupVersion is 1 or 2 for the configured cgroup, 0 without one.
func (c *Collector) CgroupVersion() int { return c.cgroup.version }

// absent reports an error that means an optional file is not there.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP)
}

// Sample reads every source into s. /proc/stat, /proc/meminfo and
// /proc/loadavg are required; PSI, /proc/net/dev and /proc/net/snmp are
// read when present. Any malformed file fails the sample with a
// *ParseError naming the file and line.
func (c *Collector) Sample(s *Sample) error {
	var err error
	if c.buf, err = readFile(c.paths.stat, c.buf); err != nil {
		return err
	}
	if err = ParseStat(c.paths.stat, c.buf, &s.Stat); err != nil {
		return err
	}
	if c.buf, err = readFile(c.paths.meminfo, c.buf); err != nil {
		return err
	}
	if s.Mem, err = ParseMeminfo(c.paths.meminfo, c.buf); err != nil {
		return err
	}
	if c.buf, err = readFile(c.paths.loadavg, c.buf); err != nil {
		return err
	}
	if s.Load, err = ParseLoadavg(c.paths.loadavg, c.buf); err != nil {
		return err
	}
	for i, p := range c.paths.psi {
		s.HasPSI[i], s.PSI[i] = false, Pressure{}
		if c.buf, err = readFile(p, c.buf); err != nil {
			if absent(err) {
				continue
			}
			return err
		}
		if s.PSI[i], err = ParsePressure(p, c.buf); err != nil {
			return err
		}
		s.HasPSI[i] = true
	}
	s.NetDev = s.NetDev[:0]
	if c.buf, err = readFile(c.paths.netdev, c.buf); err == nil {
		if s.NetDev, err = ParseNetDev(c.paths.netdev, c.buf, s.NetDev); err != nil {
			return err
		}
	} else if !absent(err) {
		return err
	}
	s.HasTCP, s.TCP = false, TCP{}
	if c.buf, err = readFile(c.paths.snmp, c.buf); err == nil {
		if s.TCP, err = ParseSNMP(c.paths.snmp, c.buf); err != nil {
			return err
		}
		s.HasTCP = true
	} else if !absent(err) {
		return err
	}
	s.HasCgroup = false
	if c.cgroup.version != 0 {
		if c.buf, err = readCgroup(c.cgroup, c.buf, &s.Cgroup); err != nil {
			return fmt.Errorf("cgroup %s: %w", c.cfg.Cgroup, err)
		}
		s.HasCgroup = true
	}
	return nil
}
