package federated_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/federated"
)

func TestDecodeSiteReport(t *testing.T) {
	id := strings.Repeat("0f", 32)
	cases := []struct {
		name, in, want string
	}{
		{"ok", `{"v":1,"site":"store-1","seq":3,"outbox":1,"model_version":2,"int8_model":"` + id + `","last_round":2,"sent":"2026-11-29T10:00:00Z"}`, ""},
		{"version", `{"v":2,"site":"store-1","seq":0,"outbox":0,"model_version":0,"last_round":0,"sent":"2026-11-29T10:00:00Z"}`, "version 2"},
		{"site", `{"v":1,"site":"Store_1","seq":0,"outbox":0,"model_version":0,"last_round":0,"sent":"2026-11-29T10:00:00Z"}`, `site "Store_1"`},
		{"outbox", `{"v":1,"site":"s","seq":0,"outbox":-1,"model_version":0,"last_round":0,"sent":"2026-11-29T10:00:00Z"}`, "outbox -1"},
		{"model id", `{"v":1,"site":"s","seq":0,"outbox":0,"model_version":1,"int8_model":"abc","last_round":0,"sent":"2026-11-29T10:00:00Z"}`, `int8 model "abc"`},
		{"unknown field", `{"v":1,"site":"s","bogus":1}`, "bogus"},
		{"trailing", `{"v":1,"site":"s"}}`, "trailing data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := federated.DecodeSiteReport([]byte(c.in))
			if c.want == "" {
				if err != nil || r.Site != "store-1" || r.Outbox != 1 || r.ModelVersion != 2 {
					t.Fatalf("got %+v, %v", r, err)
				}
				return
			}
			if !errors.Is(err, federated.ErrMessage) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrMessage naming %q", err, c.want)
			}
		})
	}
}
