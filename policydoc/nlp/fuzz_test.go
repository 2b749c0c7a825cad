package nlp

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/policydoc"
)

// FuzzCompile: no text makes the compiler panic; a refusal wraps
// ErrRefused and every clause's refusal is an *Error; text that is not
// UTF-8 is refused; what compiles has at least one rule, each with both
// renderings, and either makes a valid document that survives
// policydoc's YAML round trip or is refused as an invalid document. As the
// package documentation says, each rule's English and Chinese renderings
// compile back to the same rule with the glossary it was compiled with,
// and with the rule's services added (as an operator confirms them); and
// no rule is refused because no sentence carries it (Compile's glossary
// holds its GPU models). Name clashes: with a glossary where every service
// and zone of the compiled rules is both a service and a zone, and every
// GPU model a zone, RenderRule's sentences read back too, or it refuses a
// GPU model the glossary reads as a zone, naming it. Seeded with every
// sentence of the corpora (testdata/corpus-*.yaml) and with clashes.
func FuzzCompile(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "corpus-*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no corpus files: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var cs []corpusCase
		if err := yaml.UnmarshalStrict(b, &cs); err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		for _, c := range cs {
			f.Add(c.Text)
		}
	}
	// several sentences and lines at once, fragments, mixed languages
	f.Add("keep payment and orders in the same zone; never run batch on arm64 nodes.\n尽量把payment和orders分开，放在不同的节点")
	f.Add("at night, the; the, and 5 pm 尽量 ，，")
	// names in two roles (TestRenderNameClash)
	f.Add("run checkout only in zones east and checkout")
	f.Add("keep east service and payment in the same zone; never run payment in zone checkout")
	f.Add(`run "cache" service only in zones "a" and "night"` + "\n" + `keep "zone" service, "keep" service and "but" service on different nodes`)
	f.Add(`run at most 2 replicas of "order" service per node; run GPU pods of t4 service only on A10 GPUs`)
	f.Add(`"checkout"服务只能运行在区域"checkout"、t4`)
	f.Fuzz(func(t *testing.T, text string) {
		got, err := Compile(text, nil)
		if err != nil {
			var e *Error
			if !errors.Is(err, ErrRefused) || !errors.As(err, &e) {
				t.Fatalf("refusal %v is not an *Error wrapping ErrRefused", err)
			}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, x := range j.Unwrap() {
					if !errors.As(x, &e) {
						t.Fatalf("joined refusal %v is not an *Error", x)
					}
				}
			}
			if strings.Contains(err.Error(), ErrUnrenderable.Error()) {
				t.Fatalf("a compiled rule has no sentence: %v", err)
			}
			return
		}
		if len(got) == 0 || len(text) > MaxInputBytes || !utf8.ValidString(text) {
			t.Fatalf("%d bytes compiled to %d rules without an error", len(text), len(got))
		}
		own := DefaultGlossary().Add(&Glossary{Services: map[string][]string{}})
		clash := DefaultGlossary().Add(&Glossary{Services: map[string][]string{}})
		for _, c := range got {
			if c.English == "" || c.Chinese == "" || len(c.Rule.Source) > policydoc.MaxSourceLen {
				t.Fatalf("compiled %+v: a rendering is empty or the source is over %d bytes", c, policydoc.MaxSourceLen)
			}
			for _, s := range c.Rule.Pods.Services {
				own.Services[s] = nil
			}
			for _, n := range append(slices.Clone(c.Rule.Pods.Services), c.Rule.Zones...) {
				clash.Services[n] = nil
				clash.Zones = append(clash.Zones, n)
			}
			clash.Zones = append(clash.Zones, c.Rule.GPUModels...)
		}
		readsBack := func(what string, c Compiled, s string, g *Glossary) {
			t.Helper()
			back, err := Compile(s, g)
			if err != nil || len(back) != 1 || !reflect.DeepEqual(strip(back[0].Rule), strip(c.Rule)) {
				t.Fatalf("%s: rendering %q of %q does not read back: %v %+v\nwant %+v", what, s, c.Clause, err, back, c.Rule)
			}
		}
		for _, c := range got {
			for _, s := range []string{c.English, c.Chinese} {
				readsBack("compile's glossary", c, s, nil)
				readsBack("the operator's glossary", c, s, own)
			}
			rd, err := RenderRule(&c.Rule, clash)
			if err != nil {
				if !errors.Is(err, ErrUnrenderable) || len(c.Rule.GPUModels) == 0 || !strings.Contains(err.Error(), "is the zone") {
					t.Fatalf("rule %+v of %q not rendered with every name in every role: %v", c.Rule, c.Clause, err)
				}
				continue
			}
			for _, s := range []string{rd.English, rd.Chinese} {
				readsBack("every name in every role", c, s, clash)
			}
		}
		d, _, err := CompileDocument(text, nil)
		if err != nil {
			if !errors.Is(err, policydoc.ErrInvalid) {
				t.Fatalf("compiled rules refused as a document without ErrInvalid: %v", err)
			}
			return
		}
		y, err := d.EncodeYAML()
		if err != nil {
			t.Fatalf("a compiled document does not encode: %v", err)
		}
		back, err := policydoc.Decode(y)
		if err != nil {
			t.Fatalf("a compiled document does not decode:\n%s\n%v", y, err)
		}
		if !reflect.DeepEqual(back.Rules, d.Rules) {
			t.Fatalf("round trip changed the rules:\n first %+v\nsecond %+v", d.Rules, back.Rules)
		}
	})
}

