package ociimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/internal/boundedio"
)

// Sentinel errors.
var (
	ErrConfig        = errors.New("bad image build configuration")
	ErrBadPath       = errors.New("path must be absolute, clean and not /")
	ErrDuplicatePath = errors.New("duplicate path")
	ErrGoBuild       = errors.New("go build failed")
	// ErrSummary: images.json is not a summary Build wrote (over
	// MaxSummaryBytes, not JSON, or a file outside the build directory).
	ErrSummary = errors.New("bad images.json")
)

// MaxSummaryBytes caps images.json (Build writes well under 1 KB per
// component and platform).
const MaxSummaryBytes = 1 << 20

// Component is one program shipped as an image.
type Component struct {
	Name        string        // program and image name, e.g. edge-agent
	Package     string        // main package, e.g. ./cmd/edge-agent
	Description string        // the image's description annotation
	Tags        string        // build tags, e.g. the Makefile's AGENT_TAGS; "" none
	User        string        // "UID:GID" of the image's config; the pod may override it
	Platforms   []v1.Platform // at least one, linux only
	// GOEXPERIMENT per architecture (e.g. amd64: simd for the scheduler's
	// AVX2 kernel); absent: none.
	GoExperiment map[string]string
}

// Config is one image build. The zero value is not valid: start from
// DefaultConfig.
type Config struct {
	Dir        string      // output directory; created; its outputs are replaced
	ModuleDir  string      // the Go module's root ("" is the working directory)
	Registry   string      // image name prefix, e.g. ghcr.io/edgesched
	Tag        string      // image tag, e.g. git describe's output
	Meta       Meta        // version, commit, creation time (SOURCE_DATE_EPOCH)
	LDFlags    string      // -ldflags of every go build (-s -w and the -X version stamps)
	CACerts    string      // PEM CA bundle copied into the base layer
	GoCmd      string      // the go command ("" is "go")
	Components []Component // what to build
	Force      bool        // rebuild even when images.json records the same inputs
	Log        *slog.Logger
}

// Platforms of the images.
var (
	LinuxAMD64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	LinuxARM64 = v1.Platform{OS: "linux", Architecture: "arm64"}
	LinuxARMv7 = v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}
)

// DefaultComponents are edgesched's four programs, edge-agent (root, for
// its eBPF capabilities; also 32-bit arm) and the other three as nonroot,
// and nats-server (nonroot).
// agentTags and schedulerTags are the Makefile's AGENT_TAGS and
// SCHEDULER_TAGS; schedulerExperiment is the scheduler's GOEXPERIMENT on
// amd64 (the Makefile's SCHEDULER_GOEXPERIMENT).
func DefaultComponents(agentTags, schedulerTags, schedulerExperiment string) []Component {
	nonroot := fmt.Sprintf("%d:%d", NonrootUID, NonrootUID)
	both := []v1.Platform{LinuxAMD64, LinuxARM64}
	sched := Component{Name: "edge-scheduler", Package: "./cmd/edge-scheduler", Tags: schedulerTags, User: nonroot, Platforms: both,
		Description: "kube-scheduler with the EdgePolicy plugin (int8 policy scoring) and its extender"}
	if schedulerExperiment != "" {
		sched.GoExperiment = map[string]string{"amd64": schedulerExperiment}
	}
	return []Component{
		{Name: "edge-agent", Package: "./cmd/edge-agent", Tags: agentTags, User: "0:0",
			Platforms:   []v1.Platform{LinuxAMD64, LinuxARM64, LinuxARMv7},
			Description: "node telemetry (eBPF, /proc), site leader and federated-learning client; runs as root with CAP_BPF and CAP_PERFMON only"},
		sched,
		{Name: "edge-coordinator", Package: "./cmd/edge-coordinator", User: nonroot, Platforms: both,
			Description: "federated-learning coordinator: rounds, aggregation, signed models"},
		{Name: "edgectl", Package: "./cmd/edgectl", User: nonroot, Platforms: both,
			Description: "the operator's command line (model rounds, auth, simulation)"},
		// The chart's NATS (leaf node and hub) for air-gapped sites: the
		// nats-server release go.mod pins (the one the tests embed), so no
		// image has to come from Docker Hub.
		{Name: "nats-server", Package: "github.com/nats-io/nats-server/v2", User: nonroot, Platforms: both,
			Description: "NATS server (the release edgesched's go.mod pins) for the site's leaf node and the cloud hub"},
	}
}

