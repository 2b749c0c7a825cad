package procfs

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readTestdata(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// wantMalformed checks that err is a *ParseError for file at line whose
// message contains msg.
func wantMalformed(t *testing.T, err error, line int, msg string) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want a *ParseError wrapping ErrMalformed", err)
	}
	if pe.Line != line || !strings.Contains(pe.Msg, msg) {
		t.Fatalf("err = %v, want line %d mentioning %q", err, line, msg)
	}
	if !strings.Contains(err.Error(), pe.File) {
		t.Fatalf("error %q does not name the file", err)
	}
}

func TestParseStatReal(t *testing.T) {
	var st1, st2 Stat
	if err := ParseStat("real1/stat", readTestdata(t, "real1/proc/stat"), &st1); err != nil {
		t.Fatal(err)
	}
	if err := ParseStat("real2/stat", readTestdata(t, "real2/proc/stat"), &st2); err != nil {
		t.Fatal(err)
	}
	// real1: cpu  2258203 9305 214032 1746111 10477 0 6011 1704 0 0
	want := CPUTimes{User: 2258203, Nice: 9305, System: 214032, Idle: 1746111, IOWait: 10477, SoftIRQ: 6011, Steal: 1704}
	if st1.Total != want {
		t.Fatalf("total = %+v, want %+v", st1.Total, want)
	}
	if len(st1.CPUs) != 2 || !st1.Online[0] || !st1.Online[1] {
		t.Fatalf("CPUs = %d (online %v), want 2 online", len(st1.CPUs), st1.Online)
	}
	if st1.CPUs[1].User != 1128760 || st1.CPUs[1].Steal != 840 {
		t.Fatalf("cpu1 = %+v", st1.CPUs[1])
	}
	if st1.ContextSwitches != 73236181 || st1.ProcsRunning != 3 || st1.ProcsBlocked != 0 {
		t.Fatalf("ctxt/procs = %d %d %d", st1.ContextSwitches, st1.ProcsRunning, st1.ProcsBlocked)
	}
	cases := []struct {
		name      string
		prev, cur CPUTimes
		want      float64
	}{
		// total, real1 -> real2: user +3, nice +172, system +48, idle +3,
		// iowait, irq, softirq, steal +0: busy 3+172+48 = 223, idle 3,
		// 223 / 226 = 0.98673 (the machine was compiling).
		{"total", st1.Total, st2.Total, 223.0 / 226},
		// cpu0: user +2, nice +85, system +24, idle +2, steal +1:
		// busy 2+85+24+1 = 112, idle 2 -> 112 / 114.
		{"cpu0", st1.CPUs[0], st2.CPUs[0], 112.0 / 114},
		// cpu1: user +1, nice +86, system +24, idle +2, iowait +1:
		// busy 111, idle 2+1 = 3 -> 111 / 114.
		{"cpu1", st1.CPUs[1], st2.CPUs[1], 111.0 / 114},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := Utilisation(tc.prev, tc.cur)
			if !ok || !near(u, tc.want) {
				t.Fatalf("Utilisation = %v, %v; want %v", u, ok, tc.want)
			}
		})
	}
}

