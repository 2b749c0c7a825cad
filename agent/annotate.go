package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/kubefmt"
)

// Decisions of the limiter (also the reason label of the skip metric and
// of the write log).
const (
	decideFirst     = "first"     // nothing written yet
	decideChanged   = "changed"   // a measure moved beyond the resolution
	decideRefresh   = "refresh"   // unchanged, but the last write is StaleAfter/2 old
	decideUnchanged = "unchanged" // skip: unchanged and recent
	decideTooSoon   = "too-soon"  // skip: less than AnnotateInterval since the last write
)

// limiter decides when a summary is written: at most once per interval;
// skipped when nothing changed beyond the resolution (changed) and the
// last write is younger than refresh; always written once it is that old.
type limiter struct {
	interval, refresh time.Duration

	written   bool
	lastWrite time.Time                // when the last successful write happened
	lastSum   kubefmt.TelemetrySummary // what it wrote
}

// decide returns whether to write s at now, and why.
func (l *limiter) decide(now time.Time, s kubefmt.TelemetrySummary) (bool, string) {
	switch {
	case !l.written:
		return true, decideFirst
	case now.Sub(l.lastWrite) < l.interval:
		return false, decideTooSoon
	case now.Sub(l.lastWrite) >= l.refresh:
		return true, decideRefresh
	case changed(l.lastSum, s):
		return true, decideChanged
	}
	return false, decideUnchanged
}

// wrote records a successful write of s at now.
func (l *limiter) wrote(now time.Time, s kubefmt.TelemetrySummary) {
	l.written, l.lastWrite, l.lastSum = true, now, s
}

// annotationPatch is the JSON merge patch that sets only the telemetry
// annotation.
func annotationPatch(value string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"annotations": map[string]string{kubefmt.AnnotationTelemetry: value},
		},
	})
}

// writeSummary patches the node's annotation with s.
func (a *Agent) writeSummary(ctx context.Context, s kubefmt.TelemetrySummary) error {
	value, err := kubefmt.EncodeTelemetry(s)
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	patch, err := annotationPatch(value)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, max(a.cfg.AnnotateInterval, 5*time.Second))
	defer cancel()
	_, err = a.cfg.Client.Nodes().Patch(ctx, a.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "edge-agent"})
	if err != nil {
		return fmt.Errorf("patch node %s: %w", a.cfg.NodeName, err)
	}
	return nil
}

// annotateOnce considers one write: builds the current summary, asks the
// limiter, and writes it, retrying failures with jittered backoff (each
// retry with a freshly built summary) until one succeeds or ctx ends.
// It returns the decision taken.
func (a *Agent) annotateOnce(ctx context.Context, bo *backoff.Backoff) string {
	for {
		s, ok := a.summary()
		if !ok {
			return "no-summary"
		}
		now := a.cfg.Now()
		write, why := a.lim.decide(now, s)
		if !write {
			a.m.annotationSkips.WithLabelValues(why).Inc()
			return why
		}
		start := time.Now()
		err := a.writeSummary(ctx, s)
		a.m.annotationDuration.Observe(time.Since(start).Seconds())
		if err == nil {
			a.lim.wrote(now, s)
			a.m.annotationWrites.WithLabelValues("ok").Inc()
			a.m.annotationLast.Set(float64(s.Time.UnixNano()) / 1e9)
			if a.writeFailing {
				a.log.Info("node annotation written again", "node", a.cfg.NodeName)
				a.writeFailing = false
			}
			a.log.Debug("node annotation written", "node", a.cfg.NodeName, "reason", why, "cpu", s.CPU, "mem", s.Mem, "load1", s.Load1)
			bo.Reset()
			return why
		}
		if ctx.Err() != nil {
			return "stopped"
		}
		a.m.annotationWrites.WithLabelValues("error").Inc()
		if !a.writeFailing {
			a.log.Warn("node annotation write failed; retrying with backoff", "node", a.cfg.NodeName, "err", err)
			a.writeFailing = true
		} else {
			a.log.Debug("node annotation write failed again", "node", a.cfg.NodeName, "err", err)
		}
		if !bo.Sleep(ctx) {
			return "stopped"
		}
	}
}

// annotateLoop writes the summary: first as soon as one covers
// kubefmt.MinTelemetryWindow, then one consideration per AnnotateInterval (a
// timer set from the last consideration or write, whichever is later, so
// two writes are never closer than the interval). It owns the backoff and
// is the only user of the limiter.
func (a *Agent) annotateLoop(ctx context.Context) error {
	bo := backoff.New(a.cfg.RetryMin, a.cfg.RetryMax, a.seed)
	for { // the first summary: wait for samples
		if _, ok := a.summary(); ok {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.sampled:
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		considered := a.cfg.Now()
		a.annotateOnce(ctx, bo)
		if a.lim.written && a.lim.lastWrite.After(considered) {
			considered = a.lim.lastWrite
		}
		timer.Reset(max(considered.Add(a.cfg.AnnotateInterval).Sub(a.cfg.Now()), 0))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}
