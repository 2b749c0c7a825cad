package imagecmd

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/ociimage"
)

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", "x"}, "--source-date-epoch is required"},
		{[]string{"--source-date-epoch", "yesterday"}, "not a non-negative number"},
		{[]string{"--source-date-epoch", "1", "--only", "edge-agnet"}, `did you mean edge-agent`},
		{[]string{"--source-date-epoch", "1", "--tag", "a:b"}, "not a valid image tag"},
		{[]string{"--source-date-epoch", "1", "extra"}, "unexpected arguments"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), tc.args, &stdout, &stderr); code != cli.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), cli.ExitUsage, tc.want)
		}
	}
}

func TestHelmValues(t *testing.T) {
	sum := &ociimage.Summary{Components: []ociimage.ComponentSummary{
		{Name: "edge-agent", Image: "registry.lan:5000/edgesched/edge-agent:abc", Digest: "sha256:" + strings.Repeat("1", 64)},
		{Name: "edge-coordinator", Image: "ghcr.io/edgesched/edge-coordinator:abc", Digest: "sha256:" + strings.Repeat("2", 64)},
		{Name: "edgectl", Image: "ghcr.io/edgesched/edgectl:abc", Digest: "sha256:" + strings.Repeat("3", 64)},
		// not built for arm/v7: their pods must stay off such nodes
		{Name: "edge-scheduler", Image: "ghcr.io/edgesched/edge-scheduler:abc", Digest: "sha256:" + strings.Repeat("4", 64),
			Platforms: []ociimage.PlatformSummary{{Platform: "linux/arm64"}, {Platform: "linux/amd64"}}},
		{Name: "nats-server", Image: "ghcr.io/edgesched/nats-server:abc", Digest: "sha256:" + strings.Repeat("5", 64),
			Platforms: []ociimage.PlatformSummary{{Platform: "linux/amd64"}, {Platform: "linux/arm64"}}},
	}}
	for _, byDigest := range []bool{true, false} {
		b, err := HelmValues(sum, byDigest)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Agent struct{ Image map[string]string } `yaml:"agent"`
			Cloud struct {
				Coordinator struct{ Image map[string]string } `yaml:"coordinator"`
			} `yaml:"cloud"`
			Edgectl   any `yaml:"edgectl"`
			Scheduler struct {
				Architectures []string `yaml:"architectures"`
			} `yaml:"scheduler"`
			NATS struct {
				Leaf struct {
					Architectures []string `yaml:"architectures"`
				} `yaml:"leaf"`
			} `yaml:"nats"`
		}
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		a, c := v.Agent.Image, v.Cloud.Coordinator.Image
		if a["registry"] != "registry.lan:5000" || a["repository"] != "edgesched/edge-agent" || a["tag"] != "abc" ||
			c["registry"] != "ghcr.io" || c["repository"] != "edgesched/edge-coordinator" || v.Edgectl != nil {
			t.Errorf("byDigest %v: values\n%s", byDigest, b)
		}
		if got := a["digest"]; (got == sum.Components[0].Digest) != byDigest {
			t.Errorf("byDigest %v: agent digest %q", byDigest, got)
		}
		want := []string{"amd64", "arm64"}
		if !slices.Equal(v.Scheduler.Architectures, want) || !slices.Equal(v.NATS.Leaf.Architectures, want) {
			t.Errorf("byDigest %v: scheduler on %v, leaf on %v; want both on %v (their images' platforms)", byDigest, v.Scheduler.Architectures, v.NATS.Leaf.Architectures, want)
		}
	}
}
