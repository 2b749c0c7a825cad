package site

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/kube"
	"github.com/edgesched/edgesched/kubefmt"
)

// The site ledger: how the agents of one site share the federated
// client's update sequence and its unsent updates (docs/site-leader.md).
//
//   - ConfigMap LedgerName(site) holds, under key ledger.json, the highest
//     sequence any agent of the site reserved and the highest round any
//     queued an update for. Every change is a compare-and-swap on its
//     resourceVersion, so two agents (even two that both believe they
//     lead, while a lease expires) never get the same sequence.
//   - ConfigMap HandoverName(site, seq) holds one signed update (binaryData
//     key "update") from before the writing agent commits it to its bbolt
//     outbox until the stream stored it (or the outbox dropped it). A new
//     leader adopts every one of them into its own outbox before it
//     publishes anything, so the sequences reach the coordinator in order
//     and none is lost when its writer died.
const (
	ledgerKey     = "ledger.json"
	handoverKey   = "update"
	componentFL   = "fl-handover"
	annotationSeq = "edgesched.io/seq"
	// MaxHandoverBytes bounds an update a site can hand over (a ConfigMap
	// holds at most 1 MiB): an int8 update of about 900,000 parameters.
	MaxHandoverBytes = 900 << 10
	// MaxLedgerBytes bounds the ledger's JSON (key ledger.json), refused
	// before it is decoded. The Ledger writes at most about 450 bytes (a
	// 63-byte site, a node name of up to 253 bytes, two 20-digit
	// numbers); the cap leaves room for a hand edit, indented or not, and
	// does not rely on the API server's 1 MiB limit on a ConfigMap.
	MaxLedgerBytes = 16 << 10
)

// LedgerName is the site ledger ConfigMap.
func LedgerName(site string) string { return "edgesched-site-" + site + "-ledger" }

// HandoverName is the ConfigMap holding the site's unsent update seq.
func HandoverName(site string, seq uint64) string {
	return "edgesched-site-" + site + "-update-" + strconv.FormatUint(seq, 10)
}

// LedgerState is the ledger's content.
type LedgerState struct {
	V    int    `json:"v"`
	Site string `json:"site"`
	// Seq is the highest update sequence any agent of the site reserved.
	Seq uint64 `json:"seq"`
	// Round is the highest round any agent queued an update for.
	Round   uint64    `json:"round"`
	Updated time.Time `json:"updated"`
	By      string    `json:"by"`
}

// ErrLedger wraps a ledger that cannot be read.
var ErrLedger = errors.New("site: bad ledger")

// LedgerConfig configures a Ledger.
type LedgerConfig struct {
	// Client reads and writes the ledger and handover ConfigMaps:
	// kube.NewForConfig's clients, or a clientset adapted by
	// kube/kubeclientset. Required.
	Client    kube.Interface
	Namespace string
	Site      string
	// Identity is this agent's name (written as who changed what).
	Identity string
	Logger   *slog.Logger
}

// Ledger is the site's shared update sequence and handover; it implements
// flclient.Sequencer. Safe for concurrent use.
type Ledger struct {
	cfg LedgerConfig
	log *slog.Logger

	mu   sync.Mutex
	made map[uint64]bool // the handovers this Ledger made (AdoptLate leaves them; one uint64 an update, for the process's life)
}

var _ flclient.Sequencer = (*Ledger)(nil)

