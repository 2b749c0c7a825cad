package federated_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// FuzzLoadRegistry: no site registry directory makes LoadRegistry panic,
// whatever the directory is called, the key file is called and holds. A
// refusal wraps quant.ErrKey or ErrMessage; an accepted registry holds
// the real site-a with its key and, for the fuzzed file NAME.pub, site
// NAME with the key the file holds (quant.ReadPublicKey), and no other
// site. Seeded with key files 'edgectl model keygen' writes
// (quant.WriteKeyPair), in directories named as operators name them,
// glob metacharacters included.
func FuzzLoadRegistry(f *testing.F) {
	a, b := regionalKey(f, 1), regionalKey(f, 2)
	seedDir := f.TempDir()
	if _, _, err := quant.WriteKeyPair(seedDir, "site-b", b); err != nil {
		f.Fatal(err)
	}
	pubB, err := os.ReadFile(filepath.Join(seedDir, "site-b.pub"))
	if err != nil {
		f.Fatal(err)
	}
	for _, dir := range []string{"sites", "sites[1]", "keys*", "q?", "a b", ".hidden"} {
		f.Add(dir, "site-b", pubB)
	}
	f.Add("sites", "Site_B", pubB)
	f.Add("sites", "site-b", pubB[:len(pubB)-5])
	f.Add("sites", "site-b", bytes.Replace(pubB, []byte("public"), []byte("private"), 1))
	f.Add("sites", "site-a", pubB) // a second key for site-a
	f.Fuzz(func(t *testing.T, dirName, site string, content []byte) {
		if !validName(dirName) || !validName(site+".pub") {
			t.Skipf("%q or %q is not a plain file name the fuzz test can create", dirName, site+".pub")
		}
		dir := filepath.Join(t.TempDir(), dirName)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Skipf("the file system refused directory %q: %v", dirName, err)
		}
		if _, _, err := quant.WriteKeyPair(dir, "site-a", a); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, site+".pub"), content, 0o600); err != nil {
			t.Skipf("the file system refused the key file: %v", err)
		}
		r, err := LoadRegistry(dir)
		if err != nil {
			if r != nil || !errors.Is(err, quant.ErrKey) && !errors.Is(err, ErrMessage) {
				t.Fatalf("refusal %v does not wrap ErrKey or ErrMessage, or returned a registry", err)
			}
			return
		}
		want := []string{"site-a"}
		if site != "site-a" {
			want = append(want, site)
			slices.Sort(want)
		}
		if got := r.Sites(); !slices.Equal(got, want) {
			t.Fatalf("registry of %q: sites %q, want %q", dirName, got, want)
		}
		filePub, err := quant.ReadPublicKey(filepath.Join(dir, site+".pub"))
		if err != nil {
			t.Fatalf("registry accepted %s.pub, which ReadPublicKey refuses: %v", site, err)
		}
		if k, ok := r.SiteKey(site); !ok || !k.Equal(filePub) || !ValidSite(site) {
			t.Fatalf("site %q: key %x, the file's %x", site, k, filePub)
		}
		if k, _ := r.SiteKey("site-a"); site != "site-a" && !k.Equal(a.Public()) {
			t.Fatalf("site-a's key %x, not its own", k)
		}
	})
}

// validName reports whether s can name one file in a directory.
func validName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) < 200 && !strings.ContainsAny(s, "/\x00")
}

