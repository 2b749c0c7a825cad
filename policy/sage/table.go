package sage

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/edgesched/edgesched/kubefmt"
)

// FromDependencies is the graph of a published dependency graph: a
// service per name an edge gives, replicas, requests and placement
// unknown (the site leader knows only the calls).
func FromDependencies(edges []kubefmt.DependencyEdge) *Graph {
	g := &Graph{}
	seen := map[string]bool{}
	for _, e := range edges {
		for _, n := range []string{e.From, e.To} {
			if !seen[n] {
				seen[n] = true
				g.Services = append(g.Services, Service{Name: n})
			}
		}
		g.Calls = append(g.Calls, Call{From: e.From, To: e.To, Rate: e.CallsPerSecond})
	}
	return g
}

// Quantized is m in the published format (kubefmt.Embeddings) for the
// encoder id, computed at updated, with each service's partners from
// partners (nil: none, and format version 1): every service's embedding quantized to
// int8 or, past kubefmt.MaxEmbeddedServices or MaxEmbeddingsBytes, those
// of the services with the most calls in and out in g (the graph m
// embeds), ties by name.
func (m *Embeddings) Quantized(id string, g *Graph, updated time.Time, partners map[string][]kubefmt.Partner) *kubefmt.Embeddings {
	out := &kubefmt.Embeddings{Version: 1, Encoder: id, Updated: updated, Dim: m.Dim}
	if partners != nil {
		out.Version = kubefmt.EmbeddingsVersion
	}
	all := make([]kubefmt.ServiceEmbedding, len(m.Names))
	size := 0
	for i, n := range m.Names {
		all[i] = kubefmt.QuantizeEmbedding(n, m.Values[i*m.Dim:(i+1)*m.Dim])
		all[i].Partners = partners[n]
		size += entryBytes(&all[i])
	}
	// the header takes under 300 bytes
	const budget = kubefmt.MaxEmbeddingsBytes - 1024
	if len(all) <= kubefmt.MaxEmbeddedServices && size <= budget {
		out.Services = all
		return out
	}
	defer pruneToKept(out)
	load := map[string]float64{}
	for _, c := range g.Calls {
		load[c.From] += c.Rate
		load[c.To] += c.Rate
	}
	slices.SortFunc(all, func(a, b kubefmt.ServiceEmbedding) int {
		return cmp.Or(cmp.Compare(load[b.Name], load[a.Name]), cmp.Compare(a.Name, b.Name))
	})
	size = 0
	for i := range all {
		if len(out.Services) == kubefmt.MaxEmbeddedServices || size+entryBytes(&all[i]) > budget {
			break
		}
		out.Services = append(out.Services, all[i])
		size += entryBytes(&all[i])
	}
	return out
}

// pruneToKept drops the partners that are not among m's services (left
// out by the bounds: a partner is named by its place among them).
func pruneToKept(m *kubefmt.Embeddings) {
	kept := make(map[string]bool, len(m.Services))
	for i := range m.Services {
		kept[m.Services[i].Name] = true
	}
	for i := range m.Services {
		s := &m.Services[i]
		s.Partners = slices.DeleteFunc(slices.Clone(s.Partners), func(p kubefmt.Partner) bool { return !kept[p.Service] })
		if len(s.Partners) == 0 {
			s.Partners = nil
		}
	}
}

// entryBytes is a service's share of the encoding (its object, its
// partners and a comma).
func entryBytes(s *kubefmt.ServiceEmbedding) int {
	b, _ := json.Marshal(s) // strings, a finite float, base64: cannot fail
	return len(b) + kubefmt.PartnersWireBytes(len(s.Partners)) + 1
}
