package gobuild

import "testing"

func TestProgramName(t *testing.T) {
	cases := []struct{ pkg, want string }{
		{"./cmd/edge-coordinator", "edge-coordinator"},
		{"github.com/nats-io/nats-server/v2", "nats-server"},
		{"go.etcd.io/bbolt/cmd/bbolt", "bbolt"},
		{"./test/chaos/cmd/chaos-agent/", "chaos-agent"},
		{"example.com/vault", "vault"}, // not a version suffix
	}
	for _, tc := range cases {
		t.Run(tc.pkg, func(t *testing.T) {
			if got := ProgramName(tc.pkg); got != tc.want {
				t.Fatalf("ProgramName(%q) = %q, want %q", tc.pkg, got, tc.want)
			}
		})
	}
}