// DefaultConfig builds DefaultComponents (agent and scheduler tags
// nogorgonia, the scheduler with GOEXPERIMENT=simd on amd64) into build/images as
// ghcr.io/edgesched/NAME:dev, created at the Unix epoch, with the
// machine's CA bundle. Set Meta and Tag from the commit.
func DefaultConfig() Config {
	return Config{
		Dir:        filepath.Join("build", "images"),
		Registry:   "ghcr.io/edgesched",
		Tag:        "dev",
		Meta:       Meta{Version: "dev", Created: time.Unix(0, 0).UTC()},
		LDFlags:    "-s -w",
		CACerts:    "/etc/ssl/certs/ca-certificates.crt",
		GoCmd:      "go",
		Components: DefaultComponents("nogorgonia", "nogorgonia", "simd"),
	}
}

var (
	tagRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	userRE = regexp.MustCompile(`^[0-9]+:[0-9]+$`)
)

// Validate reports the first problem of c.
func (c Config) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: no output directory", ErrConfig)
	}
	if !tagRE.MatchString(c.Tag) {
		return fmt.Errorf("%w: tag %q is not a valid image tag", ErrConfig, c.Tag)
	}
	if _, err := name.NewRepository(c.Registry + "/x"); err != nil || c.Registry == "" {
		return fmt.Errorf("%w: registry %q: %v", ErrConfig, c.Registry, err)
	}
	if c.Meta.Created.IsZero() {
		return fmt.Errorf("%w: no creation time (SOURCE_DATE_EPOCH)", ErrConfig)
	}
	if c.CACerts == "" {
		return fmt.Errorf("%w: no CA bundle", ErrConfig)
	}
	if len(c.Components) == 0 {
		return fmt.Errorf("%w: no components", ErrConfig)
	}
	seen := map[string]bool{}
	for _, comp := range c.Components {
		switch {
		case comp.Name == "" || strings.ContainsAny(comp.Name, "/: ") || seen[comp.Name]:
			return fmt.Errorf("%w: component name %q (empty, duplicate or with / : or space)", ErrConfig, comp.Name)
		case comp.Package == "":
			return fmt.Errorf("%w: component %s has no package", ErrConfig, comp.Name)
		case !userRE.MatchString(comp.User):
			return fmt.Errorf("%w: component %s: user %q is not UID:GID", ErrConfig, comp.Name, comp.User)
		case len(comp.Platforms) == 0:
			return fmt.Errorf("%w: component %s has no platform", ErrConfig, comp.Name)
		}
		seen[comp.Name] = true
		for _, p := range comp.Platforms {
			if p.OS != "linux" || p.Architecture == "" {
				return fmt.Errorf("%w: component %s: platform %s (linux only)", ErrConfig, comp.Name, PlatformString(p))
			}
		}
	}
	return nil
}

// ImageRef is REGISTRY/NAME:TAG.
func (c Config) ImageRef(component string) string { return c.Registry + "/" + component + ":" + c.Tag }

// Summary is images.json: what a build made.
type Summary struct {
	Key        string             `json:"key"` // hash of the inputs (InputKey)
	Version    string             `json:"version"`
	Commit     string             `json:"commit"`
	Created    time.Time          `json:"created"`
	Components []ComponentSummary `json:"components"`
}

