package procfs

import "bytes"

// NetDev is one network device's cumulative counters from /proc/net/dev.
type NetDev struct {
	Name                                    string
	RxBytes, RxPackets, RxErrors, RxDropped uint64
	TxBytes, TxPackets, TxErrors, TxDropped uint64
}

// ParseNetDev parses /proc/net/dev into devs (reused): two header lines
// (whose Receive and Transmit sections must name 8 columns each, the
// layout since Linux 2.2), then "NAME: 16 counters" per device.
func ParseNetDev(name string, b []byte, devs []NetDev) ([]NetDev, error) {
	devs = devs[:0]
	var f [][]byte
	err := lines(b, func(n int, line []byte) error {
		switch n {
		case 1:
			if !bytes.Contains(line, []byte("Receive")) || !bytes.Contains(line, []byte("Transmit")) {
				return perr(name, n, "not the /proc/net/dev header (no Receive and Transmit)")
			}
			return nil
		case 2:
			parts := bytes.Split(line, []byte("|"))
			if len(parts) != 3 || len(fields(f, parts[1])) != 8 || len(fields(f, parts[2])) != 8 {
				return perr(name, n, "header does not name 8 receive and 8 transmit columns")
			}
			return nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			return perr(name, n, "no \"DEVICE:\"")
		}
		dev := bytes.TrimLeft(line[:colon], " \t")
		if len(dev) == 0 || len(dev) > 64 || bytes.ContainsAny(dev, " \t/") {
			return perr(name, n, "bad device name %q", dev)
		}
		f = fields(f, line[colon+1:])
		if len(f) != 16 {
			return perr(name, n, "%s: %d counters, want 16", dev, len(f))
		}
		var v [16]uint64
		for i, x := range f {
			var ok bool
			if v[i], ok = parseUint(x); !ok {
				return perr(name, n, "%s: counter %d: bad number %q", dev, i+1, x)
			}
		}
		d := NetDev{Name: string(dev),
			RxBytes: v[0], RxPackets: v[1], RxErrors: v[2], RxDropped: v[3],
			TxBytes: v[8], TxPackets: v[9], TxErrors: v[10], TxDropped: v[11]}
		for _, o := range devs {
			if o.Name == d.Name {
				return perr(name, n, "device %s repeated", dev)
			}
		}
		devs = append(devs, d)
		return nil
	})
	if err != nil {
		return devs[:0], err
	}
	return devs, nil
}
