package flclient

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/federated"
)

// report asks the report loop to send a SiteReport soon (non-blocking).
func (c *Client) report() {
	select {
	case c.nudge <- struct{}{}:
	default:
	}
}

// reportLoop publishes the site's SiteReport every ReportInterval and
// when nudged. Reports are fire-and-forget on core NATS: a lost one is
// replaced by the next, so there is nothing to retry.
func (c *Client) reportLoop(ctx context.Context, nc *nats.Conn) {
	if c.cfg.ReportInterval == 0 {
		return
	}
	t := time.NewTicker(c.cfg.ReportInterval)
	defer t.Stop()
	for {
		if err := c.sendReport(nc); err != nil {
			c.log.Debug("site report not sent", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.nudge:
		}
	}
}

func (c *Client) sendReport(nc *nats.Conn) error {
	st, err := c.Status()
	if err != nil {
		return err
	}
	r := federated.SiteReport{V: federated.ProtocolVersion, Site: c.cfg.Site, Seq: st.Seq, Outbox: st.Outbox,
		DroppedFull: uint64(max(st.Counters.DroppedFull, 0)), LastRound: st.Round, Sent: time.Now().UTC()}
	if st.Installed != nil {
		r.ModelVersion, r.Int8Model = st.Installed.Version, st.Installed.Int8
	}
	b, err := federated.Marshal(r)
	if err != nil {
		return err
	}
	return nc.Publish(federated.StatusSubjectPrefix+c.cfg.Site, b)
}