func TestUtilisationEdges(t *testing.T) {
	a := CPUTimes{User: 100, Idle: 100, IOWait: 50}
	cases := []struct {
		name      string
		prev, cur CPUTimes
		want      float64
		ok        bool
	}{
		{"no tick", a, a, 0, false},
		// iowait stepping back (a known per-CPU kernel quirk) counts as 0:
		// busy +10, idle +10 + (iowait -5 -> 0) -> 10 / 20.
		{"iowait backwards", a, CPUTimes{User: 110, Idle: 110, IOWait: 45}, 0.5, true},
		// all idle: busy +0, idle +100 -> 0.
		{"idle", a, CPUTimes{User: 100, Idle: 200, IOWait: 50}, 0, true},
		// guest time is inside user: busy +40 (user), idle +0 -> 1.
		{"busy", a, CPUTimes{User: 140, Guest: 40, Idle: 100, IOWait: 50}, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := Utilisation(tc.prev, tc.cur)
			if ok != tc.ok || !near(u, tc.want) {
				t.Fatalf("Utilisation = %v, %v; want %v, %v", u, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseStatHandmade(t *testing.T) {
	var st Stat
	if err := ParseStat("handmade/stat", readTestdata(t, "handmade/proc/stat"), &st); err != nil {
		t.Fatal(err)
	}
	// cpu1 is offline: no line, a zero entry, Online false.
	if len(st.CPUs) != 3 || st.Online[1] || !st.Online[0] || !st.Online[2] {
		t.Fatalf("CPUs %d online %v, want 3 with cpu1 offline", len(st.CPUs), st.Online)
	}
	// cpu: busy 100+20+50+5+5+0 = 180, idle 800+30 = 830.
	if st.Total.Busy() != 180 || st.Total.IdleAll() != 830 || st.Total.Guest != 10 {
		t.Fatalf("total busy %d idle %d guest %d", st.Total.Busy(), st.Total.IdleAll(), st.Total.Guest)
	}
	if st.ContextSwitches != 12345 || st.ProcsRunning != 3 || st.ProcsBlocked != 1 {
		t.Fatalf("ctxt/procs = %d %d %d", st.ContextSwitches, st.ProcsRunning, st.ProcsBlocked)
	}
}

func TestParseStatMalformed(t *testing.T) {
	cases := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"empty file", "", 0, "no cpu line"},
		{"no total", "cpu0 1 2 3 4\n", 0, "no cpu line"},
		{"short cpu", "cpu 1 2 3\n", 1, "3 counters"},
		{"bad counter", "cpu 1 2 x 4\n", 1, `counter 3: bad number "x"`},
		{"negative", "cpu 1 2 -3 4\n", 1, "counter 3"},
		{"overflow", "cpu 1 2 99999999999999999999 4\n", 1, "counter 3"},
		{"two totals", "cpu 1 2 3 4\ncpu 1 2 3 4\n", 2, "second cpu line"},
		{"bad cpu name", "cpu 1 2 3 4\ncpuX 1 2 3 4\n", 2, "bad CPU name"},
		{"huge cpu number", "cpu 1 2 3 4\ncpu99999 1 2 3 4\n", 2, "bad CPU name"},
		{"repeated cpu", "cpu 1 2 3 4\ncpu0 1 2 3 4\ncpu0 1 2 3 4\n", 3, "cpu0 repeated"},
		{"blank line", "cpu 1 2 3 4\n\nctxt 1\n", 2, "empty line"},
		{"bad ctxt", "cpu 1 2 3 4\nctxt many\n", 2, "ctxt: bad number"},
		{"procs two values", "cpu 1 2 3 4\nprocs_running 1 2\n", 2, "want 1 value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st Stat
			wantMalformed(t, ParseStat("stat", []byte(tc.in), &st), tc.line, tc.msg)
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	cases := []struct {
		name, file string
		want       Meminfo
		used       float64
	}{
		// MemTotal 24684084 kB, MemFree 18349628 kB, MemAvailable 23999548 kB;
		// used (24684084 - 23999548) / 24684084 = 684536 / 24684084 = 0.02773.
		{"real1", "real1/proc/meminfo", Meminfo{24684084 << 10, 18349628 << 10, 23999548 << 10}, 684536.0 / 24684084},
		// (24684084 - 24016248) / 24684084 = 667836 / 24684084.
		{"real2", "real2/proc/meminfo", Meminfo{24684084 << 10, 18351468 << 10, 24016248 << 10}, 667836.0 / 24684084},
		// 4096000 kB total, 3072000 available: 1024000 / 4096000 = 0.25
		// (HugePages_Total has no unit: a plain count).
		{"handmade", "handmade/proc/meminfo", Meminfo{4096000 << 10, 1024000 << 10, 3072000 << 10}, 0.25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMeminfo(tc.file, readTestdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want || !near(m.UsedFraction(), tc.used) {
				t.Fatalf("got %+v used %v, want %+v used %v", m, m.UsedFraction(), tc.want, tc.used)
			}
		})
	}
	const ok = "MemTotal: 10 kB\nMemFree: 5 kB\nMemAvailable: 6 kB\n"
	bad := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"no colon", "MemTotal 10 kB\n", 1, "no \"Key:\""},
		{"bad unit", "MemTotal: 10 MB\n", 1, `unit "MB"`},
		{"no value", "MemTotal:\n", 1, "want \"value [kB]\""},
		{"three fields", "MemTotal: 10 kB x\n", 1, "want \"value [kB]\""},
		{"bad number", "MemTotal: ten kB\n", 1, "bad number"},
		{"overflow", "MemTotal: 18014398509481984 kB\n", 1, "overflows"},
		{"repeated", ok + "MemTotal: 10 kB\n", 4, "MemTotal repeated"},
		{"missing available", "MemTotal: 10 kB\nMemFree: 5 kB\n", 0, "no MemAvailable"},
		{"available above total", "MemTotal: 10 kB\nMemFree: 5 kB\nMemAvailable: 11 kB\n", 0, "exceeds MemTotal"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMeminfo("meminfo", []byte(tc.in))
			wantMalformed(t, err, tc.line, tc.msg)
		})
	}
}

func TestParseLoadavg(t *testing.T) {
	cases := []struct {
		name, file string
		want       Loadavg
	}{
		{"real1", "real1/proc/loadavg", Loadavg{2.82, 2.04, 2.24, 5, 100, 23410}},
		{"real2", "real2/proc/loadavg", Loadavg{2.84, 2.06, 2.24, 6, 102, 23582}},
		{"handmade", "handmade/proc/loadavg", Loadavg{1.5, 0.75, 0.25, 3, 120, 4242}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ParseLoadavg(tc.file, readTestdata(t, tc.file))
			if err != nil || l != tc.want {
				t.Fatalf("got %+v, %v; want %+v", l, err, tc.want)
			}
		})
	}
	bad := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"four fields", "1 2 3 4/5\n", 1, "4 fields"},
		{"negative", "-1 2 3 4/5 6\n", 1, "field 1"},
		{"nan", "nan 2 3 4/5 6\n", 1, "field 1"},
		{"no slash", "1 2 3 45 6\n", 1, "RUNNABLE/THREADS"},
		{"bad threads", "1 2 3 4/x 6\n", 1, "RUNNABLE/THREADS"},
		{"bad pid", "1 2 3 4/5 -6\n", 1, "field 5"},
		{"two lines", "1 2 3 4/5 6\n1 2 3 4/5 6\n", 2, "more than one line"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLoadavg("loadavg", []byte(tc.in))
			wantMalformed(t, err, tc.line, tc.msg)
		})
	}
}

