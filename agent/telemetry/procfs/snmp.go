package procfs

import "bytes"

// TCP is what the agent uses of the Tcp section of /proc/net/snmp:
// cumulative segment counts and the current number of established
// connections.
type TCP struct {
	ActiveOpens, PassiveOpens, CurrEstab uint64
	InSegs, OutSegs, RetransSegs, InErrs uint64
}

// ParseSNMP parses /proc/net/snmp: pairs of lines with the same "Proto:"
// prefix, the first naming the columns and the second giving as many
// values. Every pair is checked; the Tcp pair is required and must name
// InSegs, OutSegs and RetransSegs.
func ParseSNMP(name string, b []byte) (TCP, error) {
	var t TCP
	var hdr, val [][]byte
	var hdrLine []byte
	found, last := false, 0
	err := lines(b, func(n int, line []byte) error {
		last = n
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return perr(name, n, "no \"Proto:\"")
		}
		if n%2 == 1 { // a header line
			hdrLine = line
			hdr = fields(hdr, line[colon+1:])
			if len(hdr) == 0 {
				return perr(name, n, "%s header names no column", line[:colon])
			}
			return nil
		}
		proto := line[:colon]
		if hp := hdrLine[:bytes.IndexByte(hdrLine, ':')]; !bytes.Equal(hp, proto) {
			return perr(name, n, "values for %q follow the header of %q", proto, hp)
		}
		val = fields(val, line[colon+1:])
		if len(val) != len(hdr) {
			return perr(name, n, "%s: %d values for %d columns", proto, len(val), len(hdr))
		}
		isTCP := bytes.Equal(proto, []byte("Tcp"))
		if isTCP && found {
			return perr(name, n, "second Tcp section")
		}
		var need int
		for i, v := range val {
			x, ok := parseInt(v)
			if !ok {
				return perr(name, n, "%s %s: bad number %q", proto, hdr[i], v)
			}
			if !isTCP {
				continue
			}
			var dst *uint64
			switch string(hdr[i]) {
			case "ActiveOpens":
				dst = &t.ActiveOpens
			case "PassiveOpens":
				dst = &t.PassiveOpens
			case "CurrEstab":
				dst = &t.CurrEstab
			case "InSegs":
				dst, need = &t.InSegs, need+1
			case "OutSegs":
				dst, need = &t.OutSegs, need+1
			case "RetransSegs":
				dst, need = &t.RetransSegs, need+1
			case "InErrs":
				dst = &t.InErrs
			default:
				continue // RtoMin, MaxConn (may be -1), ...
			}
			if x < 0 {
				return perr(name, n, "Tcp %s: negative count %d", hdr[i], x)
			}
			*dst = uint64(x)
		}
		if isTCP {
			if need != 3 {
				return perr(name, n, "Tcp section must name each of InSegs, OutSegs and RetransSegs once")
			}
			found = true
		}
		return nil
	})
	if err != nil {
		return TCP{}, err
	}
	if last%2 == 1 {
		return TCP{}, perr(name, last, "a header line without its values line")
	}
	if !found {
		return TCP{}, perr(name, 0, "no Tcp section")
	}
	return t, nil
}
