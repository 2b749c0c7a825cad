// Package imagecmd is edge-images' command line (tools/edge-images, run by
// `make images`): flags and logging wired to package ociimage. Exit codes
// as every edgesched binary's (internal/cli): 0 success, 1 when the build
// fails, 2 for a bad command line.
//
// Main owns nothing beyond its call: the build stops at its next step when
// ctx ends (Ctrl-C, SIGTERM).
package imagecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/ociimage"
)

// Main runs edge-images with args; it returns the process exit code. The
// summary goes to stdout, progress to stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "edge-images:", strings.TrimRight(err.Error(), "\n"))
	}
	return cli.ExitCode(err)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d := ociimage.DefaultConfig()
	fs := flag.NewFlagSet("edge-images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: edge-images [flags]\n\nBuilds the OCI images of edge-agent, edge-scheduler, edge-coordinator and edgectl\n(docs/quickstart-k3s.md, \"Images\"). `make images` passes the commit's values.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var (
		out       = fs.String("out", d.Dir, "output directory (bin/, oci/, archives/, images.json, images.txt)")
		registry  = fs.String("registry", d.Registry, "image name prefix: REGISTRY/NAME:TAG")
		tag       = fs.String("tag", d.Tag, "image tag")
		version   = fs.String("release", d.Meta.Version, "release version recorded in the images' labels (git describe; a -dirty suffix disables reuse)")
		commit    = fs.String("commit", "", "commit recorded in the images' labels (git rev-parse HEAD)")
		epoch     = fs.String("source-date-epoch", "", "creation time of every file and image, in Unix seconds (the commit's time); required")
		ldflags   = fs.String("ldflags", d.LDFlags, "-ldflags of every go build")
		agentTags = fs.String("agent-tags", "nogorgonia", "edge-agent's build tags (the Makefile's AGENT_TAGS)")
		schedExp  = fs.String("scheduler-goexperiment", "simd", "edge-scheduler's GOEXPERIMENT on amd64 (the Makefile's SCHEDULER_GOEXPERIMENT; empty: none)")
		caCerts   = fs.String("ca-certs", d.CACerts, "PEM CA bundle put into the base layer")
		force     = fs.Bool("force", false, "rebuild even when images.json records the same inputs")
		only      = fs.String("only", "", "comma-separated components to build (default: all four)")
		showVer   = fs.Bool("version", false, "print the version, commit and build date and exit")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cli.Usage(err)
	}
	if *showVer {
		_, err := fmt.Fprintln(stdout, cli.Info().Line("edge-images"))
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments %q", fs.Args())
	}
	if *epoch == "" {
		return cli.Usagef("--source-date-epoch is required (git log -1 --format=%%ct)")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || secs < 0 {
		return cli.Usagef("--source-date-epoch %q: not a non-negative number of seconds", *epoch)
	}
	c := d
	c.Dir, c.Registry, c.Tag, c.LDFlags, c.CACerts, c.Force = *out, *registry, *tag, *ldflags, *caCerts, *force
	c.Meta = ociimage.Meta{Version: *version, Commit: *commit, Created: time.Unix(secs, 0).UTC()}
	c.Components = ociimage.DefaultComponents(*agentTags, *schedExp)
	if *only != "" {
		var keep []ociimage.Component
		var names []string
		for _, comp := range c.Components {
			names = append(names, comp.Name)
		}
		for n := range strings.SplitSeq(*only, ",") {
			i := -1
			for j, comp := range c.Components {
				if comp.Name == n {
					i = j
				}
			}
			if i < 0 {
				return cli.UnknownValue("--only", n, names)
			}
			keep = append(keep, c.Components[i])
		}
		c.Components = keep
	}
	if err := c.Validate(); err != nil {
		return cli.Usage(err)
	}
	c.Log = slog.New(slog.NewTextHandler(stderr, nil))
	start := time.Now()
	sum, reused, err := ociimage.Build(ctx, c)
	if err != nil {
		return err
	}
	if reused {
		fmt.Fprintf(stdout, "%s: up to date (same commit and inputs; --force rebuilds)\n", c.Dir)
	} else {
		fmt.Fprintf(stdout, "built into %s in %s\n", c.Dir, time.Since(start).Round(time.Second))
	}
	return ociimage.WriteTable(stdout, sum)
}