func TestParsePressure(t *testing.T) {
	cases := []struct {
		name, file string
		want       Pressure
	}{
		{"real1 cpu", "real1/proc/pressure/cpu", Pressure{
			Some: PressureLine{65.24, 47.98, 30.16, 5746409211 * time.Microsecond}, HasFull: true}},
		{"real1 io", "real1/proc/pressure/io", Pressure{
			Some: PressureLine{0.35, 1.62, 1.29, 161116519 * time.Microsecond},
			Full: PressureLine{0, 0.65, 0.71, 62460203 * time.Microsecond}, HasFull: true}},
		{"real1 memory", "real1/proc/pressure/memory", Pressure{HasFull: true}},
		// Before Linux 5.13 the cpu file had no "full" line.
		{"handmade cpu", "handmade/proc/pressure/cpu", Pressure{Some: PressureLine{12.5, 5, 1.25, 987654 * time.Microsecond}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePressure(tc.file, readTestdata(t, tc.file))
			if err != nil || p != tc.want {
				t.Fatalf("got %+v, %v; want %+v", p, err, tc.want)
			}
		})
	}
	const line = "avg10=1.00 avg60=2.00 avg300=3.00 total=4"
	bad := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"empty", "", 0, "no some line"},
		{"full first", "full " + line + "\n", 1, "want some (line 1)"},
		{"third line", "some " + line + "\nfull " + line + "\nfull " + line + "\n", 3, "want some"},
		{"missing total", "some avg10=1.00 avg60=2.00 avg300=3.00\n", 1, "4 fields"},
		{"swapped keys", "some avg60=1.00 avg10=2.00 avg300=3.00 total=4\n", 1, "want avg10=X"},
		{"above 100", "some avg10=101.00 avg60=2.00 avg300=3.00 total=4\n", 1, "not a percentage"},
		{"bad total", "some avg10=1.00 avg60=2.00 avg300=3.00 total=-4\n", 1, "total=-4"},
		{"total overflow", "some avg10=1.00 avg60=2.00 avg300=3.00 total=18446744073709551615\n", 1, "bad number"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePressure("pressure", []byte(tc.in))
			wantMalformed(t, err, tc.line, tc.msg)
		})
	}
}

