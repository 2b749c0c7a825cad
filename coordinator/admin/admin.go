package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// After pages sites: the sites whose names sort after it (with
	// Limit, at most that many; "": from the first).
	After string `json:"after,omitempty"`
}

// MaxListLimit is the largest Limit of round.list and model.list (0:
// the Backend's default): what a list holds is decoded in memory and
// answered in one NATS message.
const MaxListLimit = 1000

// MaxListBytes bounds the stored bytes of the records one listing
// decodes (a round lists every expected site: 1,000 rounds of 10,000
// sites would be 200 MB): NATS's largest max_payload, which no answer can
// exceed anyway.
const MaxListBytes = 64 << 20

// ListBudget counts the stored bytes of a listing's records (a check of
// store.Newest): past max, ErrTooLarge naming what is listed.
func ListBudget(what string, max int) func(raw []byte, n int) error {
	total := 0
	return func(raw []byte, n int) error {
		if total += len(raw); total > max {
			return fmt.Errorf("%w: the newest %d %s are more than %d bytes: ask for fewer (limit)", ErrTooLarge, n+1, what, max)
		}
		return nil
	}
}

// DecodeRequest decodes an admin request body strictly (empty: the zero
// Request): an unknown field, trailing data or a Limit outside 0 to
// MaxListLimit is an error naming it. A body meant for something else
// (a KV entry a misdirected consumer delivers, docs/security.md) is
// refused rather than read for the fields it happens to share.
func DecodeRequest(data []byte) (Request, error) {
	var r Request
	if len(bytes.TrimSpace(data)) == 0 {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, errors.New("trailing data after the request")
	}
	if r.Limit < 0 || r.Limit > MaxListLimit {
		return Request{}, fmt.Errorf("limit %d: want 1 to %d (0: the default)", r.Limit, MaxListLimit)
	}
	if r.After != "" && !federated.ValidSite(r.After) {
		return Request{}, fmt.Errorf("after %.80q: not a site name", r.After)
	}
	return r, nil
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
	// SitesPage lists at most limit sites (limit 0: every one) whose
	// names sort after after, in name order.
	SitesPage(after string, limit int) ([]SiteStatus, error)
	RegionalRound(n uint64) (*RegionalRound, error)
	RegionStatuses() ([]RegionStatus, error)
	Rejects() (map[string]uint64, error)
	HA() HAStatus
	BackupNow() (string, int64, error)
}

// Serve registers the admin API on nc as a NATS micro service answered
// by c until ctx ends (each request's context is ctx's, for at most two
// minutes; a request that arrives after ctx ended is answered 503). An
// error that is one of conflicts (errors.Is) answers code 409, ErrTooLarge
// 413, any other 500; a body that is not a Request, 400 (DecodeRequest);
// an answer larger than the NATS server's max_payload, 413 naming both
// sizes (instead of no answer at all).
func Serve(ctx context.Context, nc *nats.Conn, c Backend, conflicts ...error) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{Name: federated.AdminService, Version: "1.0.0",
		Description: "edgesched coordinator: rounds, models, sites"})
	if err != nil {
		return nil, fmt.Errorf("admin service: %w", err)
	}
	g := svc.AddGroup(federated.AdminSubjectPrefix)
	// version is a request's model version, which promote and rollback
	// need named (0 would be "the newest" to ModelRecord)
	version := func(r Request) error {
		if r.Version == 0 {
			return errVersion
		}
		return nil
	}
	handlers := map[string]func(context.Context, Request) (any, error){
		EndpointRoundStart: func(ctx context.Context, _ Request) (any, error) { return c.StartRound(ctx) },
		EndpointRoundStatus: func(_ context.Context, r Request) (any, error) {
			if r.Round == 0 {
				return c.CurrentRound()
			}
			return c.RoundRecord(r.Round)
		},
		EndpointRoundList: func(_ context.Context, r Request) (any, error) { return c.Rounds(r.Limit) },
		EndpointModelList: func(_ context.Context, r Request) (any, error) { return c.Models(r.Limit) },
		EndpointModelShow: func(_ context.Context, r Request) (any, error) { return c.ModelRecord(r.Version) },
		EndpointModelPromote: func(ctx context.Context, r Request) (any, error) {
			if err := version(r); err != nil {
				return nil, err
			}
			return c.Promote(ctx, r.Version)
		},
		EndpointModelRollback: func(ctx context.Context, r Request) (any, error) {
			if err := version(r); err != nil {
				return nil, err
			}
			return c.Rollback(ctx, r.Version)
		},
		EndpointSites:         func(_ context.Context, r Request) (any, error) { return c.SitesPage(r.After, r.Limit) },
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
		err := g.AddEndpoint(strings.ReplaceAll(name, ".", "-"), micro.HandlerFunc(func(req micro.Request) {
			if ctx.Err() != nil {
				_ = req.Error("503", "coordinator: stopping", nil)
				return
			}
			ar, err := DecodeRequest(req.Data())
			if err != nil {
				_ = req.Error("400", "bad request: "+err.Error(), nil)
				return
			}
			hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			out, err := h(hctx, ar)
			if err != nil {
				code := "500"
				switch {
				case errors.Is(err, errVersion):
					code = "400"
				case errors.Is(err, ErrTooLarge):
					code = "413"
				}
				for _, e := range conflicts {
					if errors.Is(err, e) {
						code = "409"
					}
				}
				_ = req.Error(code, err.Error(), nil)
				return
			}
			raw, err := json.Marshal(out)
			if err != nil {
				_ = req.Error("500", fmt.Sprintf("coordinator: encode the %s answer: %v", name, err), nil)
				return
			}
			if max := nc.MaxPayload(); int64(len(raw)) > max {
				_ = req.Error("413", fmt.Sprintf("coordinator: the %s answer is %d bytes, more than the NATS server's max_payload (%d bytes)%s",
					name, len(raw), max, tooLargeHint(name)), nil)
				return
			}
			_ = req.Respond(raw)
		}), micro.WithEndpointSubject(name))
		if err != nil {
			svc.Stop()
			return nil, fmt.Errorf("admin endpoint %s: %w", name, err)
		}
	}
	return svc, nil
}

// ErrTooLarge is a Backend's refusal of an answer it will not make (a
// listing over its bound): answered 413.
var ErrTooLarge = errors.New("coordinator: answer too large")

// errVersion refuses a promote or rollback that names no version.
var errVersion = errors.New("coordinator: a model version is required (version >= 1)")

// tooLargeHint says how to get an answer that did not fit.
func tooLargeHint(endpoint string) string {
	switch endpoint {
	case EndpointRoundList, EndpointModelList, EndpointSites:
		return ": ask for fewer (limit)"
	}
	return ": raise the server's max_payload"
}
