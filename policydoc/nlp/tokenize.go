package nlp

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one placed word or phrase.
type token struct {
	t    tk
	v    float64
	s    string // canonical value (service, zone, model, arch, label)
	surf string // the words as written
	verb bool   // a verb that can start a clause (keep, run, ...)
	used bool
}

var verbs = map[string]bool{"keep": true, "put": true, "place": true, "run": true, "schedule": true, "deploy": true, "spread": true, "let": true, "make sure": true, "ensure": true}

// maxPhrase is the longest English phrase in words.
const maxPhrase = 5

// enWord is one English word; a quoted name ("a", "checkout") is one word,
// and so is a label, tried before numbers (a key may start with a digit:
// "0=" was the number 0).
var enWord = regexp.MustCompile(`(?i)"[a-z0-9][a-z0-9._/-]*"|[a-z0-9][a-z0-9./_-]*=[a-z0-9._/-]*|\d{1,2}:\d{2}|\d+(?:\.\d+)?(?:\s?(?:am|pm|a\.m\.|p\.m\.))?(?:%|％)?|[a-z0-9][a-z0-9_./'&-]*[a-z0-9]|[a-z0-9]|[,&()（）%:]`)

// tokenizeEnglish reads an ASCII (or mostly ASCII) text.
func tokenizeEnglish(text string, g *Glossary) []token {
	words := enWord.FindAllString(text, -1)
	var out []token
	for i := 0; i < len(words); {
		// longest phrase first
		matched := false
		for n := min(maxPhrase, len(words)-i); n >= 1; n-- {
			key := strings.ToLower(strings.Join(words[i:i+n], " "))
			if e, ok := english[key]; ok {
				out = append(out, token{t: e.t, v: e.v, s: e.s, surf: strings.Join(words[i:i+n], " "), verb: verbs[key]})
				i += n
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		out = append(out, classifyWord(words[i], g))
		i++
	}
	return out
}

var (
	reClock  = regexp.MustCompile(`^(\d{1,2}):(\d{2})$`)
	reNumber = regexp.MustCompile(`(?i)^(\d+(?:\.\d+)?)(?:\s?(am|pm|a\.m\.|p\.m\.))?(%|％)?$`)
)

// classifyWord types a word the lexicon does not hold.
func classifyWord(w string, g *Glossary) token {
	lw := strings.ToLower(w)
	tok := token{surf: w}
	switch {
	case len(w) > 2 && w[0] == '"':
		// a quoted name: a name as written, never a policy word or an
		// alias; the glossary gives its role, a role word may change it
		n := w[1 : len(w)-1]
		tok.t, tok.s = tIdent, strings.ToLower(n)
		switch t, v := g.lookup(tok.s); t {
		case tGPUModel:
			// (the glossary's spelling: a model is matched as written)
			tok.t, tok.s = t, v
		case tService, tZoneName:
			tok.t = t
		}
	case w == "," || w == "&":
		tok.t = tPunct
	case w == "(" || w == ")" || w == "（" || w == "）" || w == ":":
		tok.t = tFiller
	case w == "%":
		tok.t = tPercentWord
	case reClock.MatchString(w):
		m := reClock.FindStringSubmatch(w)
		h, _ := strconv.Atoi(m[1])
		if m[2] != "00" || h > 24 {
			tok.t = tUnknown // minutes are not supported: refused with the word
			return tok
		}
		tok.t, tok.v = tTime, float64(h%24)
	case reNumber.MatchString(w):
		m := reNumber.FindStringSubmatch(w)
		f, _ := strconv.ParseFloat(m[1], 64)
		tok.t, tok.v = tNumber, f
		switch {
		case m[3] != "":
			tok.t = tPercent
		case m[2] != "":
			h, ok := clockHour(f, strings.HasPrefix(strings.ToLower(m[2]), "p"))
			if !ok {
				tok.t = tUnknown
				return tok
			}
			tok.t, tok.v = tTime, float64(h)
		}
	case strings.Contains(w, "="):
		tok.t, tok.s = tLabel, w
	default:
		if t, v := g.lookup(lw); t != tUnknown {
			tok.t, tok.s = t, v
			return tok
		}
		tok.t, tok.s = tIdent, lw
	}
	return tok
}

// clockHour turns h am/pm into 0-23.
func clockHour(h float64, pm bool) (int, bool) {
	if h != float64(int(h)) || h < 1 || h > 12 {
		return 0, false
	}
	hh := int(h) % 12
	if pm {
		hh += 12
	}
	return hh, true
}

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || (r >= 0x3000 && r <= 0x303f) || (r >= 0xff00 && r <= 0xffef)
}

// hasCJK reports whether the text is Chinese.
func hasCJK(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

var cnDigits = map[rune]int{'零': 0, '〇': 0, '一': 1, '二': 2, '两': 2, '三': 3, '四': 4, '五': 5, '六': 6, '七': 7, '八': 8, '九': 9}

// cnNumber parses the longest Chinese numeral at the start of s; n is its
// length in bytes (0 when there is none).
func cnNumber(s string) (val, n int) {
	section, digit, seen := 0, 0, false
	i := 0
	for i < len(s) {
		r, sz := utf8.DecodeRuneInString(s[i:])
		if d, ok := cnDigits[r]; ok {
			digit, seen = d, true
		} else {
			mult := map[rune]int{'十': 10, '百': 100, '千': 1000}[r]
			if mult == 0 {
				break
			}
			if digit == 0 && mult == 10 {
				digit = 1
			}
			section += digit * mult
			digit, seen = 0, true
		}
		i += sz
	}
	if !seen {
		return 0, 0
	}
	return section + digit, i
}

// lowerASCII lowercases ASCII letters only, keeping byte offsets.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// tokenizeChinese matches the longest lexicon word (the lexicon, the
// glossary's Chinese names and Chinese numerals) at every position; ASCII
// runs are read by the English tokenizer.
func tokenizeChinese(text string, g *Glossary) []token {
	names := g.chineseNames()
	low := lowerASCII(text)
	var out []token
	for i := 0; i < len(text); {
		r, sz := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			i += sz
			continue
		}
		best, bestLen := token{}, 0
		// lexicon and names, longest first
		j, runes := i, 0
		for j < len(text) && runes < 12 {
			_, s := utf8.DecodeRuneInString(text[j:])
			j += s
			runes++
			key := low[i:j]
			boundary := j >= len(text) || !(isASCIIAlnum(text[j]) && isASCIIAlnum(text[j-1]))
			if !boundary {
				continue
			}
			if e, ok := chinese[key]; ok {
				best, bestLen = token{t: e.t, v: e.v, s: e.s, surf: text[i:j]}, j-i
			} else if svc, ok := names[key]; ok {
				best, bestLen = token{t: tService, s: svc, surf: text[i:j]}, j-i
			}
		}
		if v, n := cnNumber(text[i:]); n > bestLen {
			best, bestLen = token{t: tNumber, v: float64(v), surf: text[i : i+n]}, n
		}
		if bestLen > 0 {
			out = append(out, best)
			i += bestLen
			continue
		}
		if r < utf8.RuneSelf {
			// an ASCII run up to the next CJK character
			j := i
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if r2 >= utf8.RuneSelf {
					break
				}
				j += s2
			}
			out = append(out, tokenizeEnglish(text[i:j], g)...)
			i = j
			continue
		}
		out = append(out, token{t: tUnknown, surf: string(r)})
		i += sz
	}
	return out
}
