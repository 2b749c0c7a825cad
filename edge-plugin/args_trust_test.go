package edgeplugin

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/quant"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestModelTrustArgs: the plugin's args wire the state file and the age
// limit through New, and bad values are refused.
func TestModelTrustArgs(t *testing.T) {
	dir := t.TempDir()
	s := testSigner(t, 1)
	_, pub, err := quant.WriteKeyPair(dir, "test", s)
	if err != nil {
		t.Fatal(err)
	}
	created := testArtifact(t).Header.Created
	path := writeFile(t, dir, "model.esa", plugintest.Variant(t, s, 7, created, 0))
	state := filepath.Join(dir, "state.db")
	raw := fmt.Sprintf(`{"modelPath":%q,"modelKeys":[%q],"modelStatePath":%q}`, path, pub, state)
	pl, err := New(t.Context(), &runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := pl.(*EdgePolicy).Models().Floor(); v != 7 {
		t.Fatalf("floor %d after loading version 7, want 7", v)
	}
	// a restarted plugin finds version 4 in the file: refused, nothing runs
	writeFile(t, dir, "model.esa", plugintest.Variant(t, s, 4, created, 0))
	pl, err = New(t.Context(), &runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := pl.(*EdgePolicy).Models().Current(); m != nil {
		t.Fatalf("restarted plugin runs version %d below its floor", m.Header.Version)
	}
	for _, bad := range []string{
		`{"modelPath":"m","modelKeys":["k"],"modelMaxAge":"soon"}`,
		`{"modelPath":"m","modelKeys":["k"],"modelMaxAge":"1s"}`,
		`{"modelPath":"m","modelKeys":["k"],"modelMaxAge":"100000h"}`,
	} {
		if _, err := DecodeArgs(&runtime.Unknown{Raw: []byte(bad)}); !errors.Is(err, ErrArgs) || !strings.Contains(err.Error(), "modelMaxAge") {
			t.Errorf("DecodeArgs(%s) = %v, want ErrArgs naming modelMaxAge", bad, err)
		}
	}
}