func TestParseNetDev(t *testing.T) {
	devs, err := ParseNetDev("real1/dev", readTestdata(t, "real1/proc/net/dev"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// lo: 5734476618 3883708 0 0 0 0 0 0 | 5734476618 3883708 0 0 0 0 0 0
	// eth0: 445573431 32835 ... | 2705655 24646 ...
	want := []NetDev{
		{Name: "lo", RxBytes: 5734476618, RxPackets: 3883708, TxBytes: 5734476618, TxPackets: 3883708},
		{Name: "ifb0"}, {Name: "ifb1"},
		{Name: "eth0", RxBytes: 445573431, RxPackets: 32835, TxBytes: 2705655, TxPackets: 24646},
	}
	if len(devs) != len(want) {
		t.Fatalf("got %d devices, want %d", len(devs), len(want))
	}
	for i := range want {
		if devs[i] != want[i] {
			t.Fatalf("device %d = %+v, want %+v", i, devs[i], want[i])
		}
	}
	// Old style without a space after the colon; errors and drops in
	// columns 3, 4 (receive) and 11, 12 (transmit).
	devs, err = ParseNetDev("handmade/dev", readTestdata(t, "handmade/proc/net/dev"), devs)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[0] != (NetDev{"eth0", 1000, 10, 1, 2, 2000, 20, 3, 4}) || devs[1].Name != "wlan0" || devs[1].TxBytes != 7 {
		t.Fatalf("handmade = %+v", devs)
	}
	hdr := "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
	bad := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"no header", "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", 1, "not the /proc/net/dev header"},
		{"short header", "Inter-| Receive | Transmit\n face |bytes packets|bytes packets\n", 2, "8 receive and 8 transmit"},
		{"15 counters", hdr + "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n", 3, "15 counters"},
		{"no colon", hdr + "eth0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", 3, "no \"DEVICE:\""},
		{"empty name", hdr + " : 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", 3, "bad device name"},
		{"bad counter", hdr + "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x\n", 3, "counter 16"},
		{"repeated", hdr + "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\neth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", 4, "eth0 repeated"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNetDev("dev", []byte(tc.in), nil)
			wantMalformed(t, err, tc.line, tc.msg)
		})
	}
}

func TestParseSNMP(t *testing.T) {
	tcp, err := ParseSNMP("real1/snmp", readTestdata(t, "real1/proc/net/snmp"))
	if err != nil {
		t.Fatal(err)
	}
	// Tcp: 1 200 120000 -1 29742 28615 1041 11978 1 3916416 3897124 11317 0 12295 0
	// (RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails
	// EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors)
	want := TCP{ActiveOpens: 29742, PassiveOpens: 28615, CurrEstab: 1, InSegs: 3916416, OutSegs: 3897124, RetransSegs: 11317}
	if tcp != want {
		t.Fatalf("got %+v, want %+v", tcp, want)
	}
	const ip = "Ip: Forwarding DefaultTTL\nIp: 2 64\n"
	const tcpHdr = "Tcp: InSegs OutSegs RetransSegs\n"
	bad := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"no tcp", ip, 0, "no Tcp section"},
		{"header only", ip + tcpHdr, 3, "without its values"},
		{"count mismatch", ip + tcpHdr + "Tcp: 1 2\n", 4, "2 values for 3 columns"},
		{"wrong pairing", ip + tcpHdr + "Udp: 1 2 3\n", 4, `values for "Udp" follow the header of "Tcp"`},
		{"bad number", ip + tcpHdr + "Tcp: 1 x 3\n", 4, `bad number "x"`},
		{"negative count", ip + tcpHdr + "Tcp: 1 -2 3\n", 4, "negative count"},
		{"missing retrans", ip + "Tcp: InSegs OutSegs\nTcp: 1 2\n", 4, "must name each"},
		{"second tcp", ip + tcpHdr + "Tcp: 1 2 3\n" + tcpHdr + "Tcp: 1 2 3\n", 6, "second Tcp section"},
		{"no colon", "Ip Forwarding\n", 1, "no \"Proto:\""},
		{"empty header", "Ip:\nIp:\n", 1, "names no column"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSNMP("snmp", []byte(tc.in))
			wantMalformed(t, err, tc.line, tc.msg)
		})
	}
}

