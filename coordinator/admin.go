package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/admin"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/policy/nn"
)

// The admin API (package coordinator/admin) under the names the
// coordinator's API has always used.
type (
	AdminRequest  = admin.Request
	SiteStatus    = admin.SiteStatus
	BackupInfo    = admin.BackupInfo
	HAStatus      = admin.HAStatus
	RegionStatus  = admin.RegionStatus
	RegionalRound = admin.RegionalRound
)

// Admin endpoint names (package coordinator/admin).
const (
	EndpointRoundStart    = admin.EndpointRoundStart
	EndpointRoundStatus   = admin.EndpointRoundStatus
	EndpointRoundList     = admin.EndpointRoundList
	EndpointModelList     = admin.EndpointModelList
	EndpointModelShow     = admin.EndpointModelShow
	EndpointModelPromote  = admin.EndpointModelPromote
	EndpointModelRollback = admin.EndpointModelRollback
	EndpointSites         = admin.EndpointSites
	EndpointRejects       = admin.EndpointRejects
	EndpointStoreBackup   = admin.EndpointStoreBackup
	EndpointRegionalRound = admin.EndpointRegionalRound
	EndpointRegions       = admin.EndpointRegions
	EndpointHAStatus      = admin.EndpointHAStatus
)

// MaxListLimit is the largest limit of round and model listings
// (admin.MaxListLimit).
const MaxListLimit = admin.MaxListLimit

// adminBackend is the coordinator as the admin API's Backend.
type adminBackend struct{ *Coordinator }

var _ admin.Backend = adminBackend{}

func (a adminBackend) CurrentRound() (*Round, error) { return a.currentRoundLocked() }

// serveAdmin registers the admin API as a NATS micro service whose
// requests end with ctx.
func (c *Coordinator) serveAdmin(ctx context.Context, nc *nats.Conn) (micro.Service, error) {
	return admin.Serve(ctx, nc, adminBackend{c}, ErrBusy, ErrNotFound)
}

// ErrNotFound is returned for an unknown round or model version.
var ErrNotFound = errors.New("coordinator: not found")

func (c *Coordinator) currentRoundLocked() (*Round, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.currentRound()
	if err == nil && r == nil {
		return nil, fmt.Errorf("%w: no round yet", ErrNotFound)
	}
	return r, err
}

// RoundRecord returns a round.
func (c *Coordinator) RoundRecord(n uint64) (*Round, error) {
	var r *Round
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		r, err = c.rounds.Get(tx, n)
		return err
	})
	if err == nil && r == nil {
		err = fmt.Errorf("%w: round %d (round records kept: edge-coordinator --round-keep %d, 0 is all)", ErrNotFound, n, c.cfg.RoundKeep)
	}
	return r, err
}

// maxListBytes bounds the stored bytes of the records one listing
// decodes (admin.ListBudget; a variable for tests).
var maxListBytes = admin.MaxListBytes

// Rounds lists the newest rounds first (limit 0: 50), refusing a list
// whose records are more than maxListBytes.
func (c *Coordinator) Rounds(limit int) ([]Round, error) {
	return newest[Round](c, store.BucketRounds, limit, "rounds")
}

// Models lists the registry, newest first (limit 0: 50), refusing a list
// whose records are more than maxListBytes.
func (c *Coordinator) Models(limit int) ([]Model, error) {
	return newest[Model](c, store.BucketModels, limit, "models")
}

// newest lists a bucket's newest records (limit 0: 50) within
// maxListBytes.
func newest[T any](c *Coordinator, bucket []byte, limit int, what string) ([]T, error) {
	if limit <= 0 {
		limit = 50
	}
	var out []T
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		out, err = store.Newest[T](tx, bucket, limit, admin.ListBudget(what, maxListBytes))
		return err
	})
	return out, err
}

// ModelRecord returns one registry entry (0: the newest).
func (c *Coordinator) ModelRecord(version uint64) (*Model, error) {
	var m *Model
	err := c.view(func(tx *bolt.Tx) error {
		if version == 0 {
			version = getU64(tx.Bucket(store.BucketMeta), store.KeyVersion)
		}
		var err error
		m, err = store.GetModel(tx, version)
		return err
	})
	if err == nil && m == nil {
		err = fmt.Errorf("%w: model version %d", ErrNotFound, version)
	}
	return m, err
}

