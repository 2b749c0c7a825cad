package site

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
)

const testNS = "edgesched-system"

func newLedger(t *testing.T, client kubernetes.Interface, identity string) *Ledger {
	t.Helper()
	l, err := NewLedger(LedgerConfig{Client: kubeclientset.Wrap(client), Namespace: testNS, Site: "store-1", Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLedgerSequence: two agents' ledgers on one cluster hand out one
// increasing sequence; a reservation is above the agent's own newest; a
// round the site queued is refused before training and at staging; a
// refused stage leaves no handover; Done removes it. (Logic only: the
// plain fake clientset does not check resourceVersions; concurrent
// reservations are TestLedgerReserveRace's, on casClientset, and the e2e
// test's against the real apiserver.)
func TestLedgerSequence(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	a, b := newLedger(t, client, "node-a"), newLedger(t, client, "node-b")
	steps := []struct {
		l            *Ledger
		round, after uint64
		again        bool
		want         uint64
		err          error
	}{
		{a, 1, 0, false, 1, nil},
		{a, 2, 1, false, 2, nil},
		{b, 3, 0, false, 3, nil},  // b's own newest is 0: the ledger's 2 counts
		{b, 4, 9, false, 10, nil}, // b's own newest is 9 (an outbox from before)
		{a, 4, 2, true, 11, nil},  // async: another update for the round
	}
	for i, s := range steps {
		got, err := s.l.Reserve(ctx, s.round, s.after, s.again)
		if !errors.Is(err, s.err) || got != s.want {
			t.Fatalf("step %d: reserve %d, %v; want %d, %v", i, got, err, s.want, s.err)
		}
	}
	// stage round 4 with sequence 10: the handover exists, the round is taken
	if err := b.Stage(ctx, 10, 4, false, []byte("update-10")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reserve(ctx, 4, 11, false); !errors.Is(err, flclient.ErrRoundQueued) {
		t.Fatalf("round 4 again: %v, want ErrRoundQueued", err)
	}
	if err := a.Stage(ctx, 11, 4, false, []byte("update-11")); !errors.Is(err, flclient.ErrRoundQueued) {
		t.Fatalf("staging round 4 again: %v, want ErrRoundQueued", err)
	}
	if err := a.Stage(ctx, 11, 4, true, []byte("update-11")); err != nil { // async: fine
		t.Fatal(err)
	}
	if err := a.Stage(ctx, 10, 5, false, []byte("something else")); err == nil {
		t.Fatal("a second update under sequence 10 was staged")
	}
	hs, err := a.Handovers(ctx)
	if err != nil || len(hs) != 2 || hs[0].Seq != 10 || hs[0].By != "node-b" || string(hs[1].Msg) != "update-11" {
		t.Fatalf("handovers %+v (%v)", hs, err)
	}
	if err := b.Done(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := b.Done(ctx, 10); err != nil { // gone already: fine
		t.Fatal(err)
	}
	st, err := a.State(ctx)
	if err != nil || st.Seq != 11 || st.Round != 4 || st.By != "node-a" {
		t.Fatalf("ledger %+v (%v), want seq 11, round 4, by node-a", st, err)
	}
	// a ledger someone broke is reported, not overwritten
	cm, _ := client.CoreV1().ConfigMaps(testNS).Get(ctx, LedgerName("store-1"), metav1.GetOptions{})
	cm.Data[ledgerKey] = `{"v":1,"site":"store-1","seq":"many"}`
	if _, err := client.CoreV1().ConfigMaps(testNS).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reserve(ctx, 9, 0, false); !errors.Is(err, ErrLedger) {
		t.Fatalf("damaged ledger: %v, want ErrLedger", err)
	}
}

// TestLedgerReserveRace: two agents reserving at once (an old leader
// that has not seen its term end beside the new one) never get the same
// sequence, and the ledger ends at the number of reservations: each
// write is a compare-and-swap that a loser retries. On a fake clientset
// that checks resourceVersions (casClientset); the plain fake lets both
// writers win.
func TestLedgerReserveRace(t *testing.T) {
	ctx := context.Background()
	client := casClientset()
	const per = 25
	got := make([][]uint64, 2)
	var wg sync.WaitGroup
	for i, l := range []*Ledger{newLedger(t, client, "node-a"), newLedger(t, client, "node-b")} {
		wg.Go(func() {
			for range per {
				seq, err := l.Reserve(ctx, 0, 0, true)
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = append(got[i], seq)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(got[0], got[1])
	slices.Sort(all)
	if n := len(slices.Compact(slices.Clone(all))); n != 2*per {
		t.Fatalf("%d distinct sequences of %d reserved: %v", n, 2*per, all)
	}
	for i, seqs := range got {
		if !slices.IsSorted(seqs) {
			t.Errorf("agent %d's sequences not increasing: %v", i, seqs)
		}
	}
	if st, err := newLedger(t, client, "node-c").State(ctx); err != nil || st.Seq != 2*per {
		t.Fatalf("ledger %+v (%v), want seq %d", st, err, 2*per)
	}
}

// TestLedgerState: the ledger's content is one JSON object of this
// site's version 1, white space around it allowed, at most
// MaxLedgerBytes; anything after it (a second object, a stray brace,
// bytes an edit left behind) or anything longer is refused with
// ErrLedger, saying so and naming the ConfigMap, and a reservation on it
// fails without overwriting it.
func TestLedgerState(t *testing.T) {
	ctx := context.Background()
	const good = `{"v":1,"site":"store-1","seq":7,"round":3,"updated":"2026-01-02T03:04:05Z","by":"node-a"}`
	for _, tc := range []struct {
		name string
		raw  string
		want string // "": accepted (seq 7); else the refusal says it
	}{
		{"the ledger", good, ""},
		{"white space around it", " \n\t" + good + "\r\n\n ", ""},
		{"garbage after it", good + "garbage", "trailing data"},
		{"a second object", good + `{"v":1,"site":"store-1","seq":9}`, "trailing data"},
		{"a second object after a newline", good + "\n{}", "trailing data"},
		{"a stray closing brace", good + "}", "trailing data"},
		{"a stray closing bracket", good + " ]", "trailing data"},
		{"a number after it", good + " 0", "trailing data"},
		{"a cut object", good[:len(good)-1], "unexpected EOF"},
		{"an unknown field", `{"v":1,"site":"store-1","seq":7,"extra":1}`, "unknown field"},
		{"another site's", `{"v":1,"site":"store-2","seq":7}`, `site "store-2"`},
		// the cap (MaxLedgerBytes) holds before decoding: white space
		// that would decode is refused one byte over it
		{"at the cap", good + strings.Repeat(" ", MaxLedgerBytes-len(good)), ""},
		{"one byte over the cap", good + strings.Repeat(" ", MaxLedgerBytes+1-len(good)), fmt.Sprintf("ledger.json is %d bytes (limit %d)", MaxLedgerBytes+1, MaxLedgerBytes)},
		{"white space inside it, over the cap", strings.Replace(good, `"v":1`, `"v":1`+strings.Repeat("\n  ", MaxLedgerBytes), 1), "(limit 16384)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LedgerName("store-1"), Namespace: testNS},
				Data: map[string]string{ledgerKey: tc.raw}})
			l := newLedger(t, client, "node-a")
			st, err := l.State(ctx)
			if tc.want == "" {
				if err != nil || st.Seq != 7 || st.Round != 3 || st.By != "node-a" {
					t.Fatalf("ledger %+v, %v; want seq 7, round 3, by node-a", st, err)
				}
				return
			}
			if !errors.Is(err, ErrLedger) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), LedgerName("store-1")) {
				t.Fatalf("ledger %+v, %v; want ErrLedger naming the ConfigMap and saying %q", st, err, tc.want)
			}
			if _, err := l.Reserve(ctx, 9, 0, false); !errors.Is(err, ErrLedger) {
				t.Fatalf("a reservation on a refused ledger: %v, want ErrLedger", err)
			}
			if cm, err := client.CoreV1().ConfigMaps(testNS).Get(ctx, LedgerName("store-1"), metav1.GetOptions{}); err != nil || cm.Data[ledgerKey] != tc.raw {
				t.Fatalf("a refused ledger was changed (%v)", err)
			}
		})
	}
}

// TestLedgerSequenceExhausted: a sequence at federated.MaxSeq or above (a
// ledger someone edited, or an agent's outbox) is refused with
// flclient.ErrSequenceExhausted naming the site, instead of going past
// what the coordinator takes or wrapping to 0, and the ledger is left as
// it was; the last usable sequence, MaxSeq itself, is still handed out.
func TestLedgerSequenceExhausted(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		ledger, after uint64
		want          uint64 // 0: exhausted
	}{
		{"agent's newest at MaxSeq", 0, federated.MaxSeq, 0},
		{"agent's newest at the top of uint64", 0, math.MaxUint64, 0},
		{"ledger at MaxSeq", federated.MaxSeq, 3, 0},
		{"ledger above MaxSeq", federated.MaxSeq + 1, 3, 0},
		{"ledger at the top of uint64", math.MaxUint64, 3, 0},
		{"agent's newest just below MaxSeq", 0, federated.MaxSeq - 1, federated.MaxSeq},
		{"ledger just below MaxSeq", federated.MaxSeq - 1, 3, federated.MaxSeq},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t, fake.NewClientset(), "node-a")
			before, err := l.change(ctx, func(st *LedgerState) error { st.Seq, st.Round = tc.ledger, 1; return nil })
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.Reserve(ctx, 2, tc.after, false)
			after, serr := l.State(ctx)
			if serr != nil {
				t.Fatal(serr)
			}
			if tc.want != 0 {
				if err != nil || got != tc.want || after.Seq != tc.want {
					t.Fatalf("reserve above %d/%d: %d, %v (ledger at %d); want %d", tc.ledger, tc.after, got, err, after.Seq, tc.want)
				}
				return
			}
			if !errors.Is(err, flclient.ErrSequenceExhausted) || !strings.Contains(err.Error(), "site store-1") {
				t.Fatalf("reserve above %d/%d: %d, %v; want ErrSequenceExhausted naming site store-1", tc.ledger, tc.after, got, err)
			}
			if after.Seq != before.Seq || after.Round != before.Round || after.By != before.By || !after.Updated.Equal(before.Updated) {
				t.Fatalf("ledger %+v after the refusal, was %+v", after, before)
			}
		})
	}
}

