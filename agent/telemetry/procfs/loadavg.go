package procfs

import "bytes"

// Loadavg is /proc/loadavg.
type Loadavg struct {
	// Load1, Load5 and Load15 are the 1-, 5- and 15-minute load averages.
	Load1, Load5, Load15 float64
	// Runnable is the number of runnable scheduling entities, Threads the
	// number that exist; LastPID the PID most recently assigned.
	Runnable, Threads, LastPID uint64
}

// ParseLoadavg parses /proc/loadavg: one line,
// "L1 L5 L15 RUNNABLE/THREADS LASTPID".
func ParseLoadavg(name string, b []byte) (Loadavg, error) {
	var l Loadavg
	b = bytes.TrimSuffix(b, []byte("\n"))
	if bytes.IndexByte(b, '\n') >= 0 {
		return l, perr(name, 2, "more than one line")
	}
	f := fields(nil, b)
	if len(f) != 5 {
		return l, perr(name, 1, "%d fields, want 5", len(f))
	}
	for i, dst := range [...]*float64{&l.Load1, &l.Load5, &l.Load15} {
		x, ok := parseFloat(f[i])
		if !ok {
			return Loadavg{}, perr(name, 1, "field %d: bad load %q", i+1, f[i])
		}
		*dst = x
	}
	slash := bytes.IndexByte(f[3], '/')
	if slash < 0 {
		return Loadavg{}, perr(name, 1, "field 4: %q is not RUNNABLE/THREADS", f[3])
	}
	var ok1, ok2, ok3 bool
	l.Runnable, ok1 = parseUint(f[3][:slash])
	l.Threads, ok2 = parseUint(f[3][slash+1:])
	l.LastPID, ok3 = parseUint(f[4])
	if !ok1 || !ok2 {
		return Loadavg{}, perr(name, 1, "field 4: %q is not RUNNABLE/THREADS", f[3])
	}
	if !ok3 {
		return Loadavg{}, perr(name, 1, "field 5: bad PID %q", f[4])
	}
	return l, nil
}
