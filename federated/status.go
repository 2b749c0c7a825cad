package federated

import (
	"fmt"
	"time"
)

// StatusSubjectPrefix + site carries a site's periodic SiteReport (core
// NATS, not persisted: the newest report is all anyone needs). With NATS
// authorisation a site may publish only under its own name (docs/federated.md).
const StatusSubjectPrefix = "edgesched.status."

// SiteReport is a site's heartbeat: what it runs and what it still has to
// send. The coordinator keeps the newest per site for `edgectl sites`.
type SiteReport struct {
	V    int    `json:"v"`
	Site string `json:"site"`
	// Seq is the site's newest update sequence; Outbox how many updates
	// wait for an ack; DroppedFull how many the full outbox cost so far.
	Seq         uint64 `json:"seq"`
	Outbox      int    `json:"outbox"`
	DroppedFull uint64 `json:"dropped_full,omitempty"`
	// ModelVersion/Int8Model: the installed model (0/"" before the first).
	ModelVersion uint64 `json:"model_version"`
	Int8Model    string `json:"int8_model,omitempty"`
	// LastRound is the last round the site trained for.
	LastRound uint64    `json:"last_round"`
	Sent      time.Time `json:"sent"`
}

// DecodeSiteReport parses a site report strictly.
func DecodeSiteReport(b []byte) (*SiteReport, error) {
	var r SiteReport
	if err := decodeStrict(b, &r); err != nil {
		return nil, fmt.Errorf("%w: site report: %v", ErrMessage, err)
	}
	switch {
	case r.V != ProtocolVersion:
		return nil, fmt.Errorf("%w: site report version %d, this build speaks %d", ErrMessage, r.V, ProtocolVersion)
	case !ValidSite(r.Site):
		return nil, fmt.Errorf("%w: site report for site %q", ErrMessage, r.Site)
	case r.Outbox < 0:
		return nil, fmt.Errorf("%w: site report outbox %d", ErrMessage, r.Outbox)
	case r.Int8Model != "" && len(r.Int8Model) != 64:
		return nil, fmt.Errorf("%w: site report int8 model %q", ErrMessage, r.Int8Model)
	}
	return &r, nil
}
