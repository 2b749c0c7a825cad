package cmdutil

import (
	"strings"
	"testing"

	"github.com/edgesched/edgesched/quant"
)

// TestShortOrDash: tables show a model ID abbreviated (quant.ShortID), and
// "-" where there is none.
func TestShortOrDash(t *testing.T) {
	id := strings.Repeat("c3", 32)
	for _, tc := range []struct{ id, want string }{
		{"", "-"},
		{"abc", "abc"},
		{id, quant.ShortID(id)},
	} {
		if got := ShortOrDash(tc.id); got != tc.want {
			t.Errorf("shortOrDash(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}
