package kubefmt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

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
