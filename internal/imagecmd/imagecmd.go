// Package imagecmd is edge-images' command line (tools/edge-images, run by
// `make images`): flags and logging wired to package ociimage, and the
// chart values that select the built images (helm-values.yaml by digest,
// helm-values-airgap.yaml by tag; HelmValues). Exit codes
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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/internal/atomicfile"
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
		fmt.Fprintf(stderr, "Usage: edge-images [flags]\n\nBuilds the OCI images of edge-agent, edge-scheduler, edge-coordinator, edgectl and nats-server\n(docs/quickstart-k3s.md, \"Images\"). `make images` passes the commit's values.\n\nFlags:\n")
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
		schedTags = fs.String("scheduler-tags", "nogorgonia", "edge-scheduler's build tags (the Makefile's SCHEDULER_TAGS)")
		schedExp  = fs.String("scheduler-goexperiment", "simd", "edge-scheduler's GOEXPERIMENT on amd64 (the Makefile's SCHEDULER_GOEXPERIMENT; empty: none)")
		caCerts   = fs.String("ca-certs", d.CACerts, "PEM CA bundle put into the base layer")
		force     = fs.Bool("force", false, "rebuild even when images.json records the same inputs")
		only      = fs.String("only", "", "comma-separated components to build (default: all: edge-agent, edge-scheduler, edge-coordinator, edgectl, nats-server)")
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
	c.Components = ociimage.DefaultComponents(*agentTags, *schedTags, *schedExp)
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
	if err := writeHelmValues(c, sum); err != nil {
		return err
	}
	return ociimage.WriteTable(stdout, sum)
}

// chartImage is where the chart deploy/helm/edgesched takes each
// component's image from (edgectl is not deployed by it).
var chartImage = map[string][]string{
	"edge-agent":       {"agent", "image"},
	"edge-scheduler":   {"scheduler", "image"},
	"edge-coordinator": {"cloud", "coordinator", "image"},
	"nats-server":      {"nats", "image"},
}

// chartArch is where the chart takes the node architectures a
// component's pods may run on (a required kubernetes.io/arch affinity):
// the platforms of its image, for the components that are not built for
// every architecture the fleet may have (the scheduler, and the NATS
// leaf on the built nats-server image, are not built for arm/v7).
var chartArch = map[string][]string{
	"edge-scheduler": {"scheduler", "architectures"},
	"nats-server":    {"nats", "leaf", "architectures"},
}

// writeHelmValues writes the chart values of this build's images:
// helm-values.yaml references them by digest (pushed to the registry
// they are named after), helm-values-airgap.yaml by tag (imported from
// the archives into K3s: containerd names imported images by tag only, so
// a digest reference would not find them).
func writeHelmValues(c ociimage.Config, sum *ociimage.Summary) error {
	for _, f := range []struct {
		name     string
		byDigest bool
		head     string
	}{
		{"helm-values.yaml", true, "the images by digest, for a registry they were pushed to (e.g. skopeo copy --all --preserve-digests oci:" + filepath.Join(c.Dir, "oci") + ":IMAGE docker://IMAGE)"},
		{"helm-values-airgap.yaml", false, "the images by tag, for nodes that imported archives/*.tar (K3s's agent/images folder or k3s ctr images import)"},
	} {
		b, err := HelmValues(sum, f.byDigest)
		if err != nil {
			return err
		}
		text := fmt.Sprintf("# Written by `make images` (edge-images) for %s, commit %s:\n# %s.\n# helm install ... -f %s\n%s",
			sum.Version, sum.Commit, f.head, f.name, b)
		if err := atomicfile.Write(filepath.Join(c.Dir, f.name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// HelmValues are the chart values (YAML) that make the chart run the
// images of sum: registry, repository and tag of the agent, scheduler,
// coordinator and NATS images, and with byDigest their index digests
// (which then win over the tags); for the scheduler and the NATS leaf,
// the architectures of their images' platforms (chartArch), so that no
// pod of theirs lands on a node its image has no platform for.
func HelmValues(sum *ociimage.Summary, byDigest bool) ([]byte, error) {
	values := map[string]any{}
	for _, cs := range sum.Components {
		path, ok := chartImage[cs.Name]
		if !ok {
			continue
		}
		ref, err := name.NewTag(cs.Image)
		if err != nil {
			return nil, fmt.Errorf("image %q: %w", cs.Image, err)
		}
		img := map[string]any{"registry": ref.RegistryStr(), "repository": ref.RepositoryStr(), "tag": ref.TagStr(), "pullPolicy": "IfNotPresent"}
		if byDigest {
			img["digest"] = cs.Digest
		}
		setValue(values, path, img)
		if path, ok := chartArch[cs.Name]; ok && len(cs.Platforms) > 0 {
			archs, err := architectures(cs.Platforms)
			if err != nil {
				return nil, fmt.Errorf("image %q: %w", cs.Image, err)
			}
			setValue(values, path, archs)
		}
	}
	return yaml.Marshal(values)
}

// setValue sets values at path, making the maps on the way.
func setValue(values map[string]any, path []string, v any) {
	m := values
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// architectures are the kubernetes.io/arch values (GOARCH: linux/arm/v7
// is arm) of platforms, sorted, each once.
func architectures(platforms []ociimage.PlatformSummary) ([]string, error) {
	var out []string
	for _, p := range platforms {
		parts := strings.Split(p.Platform, "/")
		if len(parts) < 2 || parts[0] != "linux" || parts[1] == "" {
			return nil, fmt.Errorf("platform %q: want linux/ARCH[/VARIANT]", p.Platform)
		}
		if !slices.Contains(out, parts[1]) {
			out = append(out, parts[1])
		}
	}
	slices.Sort(out)
	return out, nil
}