// ComponentSummary is one component's index and images.
type ComponentSummary struct {
	Name      string            `json:"name"`
	Image     string            `json:"image"`  // REGISTRY/NAME:TAG
	Digest    string            `json:"digest"` // of the multi-platform index
	User      string            `json:"user"`
	Platforms []PlatformSummary `json:"platforms"`
}

// PlatformSummary is one platform's image.
type PlatformSummary struct {
	Platform       string `json:"platform"` // linux/arm64
	Digest         string `json:"digest"`   // of the image manifest
	CompressedSize int64  `json:"compressedSize"`
	BinarySize     int64  `json:"binarySize"`
	Binary         string `json:"binary"`  // relative to Dir
	Archive        string `json:"archive"` // relative to Dir
}

// CompressedSize of an image: its manifest, configuration and compressed
// layers, what a pull transfers.
func CompressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

// InputKey hashes what the images depend on besides the source tree (the
// commit stands for it; a modified tree is never reused): the
// configuration, the go version and the CA bundle.
func (c Config) InputKey(goVersion string, caCerts []byte) string {
	h := sha256.New()
	comps, _ := json.Marshal(c.Components)
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%d\x00%s\x00%s\x00", c.Registry, c.Tag, c.Meta.Version, c.Meta.Commit,
		c.LDFlags, c.Meta.Created.Unix(), goVersion, comps)
	h.Write(caCerts)
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// ReadSummary reads DIR/images.json: a regular file of at most
// MaxSummaryBytes whose binaries and archives are paths inside DIR.
// Refusals of the file wrap ErrSummary.
func ReadSummary(dir string) (*Summary, error) {
	b, err := boundedio.ReadFile(context.Background(), filepath.Join(dir, "images.json"), MaxSummaryBytes)
	if errors.Is(err, boundedio.ErrTooLarge) || errors.Is(err, boundedio.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %w", ErrSummary, err)
	}
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSummary, err)
	}
	for _, cs := range s.Components {
		for _, p := range cs.Platforms {
			for _, f := range []string{p.Binary, p.Archive} {
				if !filepath.IsLocal(f) {
					return nil, fmt.Errorf("%w: %s %s: %q is not a path inside %s", ErrSummary, cs.Name, p.Platform, f, dir)
				}
			}
		}
	}
	return &s, nil
}

// Build builds every component for every platform and writes the outputs
// the package doc lists. It returns the summary and whether it reused an
// earlier build of the same inputs (clean tree, same InputKey, outputs
// present) instead of building.
func Build(ctx context.Context, c Config) (*Summary, bool, error) {
	if err := c.Validate(); err != nil {
		return nil, false, err
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	goCmd := c.GoCmd
	if goCmd == "" {
		goCmd = "go"
	}
	ca, err := os.ReadFile(c.CACerts)
	if err != nil {
		return nil, false, fmt.Errorf("read CA bundle: %w", err)
	}
	goVersion, err := output(ctx, c.ModuleDir, nil, goCmd, "env", "GOVERSION")
	if err != nil {
		return nil, false, fmt.Errorf("go env GOVERSION: %w", err)
	}
	key := c.InputKey(strings.TrimSpace(goVersion), ca)
	dirty := c.Meta.Commit == "" || strings.HasSuffix(c.Meta.Version, "-dirty")
	if old, err := ReadSummary(c.Dir); err == nil && !c.Force && !dirty && old.Key == key && outputsExist(c.Dir, old) {
		log.Info("images up to date", "dir", c.Dir, "key", key)
		return old, true, nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, false, err
	}
	// A stale summary must not survive a failed build.
	if err := os.Remove(filepath.Join(c.Dir, "images.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if err := buildBinaries(ctx, c, goCmd, log); err != nil {
		return nil, false, err
	}
	base, err := baseLayer(ca, c.Meta.Created)
	if err != nil {
		return nil, false, err
	}

	ociDir := filepath.Join(c.Dir, "oci")
	if err := os.RemoveAll(ociDir); err != nil {
		return nil, false, err
	}
	lp, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return nil, false, fmt.Errorf("oci layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "archives"), 0o755); err != nil {
		return nil, false, err
	}
	sum := &Summary{Key: key, Version: c.Meta.Version, Commit: c.Meta.Commit, Created: c.Meta.Created.UTC()}
	for _, comp := range c.Components {
		cs, err := buildComponent(ctx, c, comp, base, lp, log)
		if err != nil {
			return nil, false, err
		}
		sum.Components = append(sum.Components, *cs)
	}
	if err := writeList(c, sum); err != nil {
		return nil, false, err
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return nil, false, err
	}
	if err := atomicfile.Write(filepath.Join(c.Dir, "images.json"), append(b, '\n'), 0o644); err != nil {
		return nil, false, err
	}
	return sum, false, nil
}

func baseLayer(ca []byte, created time.Time) (v1.Layer, error) {
	entries, err := BaseEntries(ca)
	if err != nil {
		return nil, err
	}
	return NewLayer(entries, created)
}

func outputsExist(dir string, s *Summary) bool {
	if _, err := os.Stat(filepath.Join(dir, "oci", "index.json")); err != nil {
		return false
	}
	for _, cs := range s.Components {
		for _, p := range cs.Platforms {
			for _, f := range []string{p.Binary, p.Archive} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					return false
				}
			}
		}
	}
	return true
}