// NewLedger checks cfg.
func NewLedger(cfg LedgerConfig) (*Ledger, error) {
	switch {
	case !federated.ValidSite(cfg.Site):
		return nil, fmt.Errorf("%w: ledger Site %q is not a DNS label", ErrConfig, cfg.Site)
	case len(validation.IsDNS1123Label(cfg.Namespace)) > 0:
		return nil, fmt.Errorf("%w: ledger Namespace %q is not a DNS label", ErrConfig, cfg.Namespace)
	case cfg.Identity == "":
		return nil, fmt.Errorf("%w: ledger Identity (the node name) required", ErrConfig)
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: ledger Client required", ErrConfig)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Ledger{cfg: cfg, log: log.With("site", cfg.Site), made: map[uint64]bool{}}, nil
}

// markMade records that this Ledger makes the handover of seq. It stays
// marked after Done removed it: a listing taken before the removal must
// not look like another agent's late handover.
func (l *Ledger) markMade(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.made[seq] = true
}

func (l *Ledger) isMade(seq uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.made[seq]
}

func (l *Ledger) cms() kube.ConfigMapInterface {
	return l.cfg.Client.ConfigMaps(l.cfg.Namespace)
}

// State reads the ledger (zero state when it does not exist yet).
func (l *Ledger) State(ctx context.Context) (LedgerState, error) {
	_, st, err := l.get(ctx)
	return st, err
}

func (l *Ledger) get(ctx context.Context) (*v1.ConfigMap, LedgerState, error) {
	st := LedgerState{V: 1, Site: l.cfg.Site}
	cm, err := l.cms().Get(ctx, LedgerName(l.cfg.Site), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, st, nil
	}
	if err != nil {
		return nil, st, fmt.Errorf("read the site ledger: %w", err)
	}
	raw, ok := cm.Data[ledgerKey]
	if !ok {
		return nil, st, fmt.Errorf("%w: %s/%s has no %s", ErrLedger, cm.Namespace, cm.Name, ledgerKey)
	}
	if len(raw) > MaxLedgerBytes {
		return nil, st, fmt.Errorf("%w: %s/%s: %s is %d bytes (limit %d)", ErrLedger, cm.Namespace, cm.Name, ledgerKey, len(raw), MaxLedgerBytes)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, st, fmt.Errorf("%w: %s/%s: %v", ErrLedger, cm.Namespace, cm.Name, err)
	}
	// dec.More reports false for a trailing '}' or ']', so ask for the
	// next token: only the end of input (after white space) is clean.
	if _, err := dec.Token(); err != io.EOF {
		return nil, st, fmt.Errorf("%w: %s/%s: trailing data after the %s object", ErrLedger, cm.Namespace, cm.Name, ledgerKey)
	}
	if st.V != 1 || st.Site != l.cfg.Site {
		return nil, st, fmt.Errorf("%w: %s/%s is version %d of site %q (want 1, %q)", ErrLedger, cm.Namespace, cm.Name, st.V, st.Site, l.cfg.Site)
	}
	return cm, st, nil
}

// ledgerRetry paces retries after a conflicting write: one leader
// rarely conflicts with anyone, but agents racing for the ledger (a
// lease changing hands) must all get through: up to 40 tries over about
// 20 s, jittered.
var ledgerRetry = wait.Backoff{Steps: 40, Duration: 5 * time.Millisecond, Factor: 1.5, Jitter: 1, Cap: time.Second}

// change applies f to the ledger with optimistic concurrency (creating it
// when absent), retrying on conflicts; f may return an error to abort.
func (l *Ledger) change(ctx context.Context, f func(*LedgerState) error) (LedgerState, error) {
	var out LedgerState
	err := retry.RetryOnConflict(ledgerRetry, func() error {
		cm, st, err := l.get(ctx)
		if err != nil {
			return err
		}
		if err := f(&st); err != nil {
			return err
		}
		st.Updated, st.By = time.Now().UTC().Truncate(time.Second), l.cfg.Identity
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if cm == nil {
			cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LedgerName(l.cfg.Site), Namespace: l.cfg.Namespace,
				Labels: map[string]string{kubefmt.LabelSite: l.cfg.Site, kubefmt.LabelComponent: "fl-ledger"}}, Data: map[string]string{ledgerKey: string(raw)}}
			_, err = l.cms().Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(v1.Resource("configmaps"), cm.Name, err) // someone created it first: read it again
			}
		} else {
			cm = cm.DeepCopy()
			cm.Data[ledgerKey] = string(raw)
			_, err = l.cms().Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			out = st
		}
		return err
	})
	return out, err
}

// Reserve implements flclient.Sequencer: the next sequence above both the
// ledger's and after; flclient.ErrSequenceExhausted (the ledger left as it
// was) when that would be above federated.MaxSeq.
func (l *Ledger) Reserve(ctx context.Context, round, after uint64, again bool) (uint64, error) {
	st, err := l.change(ctx, func(st *LedgerState) error {
		if !again && round <= st.Round {
			return flclient.ErrRoundQueued
		}
		top := max(st.Seq, after)
		if top >= federated.MaxSeq {
			// the coordinator refuses a sequence above MaxSeq, and +1 at
			// the top of uint64 would wrap to 0, below everything it has
			// judged: every later update would be refused as a replay
			return fmt.Errorf("site %s: %w (ledger %d, agent's newest %d)", l.cfg.Site, flclient.ErrSequenceExhausted, st.Seq, after)
		}
		st.Seq = top + 1
		return nil
	})
	if err != nil {
		return 0, err
	}
	return st.Seq, nil
}

