package nlp

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/edgesched/edgesched/policydoc"
)

// ErrRefused is wrapped by every refusal.
var ErrRefused = errors.New("nlp: refused")

// MaxInputBytes caps the text Compile reads.
const MaxInputBytes = 64 << 10

// Error is a refusal of one clause: the words that could not be placed (or
// that make it ambiguous) and what was expected.
type Error struct {
	Clause    string
	Words     []string
	Expected  string
	Ambiguous bool
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Ambiguous {
		b.WriteString("ambiguous: ")
	} else {
		b.WriteString("refused: ")
	}
	fmt.Fprintf(&b, "%q", e.Clause)
	if len(e.Words) > 0 {
		q := make([]string, len(e.Words))
		for i, w := range e.Words {
			q[i] = fmt.Sprintf("%q", w)
		}
		fmt.Fprintf(&b, ": could not place %s", strings.Join(q, ", "))
	}
	if e.Expected != "" {
		b.WriteString("; " + e.Expected)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *Error) Unwrap() error { return ErrRefused }

// Compiled is one rule with the clause it came from and its canonical
// renderings (RenderRule: they read back into the rule).
type Compiled struct {
	Clause  string         `json:"clause"`
	Rule    policydoc.Rule `json:"rule"`
	English string         `json:"english"`
	Chinese string         `json:"chinese"`
}

var (
	splitEN = regexp.MustCompile(`(?i)[;!?\n]|\.(?:\s|$)|,?\s+but\s+|,\s*(?:and\s+)?then\s+|,\s*(?:and\s+)?also\s+`)
	splitZH = regexp.MustCompile(`[，,；;。！？!?\n]|但是|但|而且|并且|另外|此外`)
)

// Compile reads sentences and returns one rule per clause, or an error
// joining every clause's refusal (each an *Error). Each rule comes with
// its sentences (RenderRule), which Compile with g reads back into it; a
// rule no sentence carries is refused, naming the clash.
func Compile(text string, g *Glossary) ([]Compiled, error) { return compile(text, g, true) }

// compile is Compile; without render the rules have no sentences.
func compile(text string, g *Glossary, render bool) ([]Compiled, error) {
	if len(text) > MaxInputBytes {
		return nil, &Error{Clause: text[:80] + "...", Expected: fmt.Sprintf("at most %d bytes of text", MaxInputBytes)}
	}
	if !utf8.ValidString(text) {
		// the document would carry the source sentences with each bad
		// byte replaced: changed, and maybe over policydoc.MaxSourceLen
		i := 0
		for {
			r, n := utf8.DecodeRuneInString(text[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		line := text[strings.LastIndexByte(text[:i], '\n')+1:]
		line, _, _ = strings.Cut(line, "\n")
		return nil, &Error{Clause: line[:min(len(line), 80)], Expected: fmt.Sprintf("UTF-8 text (byte %d is not UTF-8)", i)}
	}
	if g == nil {
		g = DefaultGlossary()
	}
	var out []Compiled
	var errs []error
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		zh := hasCJK(line)
		re := splitEN
		if zh {
			re = splitZH
		}
		var clauses []clause
		for _, part := range re.Split(line, -1) {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			var toks []token
			if zh {
				toks = tokenizeChinese(part, g)
			} else {
				toks = tokenizeEnglish(part, g)
			}
			clauses = append(clauses, splitAnd(clause{text: part, toks: toks})...)
		}
		clauses = mergeFragments(clauses, zh)
		if zh {
			clauses = mergeContinuations(clauses)
		}
		for _, c := range clauses {
			r, err := compileClause(c)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			r.Source = c.text
			if len(r.Source) > policydoc.MaxSourceLen {
				// cut on a character boundary
				n := policydoc.MaxSourceLen
				for n > 0 && !utf8.RuneStart(r.Source[n]) {
					n--
				}
				r.Source = r.Source[:n]
			}
			cm := Compiled{Clause: c.text, Rule: *r}
			if render {
				rd, err := RenderRule(r, g)
				if err != nil {
					// unreachable while compiled GPU models come from
					// the glossary; refused rather than shown wrong
					errs = append(errs, refuse(c, nil, "a rule a sentence can carry: %v", err))
					continue
				}
				cm.English, cm.Chinese = rd.English, rd.Chinese
			}
			out = append(out, cm)
		}
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, &Error{Clause: strings.TrimSpace(text), Expected: "expected at least one sentence"}
	}
	return out, nil
}

// CompileDocument compiles text into a validated document.
func CompileDocument(text string, g *Glossary) (*policydoc.Document, []Compiled, error) {
	cs, err := Compile(text, g)
	if err != nil {
		return nil, cs, err
	}
	d := policydoc.New()
	for _, c := range cs {
		d.Rules = append(d.Rules, c.Rule)
	}
	if err := d.Validate(); err != nil {
		return nil, cs, err
	}
	return d, cs, nil
}

type clause struct {
	text string
	toks []token
}

func isModal(t tk) bool {
	return t == tReq || t == tNeg || t == tPref || t == tAvoid || t == tShould || t == tOnly
}

// splitAnd splits a clause at "and" or "," followed by a modal or a verb
// that starts a new rule ("keep a in zone x and never run b on arm64").
func splitAnd(c clause) []clause {
	var out []clause
	start := 0
	for i := 0; i+1 < len(c.toks); i++ {
		if c.toks[i].t != tAnd && c.toks[i].t != tPunct {
			continue
		}
		nx := c.toks[i+1]
		if (isModal(nx.t) && nx.t != tOnly) || nx.verb {
			out = append(out, clause{text: surface(c.toks[start:i]), toks: c.toks[start:i]})
			start = i + 1
		}
	}
	if start == 0 {
		return []clause{c}
	}
	return append(out, clause{text: surface(c.toks[start:]), toks: c.toks[start:]})
}

func surface(ts []token) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.surf)
	}
	return strings.Join(s, " ")
}