// Promote publishes a candidate model (AutoPublish off). Only a version
// above every published one can be promoted: versions only move forward.
func (c *Coordinator) Promote(ctx context.Context, version uint64) (*Model, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.ModelRecord(version)
	if err != nil {
		return nil, err
	}
	if m.Status == ModelPublished {
		return m, nil
	}
	latest, err := c.latestPublished()
	if err != nil {
		return nil, err
	}
	if latest != nil && latest.Version > m.Version {
		return nil, fmt.Errorf("%w: version %d is older than the published %d; use rollback to bring its weights back as a new version", ErrBusy, m.Version, latest.Version)
	}
	m.Status = ModelPending
	if err := c.update(func(tx *bolt.Tx) error {
		if err := store.PutModel(tx, m); err != nil {
			return err
		}
		return store.Audit(tx, c.clock.Now(), c.cfg.AuditKeep, "model.promoted", m.Round, "", fmt.Sprintf("version %d", m.Version))
	}); err != nil {
		return nil, err
	}
	// published (or left pending for Tick), then the round it supersedes
	// fails (should that fail, its aggregation fails it)
	perr := c.publishModel(ctx, m)
	if err := c.supersede(); err != nil {
		return nil, errors.Join(perr, err)
	}
	return m, perr
}

// supersede fails the current round, collecting or aggregating, when a
// rollback or promotion has just stored a newer version than its base
// (superseded): the next round trains from that version, and the round's
// own model, made from the older base, cannot undo it. Callers hold c.mu.
func (c *Coordinator) supersede() error {
	r, err := c.currentRound()
	if err != nil || r == nil || (r.State != StateCollecting && r.State != StateAggregating) {
		return err
	}
	_, err = c.superseded(r)
	return err
}

// Rollback republishes an older model's weights as a new version (loaders
// refuse versions that go back, so a rollback moves forward too).
func (c *Coordinator) Rollback(ctx context.Context, version uint64) (*Model, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old *Model
	var m *nn.Model
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		if old, err = store.GetModel(tx, version); err != nil || old == nil {
			return err
		}
		m, err = c.floatModel(tx, version)
		return err
	})
	if err != nil {
		return nil, err
	}
	if old == nil {
		return nil, fmt.Errorf("%w: model version %d", ErrNotFound, version)
	}
	rec, err := c.storeModel(ctx, m, old.Round, old.FloatModel, c.clock.Now(), fmt.Sprintf("rollback to version %d", version))
	if err != nil {
		return nil, err
	}
	if rec.Status != ModelPublished {
		rec.Status = ModelPending
		if err := c.update(func(tx *bolt.Tx) error { return store.PutModel(tx, rec) }); err != nil {
			return nil, err
		}
	}
	perr := c.publishModel(ctx, rec)
	if err := c.supersede(); err != nil {
		return nil, errors.Join(perr, err)
	}
	return rec, perr
}

// Sites reports every registered site and any other that sent updates.
func (c *Coordinator) Sites() ([]SiteStatus, error) { return c.SitesPage("", 0) }

// SitesPage is one page of Sites in name order: at most limit sites
// (limit <= 0: every one) whose names sort after after.
func (c *Coordinator) SitesPage(after string, limit int) ([]SiteStatus, error) {
	var ss []Site
	err := c.view(func(tx *bolt.Tx) (err error) {
		ss, err = store.SitesAfter(tx, after, limit, c.cfg.Sites.Sites())
		return err
	})
	out := make([]SiteStatus, len(ss))
	for i, s := range ss {
		_, reg := c.cfg.Sites.SiteKey(s.Site)
		out[i] = SiteStatus{Site: s, Registered: reg}
		if r, ok := c.siteReport(s.Site); ok {
			out[i].Report = &r
		}
	}
	return out, err
}

// Rejects returns the count of refused updates by reason.
func (c *Coordinator) Rejects() (map[string]uint64, error) {
	var out map[string]uint64
	err := c.view(func(tx *bolt.Tx) error { out = store.Rejects(tx); return nil })
	return out, err
}

// FloatModel returns the float model of a stored version.
func (c *Coordinator) FloatModel(version uint64) (*nn.Model, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var m *nn.Model
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		m, err = c.floatModel(tx, version)
		return err
	})
	return m, err
}