// Stage implements flclient.Sequencer: the update goes into its handover
// ConfigMap, then the ledger records its round. Should the agent stop
// between the two, the update is still delivered by the next leader, and
// a sync round may get a second update from the site, which the
// coordinator refuses as a replay (no harm done).
func (l *Ledger) Stage(ctx context.Context, seq, round uint64, again bool, msg []byte) error {
	st, err := l.State(ctx)
	if err != nil {
		return err
	}
	if !again && round <= st.Round {
		return flclient.ErrRoundQueued
	}
	l.markMade(seq) // (before it exists: AdoptLate must never take it)
	if err := l.handOver(ctx, seq, msg); err != nil {
		return err
	}
	_, err = l.change(ctx, func(st *LedgerState) error {
		if !again && round <= st.Round {
			return flclient.ErrRoundQueued
		}
		st.Round, st.Seq = max(st.Round, round), max(st.Seq, seq)
		return nil
	})
	if err != nil { // not queued: the handover goes too (a left-over one would be sent by the next term)
		if derr := l.Done(ctx, seq); derr != nil {
			l.log.Warn("handover of a discarded update not removed", "seq", seq, "err", derr)
		}
	}
	return err
}

// handOver creates the handover ConfigMap of update seq (already there
// with the same bytes is fine).
func (l *Ledger) handOver(ctx context.Context, seq uint64, msg []byte) error {
	if len(msg) == 0 || len(msg) > MaxHandoverBytes {
		return fmt.Errorf("update %d is %d bytes: a handover holds 1 to %d", seq, len(msg), MaxHandoverBytes)
	}
	name := HandoverName(l.cfg.Site, seq)
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.cfg.Namespace,
		Labels:      map[string]string{kubefmt.LabelSite: l.cfg.Site, kubefmt.LabelComponent: componentFL},
		Annotations: map[string]string{annotationSeq: strconv.FormatUint(seq, 10), kubefmt.AnnotationAgent: l.cfg.Identity}},
		BinaryData: map[string][]byte{handoverKey: msg}}
	_, err := l.cms().Create(ctx, cm, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: %w", name, err)
	}
	old, gerr := l.cms().Get(ctx, name, metav1.GetOptions{})
	if gerr != nil {
		return fmt.Errorf("read %s: %w", name, gerr)
	}
	if !bytes.Equal(old.BinaryData[handoverKey], msg) {
		return fmt.Errorf("%s exists with another update (sequence %d used twice)", name, seq)
	}
	return nil
}

// Done implements flclient.Sequencer: the handover ConfigMap goes.
func (l *Ledger) Done(ctx context.Context, seq uint64) error {
	err := l.cms().Delete(ctx, HandoverName(l.cfg.Site, seq), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete handover %d: %w", seq, err)
	}
	return nil
}

// Handover is an unsent update of the site.
type Handover struct {
	Seq uint64
	By  string
	Msg []byte
}

