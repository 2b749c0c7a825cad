package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var created = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testCA is a PEM block: BaseEntries only checks that one is there.
var testCA = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")

type tarFile struct {
	name       string
	typ        byte
	mode       int64
	uid, gid   int
	mtime      time.Time
	data       string
	uname, grp string
}

func readTar(t *testing.T, b []byte) []tarFile {
	t.Helper()
	var out []tarFile
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarFile{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime, string(data), h.Uname, h.Gname})
	}
}

func TestTarIsSortedAndDeterministic(t *testing.T) {
	a := []Entry{
		{Path: "/usr/local/bin/x", Mode: 0o755, Data: []byte("bin")},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root")},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
	}
	b := []Entry{a[2], a[0], a[1]} // the same entries in another order
	ta, err := Tar(withParents(a), created)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Tar(withParents(b), created)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ta, tb) {
		t.Fatal("the same entries in another order give other tar bytes")
	}
	files := readTar(t, ta)
	var names []string
	for _, f := range files {
		names = append(names, f.name)
		if !f.mtime.Equal(created) || f.uname != "" || f.grp != "" {
			t.Errorf("%s: mtime %v, owner names %q %q; want %v and none", f.name, f.mtime, f.uname, f.grp, created)
		}
	}
	// parents first, sorted by path
	want := "etc/ etc/passwd tmp/ usr/ usr/local/ usr/local/bin/ usr/local/bin/x"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("entries %q, want %q", got, want)
	}
	if files[2].mode != 0o1777 || files[2].typ != tar.TypeDir {
		t.Errorf("/tmp: mode %o type %c, want 1777 directory", files[2].mode, files[2].typ)
	}
	if later, _ := Tar(withParents(a), created.Add(time.Second)); bytes.Equal(later, ta) {
		t.Error("another mtime gives the same bytes")
	}
}

func TestTarRefusesBadPaths(t *testing.T) {
	for _, tc := range []struct {
		entries []Entry
		want    error
	}{
		{[]Entry{{Path: "etc/passwd"}}, ErrBadPath},
		{[]Entry{{Path: "/etc/../passwd"}}, ErrBadPath},
		{[]Entry{{Path: "/"}}, ErrBadPath},
		{[]Entry{{Path: "/a"}, {Path: "/a"}}, ErrDuplicatePath},
	} {
		if _, err := Tar(tc.entries, created); !errors.Is(err, tc.want) {
			t.Errorf("%v: error %v, want %v", tc.entries, err, tc.want)
		}
	}
}

func TestBaseEntries(t *testing.T) {
	if _, err := BaseEntries([]byte("not a certificate")); !errors.Is(err, ErrConfig) {
		t.Errorf("a CA bundle without PEM: error %v, want ErrConfig", err)
	}
	es, err := BaseEntries(testCA)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Entry{}
	for _, e := range es {
		byPath[e.Path] = e
	}
	for _, p := range []string{"/etc", "/etc/ssl", "/etc/ssl/certs", "/home", "/tmp", "/root"} {
		if e, ok := byPath[p]; !ok || !e.Dir {
			t.Errorf("%s: missing or not a directory", p)
		}
	}
	if e := byPath["/tmp"]; e.Mode != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777 (world-writable, sticky)", e.Mode)
	}
	if e := byPath[NonrootHome]; e.UID != NonrootUID || e.GID != NonrootUID {
		t.Errorf("%s owned by %d:%d, want %d", NonrootHome, e.UID, e.GID, NonrootUID)
	}
	if !bytes.Equal(byPath[CACertsPath].Data, testCA) {
		t.Error("the CA bundle is not copied as is")
	}
	if !strings.Contains(string(byPath["/etc/passwd"].Data), "nonroot:x:65532:65532:") ||
		!strings.Contains(string(byPath["/etc/group"].Data), "nonroot:x:65532:") {
		t.Errorf("passwd/group have no nonroot user 65532:\n%s%s", byPath["/etc/passwd"].Data, byPath["/etc/group"].Data)
	}
}

