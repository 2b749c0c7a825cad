package site

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
)

// FuzzLedgerState: no content of the site ledger ConfigMap (key
// ledger.json) makes the ledger's reader panic. A ledger that does not
// decode, has anything but white space after its JSON value, is longer
// than MaxLedgerBytes, or is another site's or version's, is refused with
// ErrLedger, and a reservation then fails without overwriting it; an accepted one is one
// JSON value of this site's version 1, and a reservation on it hands out the next
// sequence (or, at federated.MaxSeq or above, refuses with
// flclient.ErrSequenceExhausted) and writes a ledger that reads
// back with everything else kept. Seeded with a ledger the Ledger wrote.
func FuzzLedgerState(f *testing.F) {
	ctx := context.Background()
	ledgerOf := func(client *fake.Clientset) *Ledger {
		l, err := NewLedger(LedgerConfig{Client: kubeclientset.Wrap(client), Namespace: testNS, Site: "store-1", Identity: "node-a"})
		if err != nil {
			f.Fatal(err)
		}
		return l
	}
	client := fake.NewClientset()
	l := ledgerOf(client)
	if _, err := l.Reserve(ctx, 3, 41, false); err != nil {
		f.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps(testNS).Get(ctx, LedgerName("store-1"), metav1.GetOptions{})
	if err != nil {
		f.Fatal(err)
	}
	real := cm.Data[ledgerKey]
	f.Add(real)
	f.Add(real[:len(real)-1])
	f.Add(real + `{"v":2}`)
	f.Add(real + "}")
	f.Add(" \n" + real + "\r\n")
	f.Add(`{"v":1,"site":"store-1","seq":18446744073709551615,"round":18446744073709551615,"updated":"2026-12-01T00:00:00+05:30","by":""}`)
	f.Add(`{"v":1,"site":"store-1","seq":9223372036854775807}`)
	f.Add(`{"v":1,"site":"store-1","seq":9223372036854775806}`)
	f.Add(`{"v":1,"site":"store-2","seq":1}`)
	f.Add(`{"v":1,"site":"store-1","Seq":2,"seq":3,"extra":1}`)
	f.Add(`null`)
	f.Add(real + strings.Repeat(" ", MaxLedgerBytes+1-len(real)))
	f.Fuzz(func(t *testing.T, raw string) {
		client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LedgerName("store-1"), Namespace: testNS},
			Data: map[string]string{ledgerKey: raw}})
		l := ledgerOf(client)
		st, err := l.State(ctx)
		if err != nil {
			if !errors.Is(err, ErrLedger) {
				t.Fatalf("refusal %v does not wrap ErrLedger", err)
			}
			if _, err := l.Reserve(ctx, 1, 0, true); !errors.Is(err, ErrLedger) {
				t.Fatalf("a reservation on a refused ledger: %v, want ErrLedger", err)
			}
			if cm, err := client.CoreV1().ConfigMaps(testNS).Get(ctx, LedgerName("store-1"), metav1.GetOptions{}); err != nil || cm.Data[ledgerKey] != raw {
				t.Fatalf("a refused ledger was changed (%v)", err)
			}
			return
		}
		if st.V != 1 || st.Site != "store-1" || !json.Valid([]byte(raw)) || len(raw) > MaxLedgerBytes {
			t.Fatalf("accepted ledger %+v from %q", st, raw)
		}
		seq, err := l.Reserve(ctx, 1, 0, true)
		if st.Seq >= federated.MaxSeq {
			if !errors.Is(err, flclient.ErrSequenceExhausted) {
				t.Fatalf("an exhausted sequence reserved %d (%v)", seq, err)
			}
			return
		}
		if err != nil || seq != st.Seq+1 {
			t.Fatalf("reserved %d (%v) on a ledger at %d", seq, err, st.Seq)
		}
		after, err := l.State(ctx)
		if err != nil {
			t.Fatalf("the ledger written does not read back: %v", err)
		}
		if after.Seq != seq || after.Round != st.Round || after.By != "node-a" || after.Updated.IsZero() || time.Since(after.Updated) > time.Hour {
			t.Fatalf("ledger %+v after reserving %d on %+v", after, seq, st)
		}
	})
}
