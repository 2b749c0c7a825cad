package region

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

// ErrConfig wraps every refusal of a configuration.
var ErrConfig = errors.New("region: bad config")

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Config configures a regional aggregator. Start from DefaultConfig.
type Config struct {
	// Region is the region's name (a DNS label), as the root's regions
	// directory names it.
	Region string
	// DataDir holds region.db (created).
	DataDir string
	// Sites are the region's sites and their keys.
	Sites *federated.Registry
	// Signer signs the regional aggregates (the root trusts its public
	// key for Sites only).
	Signer *quant.Signer
	// Lead is how long before the root's round deadline the region seals
	// and forwards what it has (it forwards at once when every site of
	// the region has contributed).
	Lead time.Duration
	// PollInterval is how often the root's round is checked and the
	// outbox forwarded.
	PollInterval time.Duration
	// Batch is the most updates judged in one transaction; Verifiers how
	// many check signatures and payloads in parallel (0: GOMAXPROCS).
	Batch     int
	Verifiers int
	// MaxInflightBytes bounds the bytes of the fetched updates not yet
	// acked or nacked (0: ingest.DefaultMaxInflightBytes; one larger
	// message still passes, alone).
	MaxInflightBytes int64
	// Seed seeds the retries' jitter.
	Seed   uint64
	Clock  coordinator.Clock // (nil: the wall clock)
	Logger *slog.Logger
}

// DefaultConfig seals 30 s before the root's deadline and polls every
// 200 ms.
func DefaultConfig() Config {
	return Config{Lead: 30 * time.Second, PollInterval: 200 * time.Millisecond, Batch: 256}
}

// Validate names the first bad field.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, a...))
	}
	switch {
	case !federated.ValidSite(c.Region):
		return bad("Region", "%q is not a DNS label", c.Region)
	case c.DataDir == "":
		return bad("DataDir", "required")
	case c.Sites == nil || len(c.Sites.Sites()) == 0:
		return bad("Sites", "no registered sites")
	case c.Signer == nil:
		return bad("Signer", "required (aggregates are signed)")
	case c.Lead < 0 || c.PollInterval <= 0:
		return bad("Lead/PollInterval", "Lead >= 0, PollInterval > 0")
	case c.Batch < 1 || c.Verifiers < 0:
		return bad("Batch/Verifiers", "Batch >= 1, Verifiers >= 0")
	case c.MaxInflightBytes < 0:
		return bad("MaxInflightBytes", "%d, want >= 0 (0: %d)", c.MaxInflightBytes, ingest.DefaultMaxInflightBytes)
	}
	return nil
}