func testImage(t *testing.T, p v1.Platform, bin string, when time.Time) v1.Image {
	t.Helper()
	base, err := baseLayer(testCA, when)
	if err != nil {
		t.Fatal(err)
	}
	img, err := NewImage(ImageSpec{Name: "edge-x", Description: "test", User: "65532:65532", Platform: p}, base, []byte(bin), Meta{Version: "v1", Commit: "abc", Created: when})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestImageIsReproducible(t *testing.T) {
	a := testImage(t, LinuxARM64, "program", created)
	if b := testImage(t, LinuxARM64, "program", created); digest(t, a) != digest(t, b) {
		t.Errorf("same inputs, digests %s and %s", digest(t, a), digest(t, b))
	}
	for what, other := range map[string]v1.Image{
		"another binary":   testImage(t, LinuxARM64, "program2", created),
		"another platform": testImage(t, LinuxAMD64, "program", created),
		"another time":     testImage(t, LinuxARM64, "program", created.Add(time.Second)),
	} {
		if digest(t, other) == digest(t, a) {
			t.Errorf("%s gives the same digest", what)
		}
	}
	cf, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "arm64" || cf.OS != "linux" || !cf.Created.Time.Equal(created) {
		t.Errorf("config platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/usr/local/bin/edge-x" || cf.Config.User != "65532:65532" {
		t.Errorf("entrypoint %q user %q", got, cf.Config.User)
	}
	for _, h := range cf.History {
		if !h.Created.Time.Equal(created) {
			t.Errorf("history %q created %v, want %v", h.CreatedBy, h.Created, created)
		}
	}
	layers, err := a.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("layers %d (%v), want base and program", len(layers), err)
	}
	rc, err := layers[1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(rc)
	rc.Close()
	files := readTar(t, raw)
	if last := files[len(files)-1]; last.name != "usr/local/bin/edge-x" || last.mode != 0o755 || last.data != "program" {
		t.Errorf("program layer ends with %s mode %o %q", last.name, last.mode, last.data)
	}
}

func TestIndexPlatforms(t *testing.T) {
	specs := []ImageSpec{{Name: "edge-x", Platform: LinuxAMD64}, {Name: "edge-x", Platform: LinuxARMv7}}
	imgs := []v1.Image{testImage(t, LinuxAMD64, "a", created), testImage(t, LinuxARMv7, "b", created)}
	idx, err := NewIndex(specs, imgs, Meta{Version: "v1", Created: created})
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 || PlatformString(*m.Manifests[0].Platform) != "linux/amd64" || PlatformString(*m.Manifests[1].Platform) != "linux/arm/v7" {
		t.Fatalf("index manifests %+v", m.Manifests)
	}
	if m.Manifests[1].Digest != digest(t, imgs[1]) {
		t.Error("the arm/v7 entry does not point at the arm/v7 image")
	}
	if m.Annotations[AnnotationVersion] != "v1" {
		t.Errorf("index annotations %v", m.Annotations)
	}
	if _, err := NewIndex(specs, imgs[:1], Meta{}); !errors.Is(err, ErrConfig) {
		t.Errorf("specs and images of different lengths: %v", err)
	}
}

func TestValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for what, mut := range map[string]func(*Config){
		"no dir":          func(c *Config) { c.Dir = "" },
		"bad tag":         func(c *Config) { c.Tag = "a:b" },
		"bad registry":    func(c *Config) { c.Registry = "UPPER case" },
		"no time":         func(c *Config) { c.Meta.Created = time.Time{} },
		"no components":   func(c *Config) { c.Components = nil },
		"duplicate":       func(c *Config) { c.Components = append(c.Components, c.Components[0]) },
		"bad user":        func(c *Config) { c.Components[0].User = "nonroot" },
		"windows":         func(c *Config) { c.Components[1].Platforms = []v1.Platform{{OS: "windows", Architecture: "amd64"}} },
		"no platforms":    func(c *Config) { c.Components[2].Platforms = nil },
		"no package":      func(c *Config) { c.Components[3].Package = "" },
		"slash in a name": func(c *Config) { c.Components[3].Name = "a/b" },
	} {
		c := DefaultConfig()
		c.Components = DefaultComponents("nogorgonia", "nogorgonia", "simd")
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", what, err)
		}
	}
}

// testConfig builds the hello program (testdata/hello) for amd64 and
// arm64 into dir.
func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("the go command is not on PATH (%v): Build runs go build", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, testCA, 0o644); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Dir, c.CACerts, c.Tag = dir, ca, "v1"
	c.Meta = Meta{Version: "v1", Commit: "0123456789abcdef", Created: created}
	c.Components = []Component{{Name: "hello", Package: "./testdata/hello", User: "65532:65532",
		Platforms: []v1.Platform{LinuxAMD64, LinuxARM64}}}
	return c
}

// TestBuild builds a small program's images twice into two directories
// and once more into the first: the same digests, a reused build, and
// outputs that open as what they claim to be.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestBuild runs go build for two platforms")
	}
	ctx := context.Background()
	dirA, dirB := t.TempDir(), t.TempDir()
	a, reused, err := Build(ctx, testConfig(t, dirA))
	if err != nil || reused {
		t.Fatalf("first build: reused %v, %v", reused, err)
	}
	b, _, err := Build(ctx, testConfig(t, dirB))
	if err != nil {
		t.Fatal(err)
	}
	if a.Components[0].Digest != b.Components[0].Digest {
		t.Errorf("two builds of the same inputs: index digests %s and %s", a.Components[0].Digest, b.Components[0].Digest)
	}
	for i := range a.Components[0].Platforms {
		if pa, pb := a.Components[0].Platforms[i], b.Components[0].Platforms[i]; pa.Digest != pb.Digest {
			t.Errorf("%s: digests %s and %s", pa.Platform, pa.Digest, pb.Digest)
		}
	}
	again, reused, err := Build(ctx, testConfig(t, dirA))
	if err != nil || !reused || again.Components[0].Digest != a.Components[0].Digest {
		t.Errorf("third build of the same inputs: reused %v (want true), %v", reused, err)
	}
	dirty := testConfig(t, dirA)
	dirty.Meta.Version = "v1-dirty"
	if _, reused, err := Build(ctx, dirty); err != nil || reused {
		t.Errorf("a modified tree: reused %v (want false), %v", reused, err)
	}

	// the layout's index names the component and holds both platforms
	lp, err := layout.FromPath(filepath.Join(dirB, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations[AnnotationRefName] != "ghcr.io/edgesched/hello:v1" ||
		tm.Manifests[0].Digest.String() != b.Components[0].Digest {
		t.Fatalf("layout index.json: %+v", tm.Manifests)
	}

	// the amd64 archive: the image named by its tag, its config and the
	// binary in it, which runs
	p := b.Components[0].Platforms[0]
	tag, _ := name.NewTag("ghcr.io/edgesched/hello:v1")
	img, err := tarball.ImageFromPath(filepath.Join(dirB, p.Archive), &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "amd64" || cf.Config.User != "65532:65532" {
		t.Errorf("archive config %s %s", cf.Architecture, cf.Config.User)
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		out, err := exec.Command(filepath.Join(dirB, p.Binary)).Output()
		if err != nil || !strings.HasPrefix(string(out), "hello linux/amd64") {
			t.Errorf("the built program printed %q (%v)", out, err)
		}
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, b); err != nil || !strings.Contains(buf.String(), p.Digest) {
		t.Errorf("table without the amd64 digest:\n%s", buf.String())
	}
}
