package fltest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is n embedded JetStream servers routed to each other over
// loopback, one store each in t.TempDir().
type Cluster struct {
	Servers []*server.Server
}

// StartCluster starts an n-server JetStream cluster and waits until its
// meta group has a leader (every server answers JetStream requests). The
// client ports are random (Port -1); the route ports are picked free
// first, since every server must know the others' before it starts.
// Servers shut down at the test's cleanup (or earlier, by the test).
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("pick a route port: %v", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	c := &Cluster{}
	for i := range n {
		c.Servers = append(c.Servers, RunServer(t, &server.Options{
			ServerName: fmt.Sprintf("s%d", i+1), Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
			Cluster: server.ClusterOpts{Name: "edgesched-test", Host: "127.0.0.1", Port: ports[i]}, Routes: routes,
		}))
	}
	for _, s := range c.Servers {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatalf("connect to %s: %v", s.Name(), err)
		}
		js, _ := jetstream.New(nc)
		Eventually(t, 30*time.Second, "a JetStream meta leader seen from "+s.Name(), func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := js.AccountInfo(ctx)
			return err == nil, fmt.Sprint(err)
		})
		nc.Close()
	}
	return c
}

// URLs is every server's client URL, comma-separated (nats.Connect's
// list: a client fails over to the others).
func (c *Cluster) URLs() string {
	var us []string
	for _, s := range c.Servers {
		us = append(us, s.ClientURL())
	}
	return strings.Join(us, ",")
}

// StreamLeader is the server leading stream's Raft group ("" while it
// has none), as the stream's cluster info reports it.
func StreamLeader(ctx context.Context, js jetstream.JetStream, stream string) (string, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", err
	}
	if info.Cluster == nil {
		return "", nil
	}
	return info.Cluster.Leader, nil
}