// Handovers lists the site's unsent updates, oldest first.
func (l *Ledger) Handovers(ctx context.Context) ([]Handover, error) {
	sel := labels.SelectorFromSet(labels.Set{kubefmt.LabelSite: l.cfg.Site, kubefmt.LabelComponent: componentFL}).String()
	list, err := l.cms().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list handovers: %w", err)
	}
	var out []Handover
	for i := range list.Items {
		cm := &list.Items[i]
		seq, err := strconv.ParseUint(cm.Annotations[annotationSeq], 10, 64)
		if err != nil || cm.Name != HandoverName(l.cfg.Site, seq) {
			l.log.Warn("not a handover of this site: ignored", "configmap", cm.Name)
			continue
		}
		out = append(out, Handover{Seq: seq, By: cm.Annotations[kubefmt.AnnotationAgent], Msg: cm.BinaryData[handoverKey]})
	}
	slices.SortFunc(out, func(a, b Handover) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Outbox is the part of flclient.Client the reconciliation uses.
type Outbox interface {
	Outbox() ([]uint64, error)
	OutboxEntry(seq uint64) ([]byte, error)
	Adopt(ctx context.Context, seq uint64, msg []byte) error
	Forget(seqs ...uint64) error
}

var _ Outbox = (*flclient.Client)(nil)

// Reconciled says what Reconcile did.
type Reconciled struct {
	// Adopted: other agents' unsent updates now in this outbox.
	Adopted []uint64
	// Forgotten: entries of this outbox another agent delivered.
	Forgotten []uint64
	// Refused: handovers that are not this site's signed updates (left
	// in place, logged).
	Refused []uint64
	// Full: handovers the outbox had no room for (flclient.ErrOutboxFull),
	// or dropped again for a later handover's room (drop-oldest): counted,
	// logged and reported Done by the client, as any update its full
	// outbox drops.
	Full []uint64
	// HandedOver: entries of this outbox above the ledger's sequence (an
	// outbox from before the site had a ledger), now handed over.
	HandedOver []uint64
	// Ledger is the ledger as read.
	Ledger LedgerState
	// Listed: every handover there was (Reconcile), whatever became of it.
	Listed []uint64
}

// keepQueued moves from Adopted to Full the handovers no longer in ob: an
// outbox that drops its oldest entry for room (drop-oldest) may drop one
// adopted earlier in the same Reconcile (and the client counted, logged
// and reported it Done).
func (r *Reconciled) keepQueued(ob Outbox) error {
	if len(r.Adopted) == 0 {
		return nil
	}
	now, err := ob.Outbox()
	if err != nil {
		return fmt.Errorf("read the outbox: %w", err)
	}
	queued := make(map[uint64]bool, len(now))
	for _, s := range now {
		queued[s] = true
	}
	kept := r.Adopted[:0]
	for _, s := range r.Adopted {
		if queued[s] {
			kept = append(kept, s)
		} else {
			r.Full = append(r.Full, s)
		}
	}
	r.Adopted = kept
	slices.Sort(r.Full)
	return nil
}

// adopt puts into ob the handovers of hs that want selects, recording
// each in r (Adopted, Refused or Full), then moves to Full the adopted
// ones ob no longer holds.
func (l *Ledger) adopt(ctx context.Context, ob Outbox, hs []Handover, want func(Handover) bool, r *Reconciled) error {
	for _, h := range hs {
		if !want(h) {
			continue
		}
		switch err := ob.Adopt(ctx, h.Seq, h.Msg); {
		case errors.Is(err, flclient.ErrAdopt):
			r.Refused = append(r.Refused, h.Seq)
			l.log.Error("handover refused: not a signed update of this site", "seq", h.Seq, "by", h.By, "err", err)
		case errors.Is(err, flclient.ErrOutboxFull):
			r.Full = append(r.Full, h.Seq)
		case err != nil:
			return err
		default:
			r.Adopted = append(r.Adopted, h.Seq)
		}
	}
	return r.keepQueued(ob)
}

// LateScan is what AdoptLate carries from one call to the next within a
// term. Owned by one goroutine.
type LateScan struct {
	seen    map[uint64]bool // handovers there were at Reconcile, and adopted or refused since
	version string          // the ledger ConfigMap's resourceVersion at the last listing
	calls   int
}

// lateScanEvery: AdoptLate lists the handovers at least every this many
// calls even when the ledger did not change (a handover whose agent
// stopped before its Stage wrote the ledger changes nothing).
const lateScanEvery = 10

// NewLateScan starts a term's scans after its Reconcile, r.
func NewLateScan(r Reconciled) *LateScan {
	s := &LateScan{seen: map[uint64]bool{}}
	s.note(r)
	return s
}

func (s *LateScan) note(r Reconciled) {
	for _, l := range [][]uint64{r.Listed, r.Adopted, r.Refused, r.Full} {
		for _, q := range l {
			s.seen[q] = true
		}
	}
}

// AdoptLate adopts, during a term, the handovers another agent made
// after the term's Reconcile: an old leader that had not yet seen its
// term end and staged an update left it where no leader would look until
// the next change of leader. The handovers there were at Reconcile (one
// of them delivered keeps its handover until the client's Done removes
// it), the ones adopted or refused since, the ones this Ledger made (its
// own, staged before their outbox entry exists) and the ones in ob are
// left alone. It lists the handovers only when the ledger changed since
// the last listing (a Stage writes it after its handover) or every
// lateScanEvery calls, so a quiet site costs one small read most calls.
func (l *Ledger) AdoptLate(ctx context.Context, ob Outbox, s *LateScan) (Reconciled, error) {
	var r Reconciled
	cm, _, err := l.get(ctx)
	if err != nil {
		return r, err
	}
	version := ""
	if cm != nil {
		version = cm.ResourceVersion
	}
	s.calls++
	if version != "" && version == s.version && s.calls%lateScanEvery != 0 {
		return r, nil
	}
	hs, local, err := l.handoversAndOutbox(ctx, ob)
	if err != nil {
		return r, err
	}
	mine := make(map[uint64]bool, len(local))
	for _, q := range local {
		mine[q] = true
	}
	err = l.adopt(ctx, ob, hs, func(h Handover) bool { return !mine[h.Seq] && !s.seen[h.Seq] && !l.isMade(h.Seq) }, &r)
	s.note(r)
	if len(r.Adopted)+len(r.Full)+len(r.Refused) > 0 {
		l.log.Info("handovers made after this term began adopted", "adopted", r.Adopted, "full", r.Full, "refused", r.Refused)
	}
	if err == nil {
		s.version = version
	}
	return r, err
}

// handoversAndOutbox lists the site's handovers and ob's entries.
func (l *Ledger) handoversAndOutbox(ctx context.Context, ob Outbox) ([]Handover, []uint64, error) {
	hs, err := l.Handovers(ctx)
	if err != nil {
		return nil, nil, err
	}
	local, err := ob.Outbox()
	if err != nil {
		return nil, nil, fmt.Errorf("read the outbox: %w", err)
	}
	return hs, local, nil
}

// Reconcile makes this agent's outbox the site's before its client
// publishes as leader: it adopts every handover it does not hold (so
// they go out oldest first, before any newer update of its own), and
// drops the entries whose handover is gone, because another agent's
// client delivered (or dropped) them while this one was not leading (a
// handover is created before its entry is committed to an outbox and
// removed only after the entry left it, so an entry at or below the
// ledger's sequence without one has left the site's outboxes); it drops
// them first, so they take no room from the adopted ones (which count
// against the outbox's limit: a handover the full outbox has no room for
// is listed in Full). Entries above the ledger's sequence (an outbox from
// before the site had a ledger) are handed over and the ledger raised
// above them.
func (l *Ledger) Reconcile(ctx context.Context, ob Outbox) (Reconciled, error) {
	var r Reconciled
	st, err := l.State(ctx)
	if err != nil {
		return r, err
	}
	hs, local, err := l.handoversAndOutbox(ctx, ob)
	if err != nil {
		return r, err
	}
	held := map[uint64]bool{}
	for _, h := range hs {
		held[h.Seq] = true
		r.Listed = append(r.Listed, h.Seq)
	}
	mine := map[uint64]bool{}
	var legacy []uint64
	for _, s := range local {
		mine[s] = true
		switch {
		case held[s]:
		case s <= st.Seq:
			r.Forgotten = append(r.Forgotten, s)
		default:
			legacy = append(legacy, s)
		}
	}
	if err := ob.Forget(r.Forgotten...); err != nil {
		return r, err
	}
	if err := l.adopt(ctx, ob, hs, func(h Handover) bool { return !mine[h.Seq] }, &r); err != nil {
		return r, err
	}
	for _, s := range legacy {
		msg, err := ob.OutboxEntry(s)
		if err != nil {
			return r, fmt.Errorf("read outbox entry %d: %w", s, err)
		}
		if msg != nil {
			l.markMade(s)
			if err := l.handOver(ctx, s, msg); err != nil {
				return r, err
			}
		}
		// (an entry dropped for an adopted update's room used its
		// sequence too: no agent may reserve it again)
		if st, err = l.change(ctx, func(st *LedgerState) error { st.Seq = max(st.Seq, s); return nil }); err != nil {
			return r, err
		}
		if msg != nil {
			r.HandedOver = append(r.HandedOver, s)
		}
	}
	r.Ledger = st
	if len(r.Adopted)+len(r.Forgotten)+len(r.HandedOver)+len(r.Full) > 0 {
		l.log.Info("outbox reconciled with the site", "adopted", r.Adopted, "forgotten", r.Forgotten, "handed_over", r.HandedOver, "full", r.Full, "ledger_seq", st.Seq)
	}
	return r, nil
}
