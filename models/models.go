// Package models embeds the trained policies the repository ships, so
// `edgectl sim --policies learned` works from any directory:
//
//	default      openb traces (GPU fragmentation), configs/train-default.yaml
//	edge         the built-in retail-fleet scenario, configs/train-edge.yaml
//	edge-carbon  the same with a carbon term in the reward, configs/train-edge-carbon.yaml
//	edge-loaded  the training families of loaded edge fleets, reading the
//	             agent's telemetry, configs/train-edge-loaded.yaml
//	edge-sage    the same recipe reading the service embeddings'
//	             dep_affinity instead of the one-hop dependency features,
//	             configs/train-edge-sage.yaml
//
// Each is reproducible bit for bit from its recorded config with
// `make train` (linux/amd64, the Go version in go.mod).
package models

import (
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edgesched/edgesched/policy/nn"
)

//go:embed *.esm
var files embed.FS

// ErrUnknown is returned for a name that is not a shipped model.
var ErrUnknown = errors.New("models: no such shipped model")

// Names lists the shipped models.
func Names() []string {
	entries, _ := files.ReadDir(".")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".esm"))
	}
	slices.Sort(out)
	return out
}

// Load decodes a shipped model by name.
func Load(name string) (*nn.Model, error) {
	b, err := files.ReadFile(name + ".esm")
	if err != nil {
		return nil, fmt.Errorf("%w: %q (shipped: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	d, err := nn.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("models/%s.esm: %w", name, err)
	}
	return d.Model, nil
}

// Default decodes the shipped default model.
func Default() (*nn.Model, error) { return Load("default") }
