package nlp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/policydoc"
)

// corpusCase is one sentence of a corpus file: the rules it compiles to, or
// a substring of its refusal.
type corpusCase struct {
	Text   string           `json:"text"`
	Rules  []policydoc.Rule `json:"rules"`
	Refuse *string          `json:"refuse"`
}

func loadCorpus(t *testing.T, name string) []corpusCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var cs []corpusCase
	if err := yaml.UnmarshalStrict(b, &cs); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cs
}

// comparable strips what the corpus does not state.
func comparable(rs []policydoc.Rule) string {
	out := make([]policydoc.Rule, len(rs))
	for i, r := range rs {
		r.Name, r.Source = "", ""
		out[i] = r
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// corpusResult counts one corpus run.
type corpusResult struct{ compiled, refused, wrong int }

func runCorpus(t *testing.T, name string, report bool) corpusResult {
	var res corpusResult
	for _, c := range loadCorpus(t, name) {
		got, err := Compile(c.Text, nil)
		fail := func(format string, a ...any) {
			res.wrong++
			if report {
				t.Logf("WRONG "+format, a...)
			} else {
				t.Errorf(format, a...)
			}
		}
		if c.Refuse != nil {
			var e *Error
			switch {
			case err == nil:
				fail("%q compiled to %s, want a refusal containing %q", c.Text, comparable(rules(got)), *c.Refuse)
			case !errors.As(err, &e) || !errors.Is(err, ErrRefused):
				fail("%q: error %v is not an *Error", c.Text, err)
			case !strings.Contains(err.Error(), *c.Refuse):
				fail("%q: refusal %q lacks %q", c.Text, err, *c.Refuse)
			default:
				res.refused++
			}
			continue
		}
		if err != nil {
			fail("%q: %v", c.Text, err)
			continue
		}
		if g, w := comparable(rules(got)), comparable(c.Rules); g != w {
			fail("%q:\n got %s\nwant %s", c.Text, g, w)
			continue
		}
		res.compiled++
		// the canonical renderings read back into the same rules
		for _, cm := range got {
			// the operator's own service names are known once confirmed
			g := DefaultGlossary().Add(&Glossary{Services: map[string][]string{}})
			for _, s := range cm.Rule.Pods.Services {
				g.Services[s] = nil
			}
			for _, s := range []string{cm.English, cm.Chinese} {
				back, err := Compile(s, g)
				if err != nil || len(back) != 1 || !reflect.DeepEqual(strip(back[0].Rule), strip(cm.Rule)) {
					fail("rendering %q of %q does not read back: %v %v", s, c.Text, err, back)
				}
			}
		}
	}
	return res
}

func rules(cs []Compiled) []policydoc.Rule {
	var out []policydoc.Rule
	for _, c := range cs {
		out = append(out, c.Rule)
	}
	return out
}

func strip(r policydoc.Rule) policydoc.Rule { r.Name, r.Source = "", ""; return r }

// TestCorpus compiles every sentence of the corpus; the counts it logs are
// the figures (go test -run TestCorpus -v ./policydoc/nlp/).
func TestCorpus(t *testing.T) {
	total := corpusResult{}
	for _, f := range []string{"corpus-en.yaml", "corpus-zh.yaml", "corpus-refused.yaml"} {
		r := runCorpus(t, f, false)
		t.Logf("%s: %d compiled as expected, %d refused as expected, %d wrong", f, r.compiled, r.refused, r.wrong)
		total.compiled += r.compiled
		total.refused += r.refused
		total.wrong += r.wrong
	}
	t.Logf("corpus: %d compiled, %d refused, %d wrong", total.compiled, total.refused, total.wrong)
}

// TestHeldOut runs the held-out corpus, written after the grammar froze;
// it reports rather than fails (its score is a measurement, not a gate):
// go test -run TestHeldOut -v ./policydoc/nlp/
func TestHeldOut(t *testing.T) {
	r := runCorpus(t, "corpus-heldout.yaml", true)
	n := len(loadCorpus(t, "corpus-heldout.yaml"))
	t.Logf("held-out: %d of %d correct (%d compiled as expected, %d refused as expected, %d wrong)", r.compiled+r.refused, n, r.compiled, r.refused, r.wrong)
}

// TestNameAfterNamedService: after "NAME service" the next word is not
// another service (the held-out "keep the video service off arm64 nodes"
// compiled "off" as a service; fixed after the held-out run was recorded).
func TestNameAfterNamedService(t *testing.T) {
	_, err := Compile("keep the video service off arm64 nodes", nil)
	var e *Error
	if !errors.As(err, &e) || len(e.Words) != 1 || e.Words[0] != "off" {
		t.Fatalf("got %v, want a refusal naming \"off\"", err)
	}
	got, err := Compile("keep service ledger and payment in the same zone", nil)
	if err != nil || len(got) != 1 || strings.Join(got[0].Rule.Pods.Services, ",") != "ledger,payment" {
		t.Fatalf("service NAME form: %v %+v", err, got)
	}
}
