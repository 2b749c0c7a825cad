package coordcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator/region"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/natsflags"
)

// newRegionCommand runs a regional aggregator (docs/federated.md
// "Hierarchical rounds"): 'edge-coordinator region --region NAME --key
// FILE --sites DIR --region-server URL' with the root's NATS connection
// flags (--server, --nkey, ...) as the coordinator's, used for the
// region's server as well; its NATS user is the region's
// (natsauth.RegionPermissions, edgectl auth site create --region).
func newRegionCommand() *cobra.Command {
	cmd, data := storeCommand("region --region NAME --key FILE --sites DIR --region-server URL [root NATS flags]", "Run a regional aggregator (hierarchical rounds)", "region-data")
	fs := cmd.Flags()
	d := region.DefaultConfig()
	var (
		name     = fs.String("region", "", "region name, as the root's --regions directory names it; required")
		keyFile  = fs.String("key", "", "private key that signs the region's aggregates (edgectl model keygen --name REGION); required")
		sitesDir = fs.String("sites", "", "directory of SITE.pub keys of the region's sites; required")
		local    = fs.String("region-server", "nats://127.0.0.1:4222", "the region's NATS server (its leaf-node hub), where its sites send their updates")
		lead     = fs.Duration("lead", d.Lead, "seal and forward the region's aggregate this long before the root's round deadline")
		poll     = fs.Duration("poll", d.PollInterval, "how often the root's round is checked and the outbox forwarded")
		inflight = fs.Int64("max-inflight-bytes", d.MaxInflightBytes, maxInflightUsage)
		seed     = fs.Uint64("seed", 1, "seed of the retries' jitter")
		logLevel = fs.String("log-level", "info", "debug, info, warn or error")
	)
	// --inbox-prefix defaults to the region's own (natsauth.RegionInboxPrefix)
	natsFlags := natsflags.AddPFlags(fs, natsflags.Options{DefaultServer: nats.DefaultURL, LegacyServerFlag: true})
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return cli.Usagef("region takes no arguments, got %q", args)
		}
		return runRegion(cmd.Context(), cmd.ErrOrStderr(), regionOptions{name: *name, keyFile: *keyFile, sitesDir: *sitesDir, local: *local, data: *data,
			lead: *lead, poll: *poll, seed: *seed, logLevel: *logLevel, maxInflight: *inflight, nats: natsFlags}, d)
	}
	return cmd
}

// maxInflightUsage is --max-inflight-bytes's help, the root's and a
// region's.
const (
	maxInflightUsage   = "bytes of updates held between their fetch and their verdict; the fetch waits for room (0: 256 MiB; a larger update passes alone)"
	maxInflightRefusal = "--max-inflight-bytes %d: want 0 (256 MiB) or more"
)

// regionOptions are the region command's flags, as parsed.
type regionOptions struct {
	name, keyFile, sitesDir, local, data, logLevel string
	lead, poll                                     time.Duration
	seed                                           uint64
	maxInflight                                    int64
	nats                                           *natsflags.Flags
}

// runRegion runs the regional aggregator o describes (d: the defaults)
// until ctx ends; the log goes to stderr.
func runRegion(ctx context.Context, stderr io.Writer, o regionOptions, d region.Config) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return cli.Usagef("--log-level: %w", err)
	}
	if o.name == "" || o.keyFile == "" || o.sitesDir == "" {
		return cli.Usagef("--region, --key and --sites are required")
	}
	if o.maxInflight < 0 {
		return cli.Usagef(maxInflightRefusal, o.maxInflight)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	signer, sites, err := keyAndSites(o.keyFile, o.sitesDir)
	if err != nil {
		return err
	}
	cfg := d
	cfg.Region, cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Lead, cfg.PollInterval, cfg.Seed, cfg.Logger = o.name, o.data, sites, signer, o.lead, o.poll, o.seed, log
	cfg.MaxInflightBytes = o.maxInflight
	g, err := region.New(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	nconn, err := o.nats.Resolve(nil)
	if err != nil {
		return err
	}
	if nconn.Config.InboxPrefix == "" {
		nconn.Config.InboxPrefix = natsauth.RegionInboxPrefix(o.name)
	}
	connOpts, err := nconn.Config.Options()
	if err != nil {
		return fmt.Errorf("NATS connection flags: %w", err)
	}
	common := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.ReconnectJitter(250*time.Millisecond, time.Second), nats.RetryOnFailedConnect(true)}
	root, err := nats.Connect(nconn.URL, append(append(connOpts, common...), nats.Name("edge-coordinator-region-"+o.name))...)
	if err != nil {
		return fmt.Errorf("connect to the root's NATS %s: %w", nconn.URL, err)
	}
	defer root.Drain()
	// the region's server knows the region's NATS user too (the same
	// generated authorization block): the same identity on both
	lc, err := nats.Connect(o.local, append(append(connOpts, common...), nats.Name("edge-coordinator-region-"+o.name))...)
	if err != nil {
		return fmt.Errorf("--region-server %s: %w", o.local, err)
	}
	defer lc.Drain()
	for _, nc := range []*nats.Conn{root, lc} {
		if err := waitConnected(ctx, nc, o.seed, log); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
	}
	log.Info("regional aggregator up", "region", o.name, "sites", len(sites.Sites()), "root", nconn.URL, "region_server", o.local)
	if err := g.Run(ctx, lc, root); err != nil && ctx.Err() == nil {
		return err
	}
	log.Info("regional aggregator stopped")
	return nil
}
