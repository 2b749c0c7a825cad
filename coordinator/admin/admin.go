package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
)

// Admin endpoint names (subjects AdminSubjectPrefix + "." + name).
const (
	EndpointRoundStart    = "round.start"
	EndpointRoundStatus   = "round.status"
	EndpointRoundList     = "round.list"
	EndpointModelList     = "model.list"
	EndpointModelShow     = "model.show"
	EndpointModelPromote  = "model.promote"
	EndpointModelRollback = "model.rollback"
	EndpointSites         = "sites"
	EndpointRejects       = "rejects"
	// EndpointStoreBackup writes an online backup of coordinator.db into
	// the coordinator's backup directory and answers {"path", "bytes"}.
	EndpointStoreBackup = "store.backup"
	// EndpointRegionalRound answers a round's RegionalRound (what a
	// regional aggregator needs to collect for it; package coordinator,
	// regional.go).
	EndpointRegionalRound = "round.regional"
	// EndpointRegions lists the configured regions (RegionStatus).
	EndpointRegions = "regions"
)

// Request is the body of admin requests (fields by endpoint).
type Request struct {
	Round   uint64 `json:"round,omitempty"`
	Version uint64 `json:"version,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// SiteStatus is a site as the sites endpoint reports it: the
// coordinator's record of its updates and, when the site has reported
// since the coordinator started, its newest SiteReport.
type SiteStatus struct {
	store.Site
	Registered bool                  `json:"registered"`
	Report     *federated.SiteReport `json:"report,omitempty"`
}

// HAStatus is the active replica as the admin endpoint ha.status answers
// (HA false, the rest zero: a coordinator without high availability).
type HAStatus struct {
	HA         bool                `json:"ha"`
	Replica    string              `json:"replica"`
	Epoch      uint64              `json:"epoch"`
	Checkpoint *replica.Checkpoint `json:"checkpoint,omitempty"`
}

// EndpointHAStatus answers the active replica's HAStatus.
const EndpointHAStatus = "ha.status"

// RegionalRound is what a regional aggregator needs of a round: its
// record (bounds, base model, sum spec) and the model's parameter count.
type RegionalRound struct {
	Round *store.Round `json:"round"`
	Dims  int          `json:"dims"`
}

// RegionStatus is a region as the regions endpoint reports it: its
// sites, the aggregates accepted from it, and the newest verdict on one.
type RegionStatus struct {
	Region    string              `json:"region"`
	Sites     int                 `json:"sites"`
	Accepted  int                 `json:"accepted"`
	Refused   int                 `json:"refused"`
	LastRound uint64              `json:"last_round,omitempty"`
	Status    federated.AckStatus `json:"status,omitempty"`
	Reason    string              `json:"reason,omitempty"`
}

// BackupInfo answers store.backup.
type BackupInfo struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Backend answers the endpoints (package coordinator's Coordinator).
type Backend interface {
	StartRound(ctx context.Context) (*store.Round, error)
	// CurrentRound is the current round (round.status of round 0).
	CurrentRound() (*store.Round, error)
	RoundRecord(n uint64) (*store.Round, error)
	Rounds(limit int) ([]store.Round, error)
	Models(limit int) ([]store.Model, error)
	ModelRecord(version uint64) (*store.Model, error)
	Promote(ctx context.Context, version uint64) (*store.Model, error)
	Rollback(ctx context.Context, version uint64) (*store.Model, error)
	Sites() ([]SiteStatus, error)
	RegionalRound(n uint64) (*RegionalRound, error)
	RegionStatuses() ([]RegionStatus, error)
	Rejects() (map[string]uint64, error)
	HA() HAStatus
	BackupNow() (string, int64, error)
}

// Serve registers the admin API on nc as a NATS micro service answered
// by c. An error that is one of conflicts (errors.Is) answers code 409,
// any other 500; a body that is not a Request, 400.
func Serve(nc *nats.Conn, c Backend, conflicts ...error) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{Name: federated.AdminService, Version: "1.0.0",
		Description: "edgesched coordinator: rounds, models, sites"})
	if err != nil {
		return nil, fmt.Errorf("admin service: %w", err)
	}
	g := svc.AddGroup(federated.AdminSubjectPrefix)
	handlers := map[string]func(context.Context, Request) (any, error){
		EndpointRoundStart: func(ctx context.Context, _ Request) (any, error) { return c.StartRound(ctx) },
		EndpointRoundStatus: func(_ context.Context, r Request) (any, error) {
			if r.Round == 0 {
				return c.CurrentRound()
			}
			return c.RoundRecord(r.Round)
		},
		EndpointRoundList:     func(_ context.Context, r Request) (any, error) { return c.Rounds(r.Limit) },
		EndpointModelList:     func(_ context.Context, r Request) (any, error) { return c.Models(r.Limit) },
		EndpointModelShow:     func(_ context.Context, r Request) (any, error) { return c.ModelRecord(r.Version) },
		EndpointModelPromote:  func(ctx context.Context, r Request) (any, error) { return c.Promote(ctx, r.Version) },
		EndpointModelRollback: func(ctx context.Context, r Request) (any, error) { return c.Rollback(ctx, r.Version) },
		EndpointSites:         func(_ context.Context, _ Request) (any, error) { return c.Sites() },
		EndpointRegionalRound: func(_ context.Context, r Request) (any, error) { return c.RegionalRound(r.Round) },
		EndpointRegions:       func(_ context.Context, _ Request) (any, error) { return c.RegionStatuses() },
		EndpointRejects:       func(_ context.Context, _ Request) (any, error) { return c.Rejects() },
		EndpointHAStatus:      func(_ context.Context, _ Request) (any, error) { return c.HA(), nil },
		EndpointStoreBackup: func(_ context.Context, _ Request) (any, error) {
			path, n, err := c.BackupNow()
			if err != nil {
				return nil, err
			}
			return BackupInfo{Path: path, Bytes: n}, nil
		},
	}
	for name, h := range handlers {
		h := h
		err := g.AddEndpoint(strings.ReplaceAll(name, ".", "-"), micro.HandlerFunc(func(req micro.Request) {
			var ar Request
			if len(req.Data()) > 0 {
				if err := json.Unmarshal(req.Data(), &ar); err != nil {
					_ = req.Error("400", "bad request: "+err.Error(), nil)
					return
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := h(ctx, ar)
			if err != nil {
				code := "500"
				for _, e := range conflicts {
					if errors.Is(err, e) {
						code = "409"
					}
				}
				_ = req.Error(code, err.Error(), nil)
				return
			}
			_ = req.RespondJSON(out)
		}), micro.WithEndpointSubject(name))
		if err != nil {
			svc.Stop()
			return nil, fmt.Errorf("admin endpoint %s: %w", name, err)
		}
	}
	return svc, nil
}