// TestCompileLinearTime: text of many fragments costs Compile work in
// proportion to its length. Joining fragments one by one re-copied what
// was joined so far (12 s for "the; " x 13,000, under MaxInputBytes), so
// four times the text allocated about sixteen times the bytes; linear
// work allocates about four times. Measured in bytes allocated, not time.
func TestCompileLinearTime(t *testing.T) {
	allocated := func(text string) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _ = Compile(text, nil)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	for _, tc := range []struct {
		name, unit string
		reps       int
	}{
		{"fragments", "the; ", 13_000},
		{"fragments before a verb", "keep a and ", 5_900},
		{"Chinese fragments", "的，", 10_900},
		{"Chinese continuations", "不同，", 7_000},
		// every clause a rule, rendered in all three name styles and
		// each rendering compiled back
		{"rules read back", `run "order" service only in zone "a". `, 1_500},
	} {
		small, large := allocated(strings.Repeat(tc.unit, tc.reps/4)), allocated(strings.Repeat(tc.unit, tc.reps))
		t.Logf("%s: %d bytes allocated for %d repetitions, %d for %d", tc.name, small, tc.reps/4, large, tc.reps)
		if ratio := float64(large) / float64(small); ratio > 8 {
			t.Errorf("%s: 4x the text allocated %.1fx the bytes (%d against %d): quadratic", tc.name, ratio, large, small)
		}
	}
}

// TestLongSourceCutOnRune: a clause over policydoc.MaxSourceLen is kept
// as its rule's source cut to the limit on a character boundary (cut on
// a byte, a long Chinese clause left a broken character in the document).
func TestLongSourceCutOnRune(t *testing.T) {
	text := "把payment和orders放在同一个区域 " + strings.Repeat("（的）", 200)
	got, err := Compile(text, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("%v %+v", err, got)
	}
	src := got[0].Rule.Source
	if len(src) > policydoc.MaxSourceLen || len(src) < policydoc.MaxSourceLen-utf8.UTFMax || !utf8.ValidString(src) || !strings.HasPrefix(text, src) {
		t.Fatalf("source of %d bytes (valid UTF-8 %v), want a prefix of the clause of at most %d bytes", len(src), utf8.ValidString(src), policydoc.MaxSourceLen)
	}
}

// TestCompileRefusesNonUTF8: text that is not UTF-8 is refused, naming
// the byte. Compiled, its document carried the source sentences with
// each bad byte replaced (3 bytes each): changed, and over
// policydoc.MaxSourceLen the document no longer read back (found by
// FuzzCompile).
func TestCompileRefusesNonUTF8(t *testing.T) {
	text := "keep payment and orders in the same zone\nkeep ledger service and payment in the same\xc9 zone"
	got, err := Compile(text, nil)
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "byte 84 is not UTF-8") || !strings.HasPrefix(e.Clause, "keep ledger") || got != nil {
		t.Fatalf("got %v, %+v; want a refusal naming byte 84", err, got)
	}
}