var objectTokens = []tk{tSame, tDiff, tSpread, tNear, tLabel, tArch, tGPUModel, tCarbonWord, tLowCarbon, tHighCarbon, tCPU, tPercent, tReplica, tScopeZone, tIdent, tUnknown, tZoneName}

// mergeFragments joins a clause with neither a modal nor an object (a
// leading "at night," or a subject) to the next one. Each clause is
// copied once (joining them one by one made text of many fragments take
// quadratic time).
func mergeFragments(cs []clause, zh bool) []clause {
	var out, group []clause
	sep := " "
	if zh {
		sep = "，"
	}
	for _, c := range cs {
		group = append(group, c)
		// joined to fragments, c is a fragment only if it is one itself
		if !slices.ContainsFunc(c.toks, func(t token) bool { return isModal(t.t) || slices.Contains(objectTokens, t.t) }) {
			continue
		}
		out = append(out, joinClauses(group, sep))
		group = group[:0]
	}
	if len(group) > 0 {
		if len(out) > 0 {
			out[len(out)-1] = joinClauses(append([]clause{out[len(out)-1]}, group...), sep)
		} else {
			out = append(out, joinClauses(group, sep))
		}
	}
	return out
}

// mergeContinuations joins a Chinese clause with neither a modal nor a
// subject ("放在不同的节点" after "尽量把A和B分开") to the clause before it.
func mergeContinuations(cs []clause) []clause {
	var groups [][]clause
	for _, c := range cs {
		subj := slices.ContainsFunc(c.toks, func(t token) bool {
			return isModal(t.t) || t.t == tService || t.t == tGPU || t.t == tAll || t.t == tIdent
		})
		if !subj && len(groups) > 0 {
			groups[len(groups)-1] = append(groups[len(groups)-1], c)
			continue
		}
		groups = append(groups, []clause{c})
	}
	var out []clause
	for _, g := range groups {
		out = append(out, joinClauses(g, "，"))
	}
	return out
}

// joinClauses is the clauses as one, their texts joined with sep, in new
// token storage (a single clause is returned as it is).
func joinClauses(cs []clause, sep string) clause {
	if len(cs) == 1 {
		return cs[0]
	}
	texts := make([]string, len(cs))
	var toks []token
	for i, c := range cs {
		texts[i] = c.text
		toks = append(toks, c.toks...)
	}
	return clause{text: strings.Join(texts, sep), toks: toks}
}
