package procfs

import "bytes"

// Meminfo is what the agent uses of /proc/meminfo, in bytes.
type Meminfo struct {
	MemTotal, MemFree, MemAvailable uint64
}

// UsedFraction is (MemTotal − MemAvailable) / MemTotal in [0, 1]; 0 when
// MemTotal is 0.
func (m Meminfo) UsedFraction() float64 {
	if m.MemTotal == 0 {
		return 0
	}
	return float64(sub(m.MemTotal, m.MemAvailable)) / float64(m.MemTotal)
}

// ParseMeminfo parses /proc/meminfo (name is used in errors). Every line
// must be "Key: value" or "Key: value kB"; MemTotal, MemFree and
// MemAvailable (Linux >= 3.14) are required, each at most once.
func ParseMeminfo(name string, b []byte) (Meminfo, error) {
	var m Meminfo
	var f [][]byte
	var seen [3]bool
	err := lines(b, func(n int, line []byte) error {
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return perr(name, n, "no \"Key:\"")
		}
		key := line[:colon]
		f = fields(f, line[colon+1:])
		if len(f) == 0 || len(f) > 2 {
			return perr(name, n, "%s: want \"value [kB]\"", key)
		}
		x, ok := parseUint(f[0])
		if !ok {
			return perr(name, n, "%s: bad number %q", key, f[0])
		}
		if len(f) == 2 {
			if !bytes.Equal(f[1], []byte("kB")) {
				return perr(name, n, "%s: unit %q, want kB", key, f[1])
			}
			if x > (^uint64(0))>>10 {
				return perr(name, n, "%s: %d kB overflows", key, x)
			}
			x <<= 10
		}
		var i int
		switch string(key) {
		case "MemTotal":
			i, m.MemTotal = 0, x
		case "MemFree":
			i, m.MemFree = 1, x
		case "MemAvailable":
			i, m.MemAvailable = 2, x
		default:
			return nil
		}
		if seen[i] {
			return perr(name, n, "%s repeated", key)
		}
		seen[i] = true
		return nil
	})
	if err != nil {
		return Meminfo{}, err
	}
	for i, k := range [...]string{"MemTotal", "MemFree", "MemAvailable"} {
		if !seen[i] {
			return Meminfo{}, perr(name, 0, "no %s line", k)
		}
	}
	if m.MemAvailable > m.MemTotal || m.MemFree > m.MemTotal {
		return Meminfo{}, perr(name, 0, "MemFree %d or MemAvailable %d exceeds MemTotal %d", m.MemFree, m.MemAvailable, m.MemTotal)
	}
	return m, nil
}