// binaryPath is where the binary of comp for p is built, relative to Dir.
func binaryPath(comp Component, p v1.Platform) string {
	return filepath.Join("bin", platformDir(p), comp.Name)
}

// buildBinaries runs one go build per platform, tags and GOEXPERIMENT,
// with every package of that group (the go command links them in
// parallel and shares the compiled packages).
func buildBinaries(ctx context.Context, c Config, goCmd string, log *slog.Logger) error {
	type group struct {
		p          v1.Platform
		tags, exp  string
		pkgs, outs []string
	}
	var groups []*group
	for _, comp := range c.Components {
		for _, p := range comp.Platforms {
			exp := comp.GoExperiment[p.Architecture]
			i := slices.IndexFunc(groups, func(g *group) bool { return g.p.Equals(p) && g.tags == comp.Tags && g.exp == exp })
			if i < 0 {
				groups = append(groups, &group{p: p, tags: comp.Tags, exp: exp})
				i = len(groups) - 1
			}
			groups[i].pkgs = append(groups[i].pkgs, comp.Package)
			groups[i].outs = append(groups[i].outs, comp.Name)
		}
	}
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		dir := filepath.Join(c.Dir, "bin", platformDir(g.p))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		args := []string{"build", "-trimpath", "-ldflags", c.LDFlags, "-o", abs + string(filepath.Separator)}
		if g.tags != "" {
			args = append(args, "-tags", g.tags)
		}
		args = append(args, g.pkgs...)
		env := []string{"CGO_ENABLED=0", "GOOS=" + g.p.OS, "GOARCH=" + g.p.Architecture, "GOEXPERIMENT=" + g.exp,
			// fixed CPU levels: the environment must not change the digests
			"GOAMD64=v1", "GOARM64=v8.0"}
		if g.p.Architecture == "arm" {
			env = append(env, "GOARM="+strings.TrimPrefix(g.p.Variant, "v"))
		}
		start := time.Now()
		log.Info("go build", "platform", PlatformString(g.p), "tags", g.tags, "goexperiment", g.exp, "programs", strings.Join(g.outs, " "))
		if _, err := output(ctx, c.ModuleDir, env, goCmd, args...); err != nil {
			return fmt.Errorf("%w: %s for %s: %v", ErrGoBuild, strings.Join(g.outs, " "), PlatformString(g.p), err)
		}
		log.Info("built", "platform", PlatformString(g.p), "programs", strings.Join(g.outs, " "), "took", time.Since(start).Round(time.Second))
	}
	return nil
}

