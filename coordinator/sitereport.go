package coordinator

import (
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/federated"
)

// onSiteReport keeps the newest SiteReport of each registered site (in
// memory: reports are refreshed every few seconds, so a restart loses
// nothing that matters). A report whose subject and body disagree, or
// from an unregistered site, is dropped and counted as malformed.
func (c *Coordinator) onSiteReport(m *nats.Msg) {
	r, err := federated.DecodeSiteReport(m.Data)
	if err == nil && strings.TrimPrefix(m.Subject, federated.StatusSubjectPrefix) != r.Site {
		err = federated.ErrMessage
	}
	if err == nil {
		if _, ok := c.cfg.Sites.SiteKey(r.Site); !ok {
			err = federated.ErrUnknownSite
		}
	}
	if err != nil {
		c.metrics.Reports.WithLabelValues("refused").Inc()
		c.log.Debug("site report refused", "subject", m.Subject, "err", err)
		return
	}
	c.metrics.Reports.WithLabelValues("ok").Inc()
	c.repMu.Lock()
	defer c.repMu.Unlock()
	if c.reports == nil {
		c.reports = map[string]federated.SiteReport{}
	}
	if old, ok := c.reports[r.Site]; ok && old.Sent.After(r.Sent) {
		return // out of order
	}
	c.reports[r.Site] = *r
}

func (c *Coordinator) siteReport(site string) (federated.SiteReport, bool) {
	c.repMu.Lock()
	defer c.repMu.Unlock()
	r, ok := c.reports[site]
	return r, ok
}
