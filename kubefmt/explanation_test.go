package kubefmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMaxExplanationBytes: the largest explanation EdgePolicy can write
// (a 253-byte node name, a 64-hex model ID, every feature group listed
// with an attribution of the longest encoding, every count at its
// largest) is accepted, and is less than a tenth of the cap; a value one
// byte over the cap is refused, one at it is not.
func TestMaxExplanationBytes(t *testing.T) {
	e := Explanation{Format: ExplanationFormat, Method: ExplanationMethod, ModelID: strings.Repeat("f", 64), ModelVersion: math.MaxUint64,
		Node: strings.Repeat("n", 253), Score: -1.234567e-300, Baseline: -1.234567e-300, NormalizedScore: 100,
		Candidates: math.MaxInt64, BaselineNodes: math.MaxInt64, Rest: -1.234567e-300, ComputedAt: time.Date(2026, 11, 29, 23, 59, 59, 0, time.UTC)}
	for _, g := range []string{"pod", "resources", "gpu-fit", "gpu-model", "arch", "load", "carbon", "dependencies", "a-twelve-byte", "group-ten", "group-eleven", "group-twelve"} {
		e.Groups = append(e.Groups, GroupAttribution{g, -1.234567e-300})
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw)*10 > MaxExplanationBytes {
		t.Fatalf("the largest explanation is %d bytes: not well below the cap of %d", len(raw), MaxExplanationBytes)
	}
	pad := func(n int) string { return string(raw) + strings.Repeat(" ", n-len(raw)) }
	for _, c := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"the largest written", string(raw), true},
		{"at the cap", pad(MaxExplanationBytes), true},
		{"one byte over", pad(MaxExplanationBytes + 1), false},
		{"far over", pad(4 * MaxExplanationBytes), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseExplanation(c.in)
			if c.ok {
				if err != nil || got.Node != e.Node || len(got.Groups) != len(e.Groups) {
					t.Fatalf("got %+v, %v", got, err)
				}
				return
			}
			if got != nil || !errors.Is(err, ErrExplanation) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes (limit %d)", len(c.in), MaxExplanationBytes)) {
				t.Fatalf("got %+v, %v; want ErrExplanation naming the size and the limit", got, err)
			}
		})
	}
}

func TestParseExplanation(t *testing.T) {
	good := Explanation{Format: ExplanationFormat, Method: ExplanationMethod, ModelID: strings.Repeat("ab", 32), ModelVersion: 3, Node: "n1",
		Score: 1.5, Baseline: 0.5, NormalizedScore: 100, Candidates: 4,
		Groups: []GroupAttribution{{"gpu-fit", 0.75}, {"load", 0.25}}, ComputedAt: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}
	raw, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, in, want string
	}{
		{"round trip", string(raw), ""},
		{"not json", `{"v":1,"node":`, "unexpected end"},
		{"future format", `{"v":2,"node":"n"}`, "format 2"},
		{"no node", `{"v":1}`, "no node"},
		// over the cap: refused before decoding (the value is valid JSON
		// of this format, padded with white space)
		{"over the cap", `{"v":1,"node":"n1"}` + strings.Repeat(" ", MaxExplanationBytes), "limit 16384"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := ParseExplanation(c.in)
			if c.want == "" {
				if err != nil || e.Node != "n1" || len(e.Groups) != 2 || e.Groups[0].Attribution != 0.75 || !e.ComputedAt.Equal(good.ComputedAt) {
					t.Fatalf("got %+v, %v", e, err)
				}
				return
			}
			if !errors.Is(err, ErrExplanation) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrExplanation with %q", err, c.want)
			}
		})
	}
}

// FuzzParseExplanation: no annotation value makes the parser panic; a
// refusal wraps ErrExplanation, and a value over MaxExplanationBytes is
// refused; what it accepts names a node in this build's format and
// re-encodes (as EdgePolicy writes it, compact JSON)
// to a value that parses to the same explanation, encoding then being a
// fixed point. Seeded with the annotation EdgePolicy itself wrote on the
// golden pod (internal/edgectl/testdata/explained-pod.json).
func FuzzParseExplanation(f *testing.F) {
	golden, ok := goldenAnnotations(f)[AnnotationExplanation]
	if !ok {
		f.Fatal("the golden pod has no explanation")
	}
	f.Add(golden)
	f.Add(golden[:len(golden)/2])
	f.Add(strings.Replace(golden, `"v":1`, `"v":1,"v":2`, 1))
	old := Explanation{Format: ExplanationFormat, Node: "n1", ComputedAt: time.Date(2026, 11, 29, 0, 0, 0, 0, time.FixedZone("", 19800))}
	raw, err := json.Marshal(old)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(raw))
	f.Add(`{"v":1,"node":"n","groups":null,"computedAt":"0001-01-01T00:00:00Z","score":1e308,"rest":-1e-320}`)
	f.Add(`null`)
	f.Add(golden + strings.Repeat(" ", MaxExplanationBytes+1-len(golden)))
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseExplanation(s)
		if len(s) > MaxExplanationBytes && err == nil {
			t.Fatalf("accepted a value of %d bytes, over the cap of %d", len(s), MaxExplanationBytes)
		}
		if err != nil {
			if e != nil || !errors.Is(err, ErrExplanation) {
				t.Fatalf("refusal %v (value %v) does not wrap ErrExplanation or returned a value", err, e)
			}
			return
		}
		if e.Format != ExplanationFormat || e.Node == "" {
			t.Fatalf("accepted %+v", e)
		}
		again, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("accepted %+v does not re-encode: %v", e, err)
		}
		back, err := ParseExplanation(string(again))
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", again, err)
		}
		if third, err := json.Marshal(back); err != nil || !bytes.Equal(third, again) {
			t.Fatalf("encoding is not a fixed point (%v):\n%s\n%s", err, again, third)
		}
	})
}

// goldenAnnotations are the annotations of the pod EdgePolicy placed in
// edge-plugin's TestExplainedPodGolden (internal/edgectl/testdata).
func goldenAnnotations(f *testing.F) map[string]string {
	b, err := os.ReadFile(filepath.Join("..", "internal", "edgectl", "testdata", "explained-pod.json"))
	if err != nil {
		f.Fatal(err)
	}
	var pod struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &pod); err != nil {
		f.Fatal(err)
	}
	return pod.Metadata.Annotations
}