// output runs a command in dir with env added to the process's and
// returns its standard output; the error carries its standard error.
func output(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// buildComponent makes comp's images from its binaries, appends its index
// to the layout and writes one docker-archive per platform.
func buildComponent(ctx context.Context, c Config, comp Component, base v1.Layer, lp layout.Path, log *slog.Logger) (*ComponentSummary, error) {
	ref := c.ImageRef(comp.Name)
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: image name %q: %v", ErrConfig, ref, err)
	}
	cs := &ComponentSummary{Name: comp.Name, Image: ref, User: comp.User}
	var specs []ImageSpec
	var imgs []v1.Image
	for _, p := range comp.Platforms {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		binRel := binaryPath(comp, p)
		bin, err := os.ReadFile(filepath.Join(c.Dir, binRel))
		if err != nil {
			return nil, fmt.Errorf("binary of %s: %w", comp.Name, err)
		}
		spec := ImageSpec{Name: comp.Name, Description: comp.Description, User: comp.User, Platform: p}
		img, err := NewImage(spec, base, bin, c.Meta)
		if err != nil {
			return nil, err
		}
		d, err := img.Digest()
		if err != nil {
			return nil, err
		}
		size, err := CompressedSize(img)
		if err != nil {
			return nil, err
		}
		archRel := filepath.Join("archives", comp.Name+"-"+strings.ReplaceAll(PlatformString(p), "/", "-")+".tar")
		if err := writeArchive(filepath.Join(c.Dir, archRel), tag, img); err != nil {
			return nil, fmt.Errorf("archive of %s %s: %w", comp.Name, PlatformString(p), err)
		}
		log.Info("image", "name", ref, "platform", PlatformString(p), "digest", d.String(), "compressed", size)
		cs.Platforms = append(cs.Platforms, PlatformSummary{Platform: PlatformString(p), Digest: d.String(),
			CompressedSize: size, BinarySize: int64(len(bin)), Binary: binRel, Archive: archRel})
		specs, imgs = append(specs, spec), append(imgs, img)
	}
	idx, err := NewIndex(specs, imgs, c.Meta)
	if err != nil {
		return nil, err
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	cs.Digest = d.String()
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationRefName: ref, AnnotationImageName: ref})); err != nil {
		return nil, fmt.Errorf("oci layout: %s: %w", comp.Name, err)
	}
	return cs, nil
}

// writeArchive writes img as a docker-archive named tag, through a
// temporary file.
func writeArchive(path string, tag name.Tag, img v1.Image) error {
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// writeList writes images.txt: REGISTRY/NAME@DIGEST per component.
func writeList(c Config, s *Summary) error {
	var b strings.Builder
	for _, cs := range s.Components {
		fmt.Fprintf(&b, "%s/%s@%s\n", c.Registry, cs.Name, cs.Digest)
	}
	return atomicfile.Write(filepath.Join(c.Dir, "images.txt"), []byte(b.String()), 0o644)
}

// WriteTable prints the summary: one line per platform with the image
// digest and compressed size, and each component's index digest.
func WriteTable(w io.Writer, s *Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "images of %s (commit %s, created %s)\n", s.Version, s.Commit, s.Created.Format(time.RFC3339))
	fmt.Fprintf(&b, "%-17s %-13s %-71s %10s %10s\n", "IMAGE", "PLATFORM", "DIGEST", "COMPRESSED", "BINARY")
	for _, cs := range s.Components {
		for _, p := range cs.Platforms {
			fmt.Fprintf(&b, "%-17s %-13s %-71s %10s %10s\n", cs.Name, p.Platform, p.Digest, MB(p.CompressedSize), MB(p.BinarySize))
		}
		fmt.Fprintf(&b, "%-17s %-13s %-71s\n", cs.Name, "index", cs.Digest)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MB formats n bytes in megabytes (10^6), one decimal.
func MB(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
