package coordinator

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves the coordinator's Prometheus metrics (when its
// registry is its own or a Gatherer).
func (c *Coordinator) MetricsHandler() http.Handler {
	if c.metrics.Gatherer == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(c.metrics.Gatherer, promhttp.HandlerOpts{})
}
