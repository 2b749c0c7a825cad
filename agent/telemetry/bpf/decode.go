package bpf

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"strconv"
)

// Address families in flow keys (AF_INET, AF_INET6).
const (
	afInet  = 2
	afInet6 = 10
)

// flowFrom decodes one entry of the tcp_flows map. ok is false for an
// unknown address family (never written by tcp.c).
func flowFrom(src, dst [16]byte, family, dport uint16, bytes, conns uint64) (Flow, bool) {
	var f Flow
	switch family {
	case afInet:
		f.Src = netip.AddrFrom4([4]byte(src[:4]))
		f.Dst = netip.AddrFrom4([4]byte(dst[:4]))
	case afInet6:
		// A dual-stack socket talking IPv4 reports ::ffff:a.b.c.d.
		f.Src = netip.AddrFrom16(src).Unmap()
		f.Dst = netip.AddrFrom16(dst).Unmap()
	default:
		return Flow{}, false
	}
	f.DstPort, f.Bytes, f.Conns = dport, bytes, conns
	return f, true
}

// mergeFlows sorts flows by (Src, Dst, DstPort) and sums those with the
// same key, which happens when one peer is reached both over IPv4 and
// IPv4-mapped IPv6. It reuses in's storage.
func mergeFlows(in []Flow) []Flow {
	slices.SortFunc(in, func(a, b Flow) int {
		return cmp.Or(a.Src.Compare(b.Src), a.Dst.Compare(b.Dst), cmp.Compare(a.DstPort, b.DstPort))
	})
	out := in[:0]
	for _, f := range in {
		if n := len(out); n > 0 && out[n-1].Src == f.Src && out[n-1].Dst == f.Dst && out[n-1].DstPort == f.DstPort {
			out[n-1].Bytes += f.Bytes
			out[n-1].Conns += f.Conns
			continue
		}
		out = append(out, f)
	}
	return out
}

// formatField finds a field of a tracefs event format file
// (TRACEFS/events/GROUP/NAME/format), given its declaration as printed
// there ("int err", "__u16 family", "char prev_comm[16]"), and returns its
// offset and size. ok is false when the field is absent or its line is
// malformed.
func formatField(format []byte, decl string) (offset, size int, ok bool) {
	want := []byte("field:" + decl + ";")
	for line := range bytes.SplitSeq(format, []byte("\n")) {
		line = bytes.TrimSpace(line)
		rest, found := bytes.CutPrefix(line, want)
		if !found {
			continue
		}
		offset, okOff := formatInt(rest, "offset:")
		size, okSize := formatInt(rest, "size:")
		if !okOff || !okSize {
			return 0, 0, false
		}
		return offset, size, true
	}
	return 0, 0, false
}

// formatInt reads "name:N;" from the tab-separated attributes of a field.
func formatInt(attrs []byte, name string) (int, bool) {
	for part := range bytes.SplitSeq(attrs, []byte("\t")) {
		part = bytes.TrimSpace(part)
		v, found := bytes.CutPrefix(part, []byte(name))
		if !found {
			continue
		}
		v, found = bytes.CutSuffix(v, []byte(";"))
		if !found {
			return 0, false
		}
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 || n > 1<<16 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
