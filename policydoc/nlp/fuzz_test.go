package nlp

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
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
// policydoc's YAML round trip or is refused as an invalid document. As the package documentation says, each rule's
// English and Chinese renderings compile back to the same rule (with its
// services in the glossary, as an operator confirms them). Seeded with
// every sentence of the corpora (testdata/corpus-*.yaml).
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
			return
		}
		if len(got) == 0 || len(text) > MaxInputBytes || !utf8.ValidString(text) {
			t.Fatalf("%d bytes compiled to %d rules without an error", len(text), len(got))
		}
		g := DefaultGlossary().Add(&Glossary{Services: map[string][]string{}})
		for _, c := range got {
			if c.English == "" || c.Chinese == "" || len(c.Rule.Source) > policydoc.MaxSourceLen {
				t.Fatalf("compiled %+v: a rendering is empty or the source is over %d bytes", c, policydoc.MaxSourceLen)
			}
			for _, s := range c.Rule.Pods.Services {
				g.Services[s] = nil
			}
		}
		for _, c := range got {
			for _, s := range []string{c.English, c.Chinese} {
				back, err := Compile(s, g)
				if err != nil && slices.ContainsFunc(c.Rule.Zones, func(z string) bool { return slices.Contains(c.Rule.Pods.Services, z) }) {
					// a known limit: a zone named as one of the rule's
					// services ("B service in B zone") is ambiguous once
					// the service is in the glossary, and refused
					continue
				}
				if err != nil || len(back) != 1 || !reflect.DeepEqual(strip(back[0].Rule), strip(c.Rule)) {
					t.Fatalf("rendering %q of %q does not read back: %v %+v\nwant %+v", s, c.Clause, err, back, c.Rule)
				}
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
