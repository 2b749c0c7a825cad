package adminclient

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/boundedio"
)

// TestDecodeReply: an answer of at most its cap decodes (white space
// included); one byte more is refused with boundedio.ErrTooLarge naming
// the endpoint, the size and the limit, before it is decoded (the JSON
// over the cap is valid: only the cap refuses it), and so is an answer
// over MaxReplyBytes, Call's cap; JSON that does not decode names the
// endpoint.
func TestDecodeReply(t *testing.T) {
	const doc = `{"version":7}`
	padded := doc + strings.Repeat(" ", 100)
	// MaxReplyBytes+1 bytes: {"version":7}, then white space
	huge := bytes.Repeat([]byte(" "), MaxReplyBytes+1)
	copy(huge, doc)
	tooLarge := func(n, max int) string {
		return fmt.Sprintf("decode model.show answer: input exceeds its size limit: %d bytes, the limit is %d", n, max)
	}
	cases := []struct {
		name    string
		data    []byte
		max     int
		wantErr string
		tooBig  bool
	}{
		{"small", []byte(doc), MaxReplyBytes, "", false},
		{"at the cap", []byte(padded), len(padded), "", false},
		{"one byte over the cap", []byte(padded), len(padded) - 1, tooLarge(len(padded), len(padded)-1), true},
		{"over MaxReplyBytes", huge, MaxReplyBytes, tooLarge(MaxReplyBytes+1, MaxReplyBytes), true},
		{"not JSON", []byte(`{"version":`), MaxReplyBytes, "decode model.show answer: unexpected end of JSON input", false},
		{"wrong type", []byte(`{"version":"7"}`), MaxReplyBytes, "decode model.show answer: json: cannot unmarshal", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out struct {
				Version uint64 `json:"version"`
			}
			err := decodeReply("model.show", c.data, c.max, &out)
			if c.wantErr == "" {
				if err != nil || out.Version != 7 {
					t.Fatalf("decoded version %d, %v; want 7", out.Version, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || errors.Is(err, boundedio.ErrTooLarge) != c.tooBig {
				t.Fatalf("got %v; want an error containing %q (ErrTooLarge: %v)", err, c.wantErr, c.tooBig)
			}
			if out.Version != 0 {
				t.Fatalf("a refused answer decoded version %d", out.Version)
			}
		})
	}
}