// FuzzRender: a valid rule with names the fuzzer chose (any role, words of
// the language, aliases, numbers, the same name in two roles) either
// renders as sentences that read back into it with the same glossary, or
// is refused with ErrUnrenderable naming a GPU model the glossary does not
// read as one (the only name without a role word). The glossary is the
// default one, with the rule's services as zones, its zones as services
// and its GPU models, as flags say.
func FuzzRender(f *testing.F) {
	f.Add(uint8(3), uint8(0), uint8(0), "checkout", "checkout", "")
	f.Add(uint8(3), uint8(0x42), uint8(7), "22,order", "a,night,east", "")
	f.Add(uint8(0), uint8(0x18), uint8(1), "zone,keep,but", "payment", "")
	f.Add(uint8(6), uint8(0x25), uint8(4), "t4,a10", "", "a10,Orin")
	f.Add(uint8(7), uint8(0x01), uint8(0), "batch", "", "123.4567")
	f.Add(uint8(4), uint8(0x02), uint8(2), "and", "tier", "tier=edge")
	f.Fuzz(func(t *testing.T, kind, flags, names uint8, services, zones, other string) {
		list := func(s string) []string {
			var out []string
			for _, n := range strings.Split(s, ",") {
				if n = strings.TrimSpace(n); n != "" {
					out = append(out, n)
				}
			}
			return out
		}
		ks := policydoc.Kinds()
		r := policydoc.Rule{Kind: ks[int(kind)%len(ks)], Effect: policydoc.Required, Pods: policydoc.Selector{Services: list(services), GPU: flags&0x04 != 0}}
		if flags&0x01 != 0 {
			r.Effect, r.Weight = policydoc.Preferred, 1+int(flags>>4)*6
		}
		if flags&0x08 != 0 {
			r.Scope = policydoc.ScopeNode
		} else {
			r.Scope = policydoc.ScopeZone
		}
		if flags&0x20 != 0 {
			r.During = &policydoc.HourRange{From: int(names>>3) % 24, To: int(flags) % 24}
		}
		switch r.Kind {
		case policydoc.Colocate, policydoc.Separate:
		case policydoc.Spread:
			r.MaxPerDomain = 1 + int(flags>>4)
		default:
			r.Scope = ""
		}
		switch r.Kind {
		case policydoc.Zone, policydoc.NodeLabel, policydoc.Arch, policydoc.GPUModel:
			r.Negate = flags&0x02 != 0
		}
		switch r.Kind {
		case policydoc.Zone:
			r.Zones = list(zones)
		case policydoc.NodeLabel:
			r.Label = other
		case policydoc.Arch:
			r.Arch = list(other)
		case policydoc.GPUModel:
			r.GPUModels = list(other)
		case policydoc.Carbon:
			r.MaxCarbon, _ = strconv.ParseFloat(other, 64)
		case policydoc.CPUCap:
			r.MaxCPUPercent = 1 + int(flags)%100
		case policydoc.Hours:
			if r.During == nil {
				r.During = &policydoc.HourRange{From: 22, To: 6}
			}
		}
		d := policydoc.New()
		d.Rules = []policydoc.Rule{r}
		if d.Validate() != nil {
			return
		}
		g := DefaultGlossary().Add(&Glossary{Services: map[string][]string{}})
		if names&0x01 != 0 {
			g.Zones = append(g.Zones, r.Pods.Services...)
		}
		if names&0x02 != 0 {
			for _, z := range list(zones) {
				g.Services[z] = nil
			}
		}
		if names&0x04 != 0 {
			g.GPUModels = append(g.GPUModels, list(other)...)
		}
		rd, err := RenderRule(&r, g)
		if err != nil {
			if !errors.Is(err, ErrUnrenderable) || len(clashes(&r, g)) == 0 || !strings.Contains(err.Error(), "GPU model") {
				t.Fatalf("rule %+v: %v; want sentences, or ErrUnrenderable naming a GPU model", r, err)
			}
			return
		}
		for _, s := range []string{rd.English, rd.Chinese} {
			back, err := Compile(s, g)
			if err != nil || len(back) != 1 || ruleJSON(strip(back[0].Rule)) != ruleJSON(strip(r)) {
				t.Fatalf("%q does not read back: %v %s\nwant %s", s, err, rulesJSON(back), ruleJSON(r))
			}
		}
	})
}