func TestParseCgroupFiles(t *testing.T) {
	// Real v1 cgroup (a 2 s busy loop under a 0.5-CPU quota): about 1 s of CPU.
	d, err := ParseCPUAcctUsage("usage", readTestdata(t, "cgroupv1/sys/fs/cgroup/cpuacct/edgesched-capture/cpuacct.usage"))
	if err != nil || d != 1040460937*time.Nanosecond {
		t.Fatalf("cpuacct.usage = %v, %v", d, err)
	}
	st, err := ParseCgroupCPUStat("cpu.stat", readTestdata(t, "cgroupv1/sys/fs/cgroup/unified/edgesched-capture/cpu.stat"))
	if err != nil || st != (CgroupCPUStat{Usage: 1048514 * time.Microsecond, User: 1048514 * time.Microsecond}) {
		t.Fatalf("cpu.stat = %+v, %v", st, err)
	}
	// The hand-made v2 cpu.stat with the cpu controller's extra lines.
	st, err = ParseCgroupCPUStat("cpu.stat", readTestdata(t, "handmade/sys/fs/cgroup/pods/burn/cpu.stat"))
	if err != nil || st != (CgroupCPUStat{7500 * time.Millisecond, 5 * time.Second, 2500 * time.Millisecond}) {
		t.Fatalf("cpu.stat = %+v, %v", st, err)
	}
	lim := []struct {
		name, in string
		want     uint64
	}{
		{"v1 unlimited (real)", "9223372036854771712\n", 0},
		{"v1 256 MiB (real)", "268435456\n", 256 << 20},
		{"v2 max", "max\n", 0},
		{"v2 bytes", "1073741824\n", 1 << 30},
	}
	for _, tc := range lim {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ParseMemoryLimit("limit", []byte(tc.in))
			if err != nil || x != tc.want {
				t.Fatalf("got %d, %v; want %d", x, err, tc.want)
			}
		})
	}
	// cpu.max "150000 100000": 150000 / 100000 = 1.5 CPUs; "max": none.
	if x, err := ParseCPUMax("cpu.max", []byte("150000 100000\n")); err != nil || x != 1.5 {
		t.Fatalf("cpu.max = %v, %v", x, err)
	}
	if x, err := ParseCPUMax("cpu.max", []byte("max 100000\n")); err != nil || x != 0 {
		t.Fatalf("cpu.max max = %v, %v", x, err)
	}
	bad := []struct {
		name  string
		parse func([]byte) error
		in    string
		line  int
		msg   string
	}{
		{"usage empty", func(b []byte) error { _, err := ParseCPUAcctUsage("f", b); return err }, "", 1, "empty"},
		{"usage two lines", func(b []byte) error { _, err := ParseCPUAcctUsage("f", b); return err }, "1\n2\n", 2, "more than one line"},
		{"usage negative", func(b []byte) error { _, err := ParseCPUAcctUsage("f", b); return err }, "-1\n", 1, "bad number"},
		{"usage overflow", func(b []byte) error { _, err := ParseCPUAcctUsage("f", b); return err }, "18446744073709551615\n", 1, "overflows"},
		{"stat no usage", func(b []byte) error { _, err := ParseCgroupCPUStat("f", b); return err }, "user_usec 1\n", 0, "no usage_usec"},
		{"stat repeated", func(b []byte) error { _, err := ParseCgroupCPUStat("f", b); return err }, "usage_usec 1\nusage_usec 2\n", 2, "repeated"},
		{"stat three fields", func(b []byte) error { _, err := ParseCgroupCPUStat("f", b); return err }, "usage_usec 1 2\n", 1, "3 fields"},
		{"stat bad number", func(b []byte) error { _, err := ParseCgroupCPUStat("f", b); return err }, "usage_usec 1\nnr_periods x\n", 2, "nr_periods: bad number"},
		{"limit word", func(b []byte) error { _, err := ParseMemoryLimit("f", b); return err }, "none\n", 1, "want bytes or max"},
		{"cpu.max one field", func(b []byte) error { _, err := ParseCPUMax("f", b); return err }, "max\n", 1, "1 fields"},
		{"cpu.max zero period", func(b []byte) error { _, err := ParseCPUMax("f", b); return err }, "1000 0\n", 1, "bad period"},
		{"cpu.max zero quota", func(b []byte) error { _, err := ParseCPUMax("f", b); return err }, "0 100000\n", 1, "bad quota"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			wantMalformed(t, tc.parse([]byte(tc.in)), tc.line, tc.msg)
		})
	}
}
