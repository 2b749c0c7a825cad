package fleet_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/micro"

	"github.com/edgesched/edgesched/coordinator/admin"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/edgectl/edgectltest"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// pagedSites answers the sites endpoint from n generated sites the way
// the coordinator pages them, and records each request's limit; only
// SitesPage is served (the embedded Backend is nil: another endpoint
// would panic the test).
type pagedSites struct {
	admin.Backend
	n      int
	mu     sync.Mutex
	limits []int
}

func (p *pagedSites) SitesPage(after string, limit int) ([]admin.SiteStatus, error) {
	p.mu.Lock()
	p.limits = append(p.limits, limit)
	p.mu.Unlock()
	var out []admin.SiteStatus
	for i := range p.n {
		if name := fmt.Sprintf("site-%05d", i); name > after && (limit == 0 || len(out) < limit) {
			out = append(out, admin.SiteStatus{Site: store.Site{Site: name, HWM: uint64(i), Accepted: i,
				Rejected: map[string]int{"bounds": 1, "replay": 2, "stale_round": 3}}, Registered: true})
		}
	}
	return out, nil
}

// TestSitesPages: edgectl sites lists a fleet whose statuses are far
// larger than the server's max_payload, page by page: 3,000 sites of about
// 150 bytes of JSON each (450 KB) through a server taking 64 KiB. A page
// of 500 (75 KB) is answered 413, so the next asks for 250 (37 KB); each
// site comes once, in order, with its figures.
func TestSitesPages(t *testing.T) {
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1, MaxPayload: 64 << 10})
	nc := natstest.Connect(t, srv.ClientURL(), "coordinator")
	b := &pagedSites{n: 3000}
	svc, err := admin.Serve(t.Context(), nc, b)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	out, _, err := edgectltest.Run(t, "sites", "--server", srv.ClientURL(), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ss []admin.SiteStatus
	if err := json.Unmarshal([]byte(out), &ss); err != nil {
		t.Fatalf("sites -o json: %v", err)
	}
	if len(ss) != b.n {
		t.Fatalf("listed %d sites, want %d", len(ss), b.n)
	}
	for i, s := range ss {
		if want := fmt.Sprintf("site-%05d", i); s.Site.Site != want || s.Accepted != i || s.Rejected["stale_round"] != 3 {
			t.Fatalf("site %d is %s (accepted %d), want %s (accepted %d)", i, s.Site.Site, s.Accepted, want, i)
		}
	}
	// 500 refused, then 12 pages of 250: the last, full, is followed by
	// an empty one that ends the walk
	want := append([]int{500}, slices.Repeat([]int{250}, 13)...)
	if !slices.Equal(b.limits, want) {
		t.Errorf("pages asked for %v, want %v", b.limits, want)
	}
	out, _, err = edgectltest.Run(t, "sites", "--server", srv.ClientURL())
	if err != nil || strings.Count(out, "\n") != b.n+1 || !strings.Contains(out, "site-02999") {
		t.Errorf("sites table: %d lines (want %d), %v", strings.Count(out, "\n"), b.n+1, err)
	}
}

// TestSitesFromACoordinatorWithoutPaging: a coordinator from before
// paging answers every site at once and refuses a request naming "after"
// (400, unknown field): edgectl lists every site from the first answer,
// whether it holds more sites than a page (700: no second request) or
// exactly a page (500: the second request is refused, and the first was
// the whole list).
func TestSitesFromACoordinatorWithoutPaging(t *testing.T) {
	for _, n := range []int{700, 500} {
		srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1})
		nc := natstest.Connect(t, srv.ClientURL(), "old-coordinator")
		requests := 0
		svc, err := micro.AddService(nc, micro.Config{Name: "old", Version: "0.9.0"})
		if err != nil {
			t.Fatal(err)
		}
		err = svc.AddEndpoint("sites", micro.HandlerFunc(func(req micro.Request) {
			requests++
			if strings.Contains(string(req.Data()), `"after"`) {
				_ = req.Error("400", `bad request: json: unknown field "after"`, nil)
				return
			}
			all := make([]admin.SiteStatus, n)
			for i := range all {
				all[i] = admin.SiteStatus{Site: store.Site{Site: fmt.Sprintf("site-%05d", i)}, Registered: true}
			}
			_ = req.RespondJSON(all)
		}), micro.WithEndpointSubject(federated.AdminSubjectPrefix+".sites"))
		if err != nil {
			t.Fatal(err)
		}
		// the subscription reaches the server before edgectl asks
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		out, _, err := edgectltest.Run(t, "sites", "--server", srv.ClientURL(), "-o", "json")
		var ss []admin.SiteStatus
		if err != nil || json.Unmarshal([]byte(out), &ss) != nil || len(ss) != n {
			t.Fatalf("%d sites from an old coordinator: listed %d (%v)", n, len(ss), err)
		}
		if want := 1 + min(1, 1-(n-500+499)/500); n == 700 && requests != 1 || n == 500 && requests != 2 {
			t.Fatalf("%d sites: %d requests (want %d)", n, requests, want)
		}
		_ = svc.Stop()
	}
}
