package fl

import (
	"testing"

	"github.com/edgesched/edgesched/test/internal/netfault"
)

// proxy is a TCP relay in front of a server whose links the test can cut
// (every connection closed, new ones refused) and restore: a WAN outage
// with real sockets (test/internal/netfault, shared with test/chaos).
type proxy struct{ *netfault.Proxy }

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p, err := netfault.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &proxy{p}
}

func (p *proxy) URL() string { return "nats://" + p.Addr() }

// Restore accepts connections again.
func (p *proxy) Restore() { p.Heal() }
