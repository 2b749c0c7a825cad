package bpf

import (
	"errors"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHistogramQuantile(t *testing.T) {
	// 10 observations: 2 in bucket 0 ([0,2) µs), 6 in bucket 3
	// ([8,16) µs), 2 in bucket 10 ([1024,2048) µs).
	var h Histogram
	h.Buckets[0], h.Buckets[3], h.Buckets[10] = 2, 6, 2
	// One observation in the last bucket, [2^31, 2^32) µs.
	var top Histogram
	top.Buckets[NumBuckets-1] = 1

	us := func(f float64) time.Duration { return time.Duration(math.Round(f * 1e3)) }
	tests := []struct {
		name string
		h    Histogram
		q    float64
		want time.Duration
	}{
		{"empty", Histogram{}, 0.5, 0},
		{"NaN", h, math.NaN(), 0},
		// rank 0: the lower bound of the first non-empty bucket.
		{"q0", h, 0, 0},
		// rank 0.1·10 = 1, in bucket 0 (cumulative 2): 0 + 1/2·(2−0) = 1 µs.
		{"p10", h, 0.1, us(1)},
		// rank 2 is the last observation of bucket 0: 0 + 2/2·2 = 2 µs.
		{"p20", h, 0.2, us(2)},
		// rank 5: 2 below bucket 3, so 8 + (5−2)/6·(16−8) = 12 µs.
		{"p50", h, 0.5, us(12)},
		// rank 8: all 6 of bucket 3: 8 + 6/6·8 = 16 µs.
		{"p80", h, 0.8, us(16)},
		// rank 9.9: 8 below bucket 10, so 1024 + (9.9−8)/2·1024 = 1996.8 µs.
		{"p99", h, 0.99, us(1996.8)},
		// rank 10: the top of bucket 10, 2048 µs.
		{"p100", h, 1, us(2048)},
		// q is clamped to [0, 1].
		{"q above 1", h, 7, us(2048)},
		{"q below 0", h, -1, 0},
		// rank 0.5 in [2^31, 2^32) µs: 2^31 + 0.5·2^31 = 3221225472 µs.
		{"last bucket", top, 0.5, us(3221225472)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.Quantile(tt.q); got != tt.want {
				t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func TestHistogramSubCount(t *testing.T) {
	var prev, cur Histogram
	prev.Buckets[1], prev.Buckets[4] = 3, 10
	cur.Buckets[1], cur.Buckets[4], cur.Buckets[7] = 5, 10, 4
	d := cur.Sub(prev)
	// bucket 1: 5−3 = 2; bucket 4: 10−10 = 0; bucket 7: 4−0 = 4.
	var want Histogram
	want.Buckets[1], want.Buckets[7] = 2, 4
	if d != want {
		t.Errorf("Sub = %v, want %v", d.Buckets, want.Buckets)
	}
	// 2 + 4 = 6 observations in the window; cur holds 5+10+4 = 19.
	if d.Count() != 6 || cur.Count() != 19 {
		t.Errorf("Count = %d, %d; want 6, 19", d.Count(), cur.Count())
	}
	// A counter that went down (an LRU eviction, or arguments swapped)
	// saturates at 0 instead of wrapping around.
	back := prev.Sub(cur)
	if back.Count() != 0 {
		t.Errorf("prev.Sub(cur) = %v, want all zero", back.Buckets)
	}
	// The window's median: rank 3 of 6, 2 in bucket 1 ([2,4) µs) below
	// bucket 7 ([128,256) µs): 128 + (3−2)/4·128 = 160 µs.
	if got := d.Quantile(0.5); got != 160*time.Microsecond {
		t.Errorf("window median = %v, want 160µs", got)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"default", DefaultConfig(), true},
		{"relative tracefs", Config{TracefsPath: "sys/kernel/tracing"}, false},
		{"negative flows", Config{MaxFlows: -1}, false},
		{"too many flows", Config{MaxFlows: MaxMaxFlows + 1}, false},
		{"max flows", Config{MaxFlows: MaxMaxFlows}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			if !tt.ok {
				// Load refuses it the same way, before touching the kernel.
				if _, err := Load(tt.cfg, nil); !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("Load = %v, want ErrInvalidConfig", err)
				}
			}
		})
	}
	d := Config{}.withDefaults()
	if d.TracefsPath != DefaultTracefsPath || d.MaxFlows != DefaultMaxFlows || d.MountTracefs {
		t.Errorf("zero config with defaults = %+v", d)
	}
}

func TestFlowDecode(t *testing.T) {
	v4 := func(s string) [16]byte {
		var b [16]byte
		a := netip.MustParseAddr(s).As4()
		copy(b[:], a[:])
		return b
	}
	v6 := func(s string) [16]byte { return netip.MustParseAddr(s).As16() }
	tests := []struct {
		name     string
		src, dst [16]byte
		family   uint16
		ok       bool
		wantSrc  string
		wantDst  string
	}{
		{"ipv4", v4("10.42.0.7"), v4("10.42.1.9"), afInet, true, "10.42.0.7", "10.42.1.9"},
		{"ipv6", v6("fd00::7"), v6("fd00::1:9"), afInet6, true, "fd00::7", "fd00::1:9"},
		{"v4-mapped", v6("::ffff:127.0.0.1"), v6("::ffff:127.0.0.2"), afInet6, true, "127.0.0.1", "127.0.0.2"},
		{"unknown family", v4("1.2.3.4"), v4("5.6.7.8"), 44, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := flowFrom(tt.src, tt.dst, tt.family, 8080, 100, 2)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			want := Flow{Src: netip.MustParseAddr(tt.wantSrc), Dst: netip.MustParseAddr(tt.wantDst), DstPort: 8080, Bytes: 100, Conns: 2}
			if f != want {
				t.Errorf("flow = %+v, want %+v", f, want)
			}
		})
	}
}

func TestMergeFlows(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.1")
	b := netip.MustParseAddr("10.0.0.2")
	c := netip.MustParseAddr("fd00::1")
	in := []Flow{
		{Src: b, Dst: a, DstPort: 80, Bytes: 5, Conns: 1},
		{Src: a, Dst: b, DstPort: 443, Bytes: 7, Conns: 1},
		// the same flow once more (seen over v4-mapped IPv6): summed,
		// 7+3 = 10 bytes, 1+2 = 3 connections.
		{Src: a, Dst: b, DstPort: 443, Bytes: 3, Conns: 2},
		{Src: a, Dst: b, DstPort: 80, Bytes: 1},
		{Src: c, Dst: a, DstPort: 80, Bytes: 9, Conns: 4},
	}
	want := []Flow{
		{Src: a, Dst: b, DstPort: 80, Bytes: 1},
		{Src: a, Dst: b, DstPort: 443, Bytes: 10, Conns: 3},
		{Src: b, Dst: a, DstPort: 80, Bytes: 5, Conns: 1},
		{Src: c, Dst: a, DstPort: 80, Bytes: 9, Conns: 4},
	}
	if got := mergeFlows(in); !slices.Equal(got, want) {
		t.Errorf("mergeFlows =\n%v\nwant\n%v", got, want)
	}
}

func readFormat(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".format"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLayoutsMatchCapturedFormats checks every field the programs read
// against format files captured from a real kernel (testdata/README.md).
func TestLayoutsMatchCapturedFormats(t *testing.T) {
	for _, l := range append(slices.Clone(layouts), retransmitErr) {
		if l.event == "sched_wakeup" || l.event == "sched_wakeup_new" {
			continue // not captured; same layout as sched_switch's header
		}
		t.Run(l.event+"/"+l.decl, func(t *testing.T) {
			if err := l.check(readFormat(t, l.event)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestFormatField(t *testing.T) {
	retrans := readFormat(t, "tcp_retransmit_skb")
	// The same event on a kernel before 6.13: no "err" line.
	var old []string
	for line := range strings.SplitSeq(string(retrans), "\n") {
		if !strings.Contains(line, "field:int err;") {
			old = append(old, line)
		}
	}
	oldRetrans := []byte(strings.Join(old, "\n"))

	tests := []struct {
		name      string
		format    []byte
		decl      string
		off, size int
		ok        bool
	}{
		{"err present", retrans, "int err", 76, 4, true},
		{"err absent", oldRetrans, "int err", 0, 0, false},
		{"array", readFormat(t, "sched_switch"), "char next_comm[16]", 40, 16, true},
		{"common field", retrans, "int common_pid", 4, 4, true},
		{"prefix is not a match", retrans, "int er", 0, 0, false},
		{"empty", nil, "int err", 0, 0, false},
		{"no offset", []byte("\tfield:int err;\tsize:4;\n"), "int err", 0, 0, false},
		{"bad number", []byte("\tfield:int err;\toffset:7x;\tsize:4;\n"), "int err", 0, 0, false},
		{"negative", []byte("\tfield:int err;\toffset:-8;\tsize:4;\n"), "int err", 0, 0, false},
		{"no semicolon", []byte("\tfield:int err;\toffset:8\tsize:4;\n"), "int err", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, size, ok := formatField(tt.format, tt.decl)
			if off != tt.off || size != tt.size || ok != tt.ok {
				t.Errorf("formatField = %d, %d, %v; want %d, %d, %v", off, size, ok, tt.off, tt.size, tt.ok)
			}
		})
	}
	// A layout check names the field and both offsets.
	moved := fieldLayout{"tcp", "tcp_retransmit_skb", "int err", 80, 4}
	if err := moved.check(retrans); err == nil || !strings.Contains(err.Error(), "offset 76") || !strings.Contains(err.Error(), "expect offset 80") {
		t.Errorf("check of a moved field = %v", err)
	}
}

// FuzzFormatField: the parser of kernel-provided format files never
// panics and only reports offsets it read.
func FuzzFormatField(f *testing.F) {
	for _, name := range []string{"tcp_retransmit_skb", "sched_switch", "inet_sock_set_state", "sock_send_length"} {
		f.Add(readFormat(f, name), "int err")
		f.Add(readFormat(f, name), "__u16 family")
	}
	f.Fuzz(func(t *testing.T, format []byte, decl string) {
		off, size, ok := formatField(format, decl)
		if !ok && (off != 0 || size != 0) {
			t.Fatalf("not found but offset %d size %d", off, size)
		}
		if ok && (off < 0 || size < 0 || off > 1<<16 || size > 1<<16) {
			t.Fatalf("out of range: offset %d size %d", off, size)
		}
	})
}