// memOutbox is an outbox for the reconciliation logic; adopt refuses
// messages starting with "bad", and, with a limit, any message once the
// outbox holds limit entries (as a client with the refuse-new policy).
type memOutbox struct {
	entries    map[uint64][]byte
	limit      int
	dropOldest bool // a full outbox drops its oldest entry (or the adopted one, when older)
}

func (m *memOutbox) Outbox() ([]uint64, error) {
	var out []uint64
	for s := range m.entries {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

func (m *memOutbox) OutboxEntry(seq uint64) ([]byte, error) { return m.entries[seq], nil }

func (m *memOutbox) Adopt(_ context.Context, seq uint64, msg []byte) error {
	if string(msg[:3]) == "bad" {
		return fmt.Errorf("%w: not signed", flclient.ErrAdopt)
	}
	if m.limit > 0 && len(m.entries) >= m.limit {
		oldest := slices.Min(slices.Collect(maps.Keys(m.entries)))
		if !m.dropOldest || seq < oldest {
			return fmt.Errorf("%w: update %d not adopted", flclient.ErrOutboxFull, seq)
		}
		delete(m.entries, oldest)
	}
	m.entries[seq] = msg
	return nil
}

func (m *memOutbox) Forget(seqs ...uint64) error {
	for _, s := range seqs {
		delete(m.entries, s)
	}
	return nil
}

// handedOver returns the ledgers of two agents of one site: other
// reserved sequences 1 to upTo, one a round, and handed over "msg-<seq>"
// for each of seqs; me is this agent's.
func handedOver(t *testing.T, upTo uint64, seqs ...uint64) (other, me *Ledger) {
	t.Helper()
	ctx := context.Background()
	client := fake.NewClientset()
	other, me = newLedger(t, client, "node-b"), newLedger(t, client, "node-a")
	for seq := uint64(1); seq <= upTo; seq++ {
		if _, err := other.Reserve(ctx, seq, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range seqs {
		if err := other.handOver(ctx, s, []byte(fmt.Sprintf("msg-%d", s))); err != nil {
			t.Fatal(err)
		}
	}
	return other, me
}

// TestReconcile: this agent holds 1, 2 and 7; the site's ledger is at 5
// with handovers 2, 3, 4 (another agent queued 3 and 4 and delivered 1)
// and a forged 5. Reconciling adopts 3 and 4, forgets 1, refuses 5,
// keeps 2, and hands over 7 (from before the ledger), raising it to 7.
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	other, me := handedOver(t, 5, 2, 3, 4)
	if err := other.handOver(ctx, 5, []byte("bad-5")); err != nil {
		t.Fatal(err)
	}
	ob := &memOutbox{entries: map[uint64][]byte{1: []byte("msg-1"), 2: []byte("msg-2"), 7: []byte("msg-7")}}
	r, err := me.Reconcile(ctx, ob)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ob.Outbox()
	if !slices.Equal(r.Adopted, []uint64{3, 4}) || !slices.Equal(r.Forgotten, []uint64{1}) || !slices.Equal(r.Refused, []uint64{5}) ||
		!slices.Equal(r.HandedOver, []uint64{7}) || r.Ledger.Seq != 7 || !slices.Equal(got, []uint64{2, 3, 4, 7}) {
		t.Fatalf("reconciled %+v, outbox %v", r, got)
	}
	hs, _ := me.Handovers(ctx)
	if len(hs) != 5 || hs[4].Seq != 7 || hs[4].By != "node-a" {
		t.Fatalf("handovers after: %+v", hs)
	}
	// again: nothing to do
	r, err = me.Reconcile(ctx, ob)
	if err != nil || len(r.Adopted)+len(r.Forgotten)+len(r.HandedOver) != 0 {
		t.Fatalf("second reconcile: %+v (%v)", r, err)
	}
}

// TestReconcileFullOutbox: this agent's outbox (limit 2) holds 1 and 2,
// both delivered by another agent (their handovers are gone); the site
// has handovers 3, 4 and 5. Reconciling forgets 1 and 2 before it
// adopts, so 3 and 4 find room; 5 does not, and is listed in Full (the
// client counts, logs and reports it Done), not refused nor an error.
func TestReconcileFullOutbox(t *testing.T) {
	ctx := context.Background()
	_, me := handedOver(t, 5, 3, 4, 5)
	ob := &memOutbox{entries: map[uint64][]byte{1: []byte("msg-1"), 2: []byte("msg-2")}, limit: 2}
	r, err := me.Reconcile(ctx, ob)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ob.Outbox()
	if !slices.Equal(r.Forgotten, []uint64{1, 2}) || !slices.Equal(r.Adopted, []uint64{3, 4}) || !slices.Equal(r.Full, []uint64{5}) ||
		len(r.Refused) != 0 || !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("reconciled %+v, outbox %v; want 1 and 2 forgotten, 3 and 4 adopted, 5 full", r, got)
	}
}

// TestReconcileDropOldest: an outbox of 2 that drops its oldest entry
// for room adopts handovers 3, 4 and 5, dropping 3 for 5: Reconcile
// reports 4 and 5 adopted and 3 full (what the outbox holds), not all
// three.
func TestReconcileDropOldest(t *testing.T) {
	ctx := context.Background()
	_, me := handedOver(t, 5, 3, 4, 5)
	ob := &memOutbox{entries: map[uint64][]byte{}, limit: 2, dropOldest: true}
	r, err := me.Reconcile(ctx, ob)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ob.Outbox()
	if !slices.Equal(r.Adopted, []uint64{4, 5}) || !slices.Equal(r.Full, []uint64{3}) || !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("reconciled %+v, outbox %v; want 4 and 5 adopted, 3 full", r, got)
	}
}

// TestAdoptLate: this agent (node-a) reconciled at the start of its term,
// adopting node-b's handovers 1 and 2, and it delivered 1 (out of its
// outbox, its handover not yet removed). Then node-b, an old leader that
// had not yet seen its term end, handed over 3; this agent staged 4 (its
// handover made, its outbox entry not yet committed); another agent
// process given the same node name, node-a, handed over 6; and a forged
// handover, 5, appeared. AdoptLate adopts 3 and 6 and refuses 5, once:
// 4 is this agent's own, 1 was there at Reconcile.
func TestAdoptLate(t *testing.T) {
	ctx := context.Background()
	other, me := handedOver(t, 6, 1, 2)
	twin, err := NewLedger(LedgerConfig{Client: other.cfg.Client, Namespace: testNS, Site: "store-1", Identity: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	ob := &memOutbox{entries: map[uint64][]byte{}}
	r, err := me.Reconcile(ctx, ob)
	if err != nil || !slices.Equal(r.Adopted, []uint64{1, 2}) || !slices.Equal(r.Listed, []uint64{1, 2}) {
		t.Fatalf("reconciled %+v (%v), want 1 and 2 listed and adopted", r, err)
	}
	scan := NewLateScan(r)
	delete(ob.entries, 1) // delivered; its handover still there
	if err := other.handOver(ctx, 3, []byte("msg-3")); err != nil {
		t.Fatal(err)
	}
	if err := me.Stage(ctx, 4, 0, true, []byte("msg-4")); err != nil {
		t.Fatal(err)
	}
	if err := other.handOver(ctx, 5, []byte("bad-5")); err != nil {
		t.Fatal(err)
	}
	if err := twin.handOver(ctx, 6, []byte("msg-6")); err != nil {
		t.Fatal(err)
	}
	late, err := me.AdoptLate(ctx, ob, scan)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ob.Outbox()
	if !slices.Equal(late.Adopted, []uint64{3, 6}) || !slices.Equal(late.Refused, []uint64{5}) || !slices.Equal(got, []uint64{2, 3, 6}) {
		t.Fatalf("adopted late %+v, outbox %v; want 3 and 6 adopted, 5 refused, outbox [2 3 6]", late, got)
	}
	if again, err := me.AdoptLate(ctx, ob, scan); err != nil || len(again.Adopted)+len(again.Refused)+len(again.Full) != 0 {
		t.Fatalf("a second pass: %+v (%v), want nothing done", again, err)
	}
	// this agent's own stays its own after Done (a listing taken before
	// the removal must not adopt it)
	if err := me.Done(ctx, 4); err != nil || !me.isMade(4) {
		t.Fatalf("Done(4): %v, made here %v", err, me.isMade(4))
	}
}

// TestAdoptLateListsOnlyAfterAChange: the handovers (whole updates, up to
// 900 KiB each) are listed only when the ledger changed since the last
// listing; an unchanged ledger costs one read. (On casClientset, which
// numbers the ledger's writes as the apiserver would.)
func TestAdoptLateListsOnlyAfterAChange(t *testing.T) {
	ctx := context.Background()
	client := casClientset()
	lists := 0
	client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		return false, nil, nil
	})
	other, me := newLedger(t, client, "node-b"), newLedger(t, client, "node-a")
	if _, err := other.Reserve(ctx, 1, 0, false); err != nil {
		t.Fatal(err)
	}
	ob := &memOutbox{entries: map[uint64][]byte{}}
	r, err := me.Reconcile(ctx, ob)
	if err != nil {
		t.Fatal(err)
	}
	scan := NewLateScan(r)
	for i, tc := range []struct {
		change    func() error
		wantLists int
	}{
		{nil, 1}, // the first pass lists
		{nil, 0}, // nothing changed
		{func() error { return other.Stage(ctx, 2, 2, false, []byte("msg-2")) }, 1}, // an old leader's late stage
		{nil, 0},
		// a handover whose agent stopped before its Stage wrote the
		// ledger: found by the listing every lateScanEvery calls
		{func() error { return other.handOver(ctx, 3, []byte("msg-3")) }, 0},
		{nil, 0}, {nil, 0}, {nil, 0}, {nil, 0}, {nil, 1}, // the 10th call
	} {
		if tc.change != nil {
			if err := tc.change(); err != nil {
				t.Fatal(err)
			}
		}
		before := lists
		if _, err := me.AdoptLate(ctx, ob, scan); err != nil {
			t.Fatal(err)
		}
		if got := lists - before; got != tc.wantLists {
			t.Errorf("pass %d: %d listings, want %d", i+1, got, tc.wantLists)
		}
	}
	if got, _ := ob.Outbox(); !slices.Equal(got, []uint64{2, 3}) {
		t.Errorf("outbox %v, want the late updates 2 and 3 adopted", got)
	}
}
