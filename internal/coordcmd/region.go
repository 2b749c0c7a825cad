package coordcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/coordinator/region"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/natsflags"
)

// regionCommand runs a regional aggregator (docs/federated.md
// "Hierarchical rounds"): 'edge-coordinator region --region NAME --key
// FILE --sites DIR --region-server URL' with the root's NATS connection
// flags (--server, --nkey, ...) as the coordinator's, used for the
// region's server as well; its NATS user is the region's
// (natsauth.RegionPermissions, edgectl auth site create --region).
func regionCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs, data := storeFlags("region", "region --region NAME --key FILE --sites DIR --region-server URL [root NATS flags]", stderr)
	*data = "region-data"
	d := region.DefaultConfig()
	var (
		name     = fs.String("region", "", "region name, as the root's --regions directory names it; required")
		keyFile  = fs.String("key", "", "private key that signs the region's aggregates (edgectl model keygen --name REGION); required")
		sitesDir = fs.String("sites", "", "directory of SITE.pub keys of the region's sites; required")
		local    = fs.String("region-server", "nats://127.0.0.1:4222", "the region's NATS server (its leaf-node hub), where its sites send their updates")
		lead     = fs.Duration("lead", d.Lead, "seal and forward the region's aggregate this long before the root's round deadline")
		poll     = fs.Duration("poll", d.PollInterval, "how often the root's round is checked and the outbox forwarded")
		seed     = fs.Uint64("seed", 1, "seed of the retries' jitter")
		logLevel = fs.String("log-level", "info", "debug, info, warn or error")
	)
	// --inbox-prefix defaults to the region's own (natsauth.RegionInboxPrefix)
	natsFlags := natsflags.AddGoFlags(fs, natsflags.Options{DefaultServer: nats.DefaultURL})
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("region takes no arguments, got %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return cli.Usagef("--log-level: %w", err)
	}
	if *name == "" || *keyFile == "" || *sitesDir == "" {
		return cli.Usagef("--region, --key and --sites are required")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	signer, sites, err := keyAndSites(*keyFile, *sitesDir)
	if err != nil {
		return err
	}
	cfg := d
	cfg.Region, cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Lead, cfg.PollInterval, cfg.Seed, cfg.Logger = *name, *data, sites, signer, *lead, *poll, *seed, log
	g, err := region.New(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	nconn, err := natsFlags.Resolve(nil)
	if err != nil {
		return err
	}
	if nconn.Config.InboxPrefix == "" {
		nconn.Config.InboxPrefix = natsauth.RegionInboxPrefix(*name)
	}
	connOpts, err := nconn.Config.Options()
	if err != nil {
		return fmt.Errorf("NATS connection flags: %w", err)
	}
	common := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.ReconnectJitter(250*time.Millisecond, time.Second), nats.RetryOnFailedConnect(true)}
	root, err := nats.Connect(nconn.URL, append(append(connOpts, common...), nats.Name("edge-coordinator-region-"+*name))...)
	if err != nil {
		return fmt.Errorf("connect to the root's NATS %s: %w", nconn.URL, err)
	}
	defer root.Drain()
	// the region's server knows the region's NATS user too (the same
	// generated authorization block): the same identity on both
	lc, err := nats.Connect(*local, append(append(connOpts, common...), nats.Name("edge-coordinator-region-"+*name))...)
	if err != nil {
		return fmt.Errorf("--region-server %s: %w", *local, err)
	}
	defer lc.Drain()
	for _, nc := range []*nats.Conn{root, lc} {
		if err := waitConnected(ctx, nc, *seed, log); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
	}
	log.Info("regional aggregator up", "region", *name, "sites", len(sites.Sites()), "root", nconn.URL, "region_server", *local)
	if err := g.Run(ctx, lc, root); err != nil && ctx.Err() == nil {
		return err
	}
	log.Info("regional aggregator stopped")
	return nil
}
