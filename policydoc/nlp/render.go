package nlp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/edgesched/edgesched/policydoc"
)

// ErrUnrenderable is wrapped by a RenderRule (and Render) error: no
// sentence reads back as the rule, because one of its names reads in
// another role whatever the sentence says. The error names the clash.
var ErrUnrenderable = errors.New("nlp: no sentence reads back as the rule")

// Rendering is one rule as an English and a Chinese sentence.
type Rendering struct {
	English string `json:"english"`
	Chinese string `json:"chinese"`
}

// styles are tried in order: the first that reads back is the rendering.
var styles = []policydoc.NameStyle{policydoc.NamesPlain, policydoc.NamesMarked, policydoc.NamesQuoted}

// RenderRule renders r as an English and a Chinese sentence that Compile,
// with the glossary g (nil: DefaultGlossary), reads back into r (its name
// and source aside). Names are written plain ("run checkout only in zone
// east") unless that reads as another rule; then every service is marked
// ("checkout service", "checkout服务"), and if that is not enough every
// name is also quoted (`run "checkout" service only in zone "a"`). A rule
// that no sentence carries (a GPU model the glossary holds as a service,
// or does not hold) is refused with an error wrapping ErrUnrenderable that
// names the clash; an invalid rule, with one wrapping policydoc.ErrInvalid.
func RenderRule(r *policydoc.Rule, g *Glossary) (Rendering, error) {
	if g == nil {
		g = DefaultGlossary()
	}
	want := strip(*r)
	d := policydoc.New()
	d.Rules = []policydoc.Rule{want}
	if err := d.Validate(); err != nil {
		return Rendering{}, fmt.Errorf("render rule: %w", err)
	}
	wantJSON := ruleJSON(want)
	var out Rendering
	var last [2]string // how the most explicit sentences read back
	for i, lang := range []struct {
		dst    *string
		render func(policydoc.NameStyle) string
	}{{&out.English, r.EnglishNames}, {&out.Chinese, r.ChineseNames}} {
		for _, s := range styles {
			text := lang.render(s)
			back, err := compile(text, g, false)
			if err == nil && len(back) == 1 && ruleJSON(strip(back[0].Rule)) == wantJSON {
				*lang.dst = text
				break
			}
			if err != nil {
				last[i] = fmt.Sprintf("%q is refused: %v", text, err)
			} else {
				last[i] = fmt.Sprintf("%q reads back as %s", text, rulesJSON(back))
			}
		}
	}
	if out.English != "" && out.Chinese != "" {
		return out, nil
	}
	if c := clashes(r, g); len(c) > 0 {
		return Rendering{}, fmt.Errorf("%w: %s", ErrUnrenderable, strings.Join(c, "; "))
	}
	var why []string
	for i, s := range []string{out.English, out.Chinese} {
		if s == "" {
			why = append(why, last[i])
		}
	}
	return Rendering{}, fmt.Errorf("%w: %s", ErrUnrenderable, strings.Join(why, "; "))
}

// Render renders every rule of d (RenderRule): one English and one
// Chinese sentence per rule, each a line that Compile, with g, reads back
// into the rule, so the lines compile back to d's rules (names and sources
// aside; scoreShare is not a sentence). The error joins every rule's.
func Render(d *policydoc.Document, g *Glossary) ([]Rendering, error) {
	if g == nil {
		g = DefaultGlossary()
	}
	out := make([]Rendering, 0, len(d.Rules))
	var errs []error
	for i := range d.Rules {
		rd, err := RenderRule(&d.Rules[i], g)
		if err != nil {
			errs = append(errs, fmt.Errorf("rules[%d] (%s): %w", i, d.Rules[i].Name, err))
			continue
		}
		out = append(out, rd)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// clashes names the names of r that read in another role in any
// sentence: GPU models, which have no role word.
func clashes(r *policydoc.Rule, g *Glossary) []string {
	var out []string
	for _, m := range r.GPUModels {
		switch t, v := g.lookup(strings.ToLower(m)); t {
		case tGPUModel:
			if v != m {
				// (a sentence names the glossary's spelling, which the
				// rule would not match: models match as written)
				out = append(out, fmt.Sprintf("GPU model %q is spelt %q in the glossary", m, v))
			}
		case tService:
			out = append(out, fmt.Sprintf("GPU model %q is the service %q in the glossary", m, v))
		case tZoneName:
			out = append(out, fmt.Sprintf("GPU model %q is the zone %q in the glossary", m, v))
		default:
			out = append(out, fmt.Sprintf("GPU model %q is not in the glossary", m))
		}
	}
	return out
}

// strip drops what a sentence does not carry: the name and the source.
func strip(r policydoc.Rule) policydoc.Rule { r.Name, r.Source = "", ""; return r }

// ruleJSON compares rules as documents do: an empty list is no list.
func ruleJSON(r policydoc.Rule) string {
	b, _ := json.Marshal(r)
	return string(b)
}

func rulesJSON(cs []Compiled) string {
	var s []string
	for _, c := range cs {
		s = append(s, ruleJSON(strip(c.Rule)))
	}
	return "[" + strings.Join(s, ",") + "]"
}