// TestLoadRegistryGlobDir: a registry directory whose path holds glob
// metacharacters is read as the directory it names: "sites[1]" is not
// read as empty, and "keys*" does not take a sibling's keys too.
func TestLoadRegistryGlobDir(t *testing.T) {
	base := t.TempDir()
	for dir, site := range map[string]string{"sites[1]": "site-a", "keys*": "site-b", "keys-old": "site-c"} {
		if err := os.Mkdir(filepath.Join(base, dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if _, _, err := quant.WriteKeyPair(filepath.Join(base, dir), site, regionalKey(t, site[5])); err != nil {
			t.Fatal(err)
		}
	}
	for dir, want := range map[string]string{"sites[1]": "site-a", "keys*": "site-b"} {
		r, err := LoadRegistry(filepath.Join(base, dir))
		if err != nil || !slices.Equal(r.Sites(), []string{want}) {
			t.Errorf("LoadRegistry(%q): sites %v (%v), want [%s]", dir, r.Sites(), err, want)
		}
	}
	if _, err := LoadRegistry(filepath.Join(base, "sites[1]", "site-a.pub")); err == nil {
		t.Error("LoadRegistry of a key file, not a directory: no error")
	}
}

// FuzzCheckUpdateMsg: CheckUpdateMsg, the coordinator's check of an
// update as it arrives, agrees with DecodeUpdateMsg, the subject binding
// and esu.CheckView on every message and subject (each message also
// re-signed by site-a, so fuzzed headers and payloads get past the
// signature): a message it cannot attribute has Err (wrapping ErrMessage,
// ErrSiteSignature or ErrWrongSubject) and nothing else; an attributed one
// is DecodeUpdateMsg's, on its site's subject or none, and its payload is
// refused (wrapping esu.ErrUpdate, no view) exactly when esu.Check refuses
// it, else described as esu.Check describes it. Seeded with real updates
// of both encodings, on the right, another site's and no subject.
func FuzzCheckUpdateMsg(f *testing.F) {
	fx := newFixture(f)
	seeds := [][]byte{
		mustEncodeUpdate(f, sampleHeader("site-a"), updatePayload(f, 20, esu.Int8), fx.a.signer),
		mustEncodeUpdate(f, sampleHeader("site-b"), updatePayload(f, 3, esu.Float32), fx.b.signer),
		mustEncodeUpdate(f, sampleHeader("site-a"), []byte("not an update"), fx.a.signer),
	}
	for _, b := range seeds {
		for _, subject := range []string{"", UpdateSubjectPrefix + "site-a", UpdateSubjectPrefix + "site-b"} {
			f.Add(b, subject, uint16(0))
		}
		f.Add(b, "", uint16(10))
	}
	check := func(t *testing.T, b []byte, subject string, maxValues int) {
		c := CheckUpdateMsg(b, subject, fx.reg, maxValues)
		m, err := DecodeUpdateMsg(b, fx.reg)
		if err == nil && subject != "" && subject != UpdateSubjectPrefix+m.Header.Site {
			err = ErrWrongSubject
		}
		if (c.Err == nil) != (err == nil) {
			t.Fatalf("CheckUpdateMsg: %v; DecodeUpdateMsg and the subject: %v", c.Err, err)
		}
		if c.Err != nil {
			if c.Msg != nil || c.View != nil || c.PayloadErr != nil || !errors.Is(c.Err, ErrMessage) && !errors.Is(c.Err, ErrSiteSignature) && !errors.Is(c.Err, ErrWrongSubject) {
				t.Fatalf("unattributed message: %+v", c)
			}
			return
		}
		if c.Msg == nil || !headersEqual(c.Msg.Header, m.Header) || !bytes.Equal(c.Msg.Payload, m.Payload) || c.Msg.KeyID != m.KeyID {
			t.Fatalf("CheckUpdateMsg's message differs from DecodeUpdateMsg's")
		}
		info, perr := esu.Check(m.Payload, maxValues)
		if (c.PayloadErr == nil) != (perr == nil) {
			t.Fatalf("payload: CheckUpdateMsg %v, esu.Check %v", c.PayloadErr, perr)
		}
		if c.PayloadErr != nil {
			if c.View != nil || !errors.Is(c.PayloadErr, esu.ErrUpdate) {
				t.Fatalf("refused payload: %v, view %v", c.PayloadErr, c.View)
			}
			return
		}
		if c.View == nil || c.Payload != info || c.View.Len() != info.Values {
			t.Fatalf("payload %+v (view %v), esu.Check %+v", c.Payload, c.View, info)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, subject string, maxValues uint16) {
		check(t, b, subject, int(maxValues))
		if n := len(b) - ed25519.SignatureSize; n >= 0 && len(b) <= MaxUpdateBytes {
			check(t, signed(b[:n], fx.a.signer), subject, int(maxValues))
		}
	})
}
