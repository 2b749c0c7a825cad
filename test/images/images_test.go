package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/edgesched/edgesched/internal/ociimage"
	"github.com/edgesched/edgesched/test/internal/gobuild"
)

// DirEnv names the output directory of `make images`.
const DirEnv = "EDGESCHED_IMAGES_DIR"

// Compressed-size goals (issue 22): what a node pulls.
var sizeGoal = map[string]int64{"edge-agent": 35e6, "edge-scheduler": 70e6}

// Stripped-binary goals (issue 20): edge-scheduler links kube-scheduler's
// scheduler without its app (internal/schedcmd), the agent no training
// code. A regression that links text/template's execution (a cobra
// version template, say) keeps every exported method in the binary and
// takes edge-scheduler to about 78 MB (docs/edge-plugin.md, "Binary size").
var binaryGoal = map[string]int64{"edge-agent": 30e6, "edge-scheduler": 60e6}

// build is one build's outputs, opened once per test binary.
type build struct {
	dir     string
	sum     *ociimage.Summary
	indexes map[string]v1.ImageIndex // component -> its multi-platform index from the layout
}

var (
	once     sync.Once
	opened   *build
	openErr  error
	skipWhy  string
	extractM sync.Mutex
	files    = map[string][]byte{} // image digest + path -> file, taken out once
)

func open(t *testing.T) *build {
	t.Helper()
	once.Do(func() {
		dir := os.Getenv(DirEnv)
		if dir == "" {
			skipWhy = DirEnv + " is not set: `make test-images` builds the images and runs these tests"
			return
		}
		b := &build{dir: dir, indexes: map[string]v1.ImageIndex{}}
		if b.sum, openErr = ociimage.ReadSummary(dir); openErr != nil {
			return
		}
		lp, err := layout.FromPath(filepath.Join(dir, "oci"))
		if err != nil {
			openErr = err
			return
		}
		top, err := lp.ImageIndex()
		if err != nil {
			openErr = err
			return
		}
		m, err := top.IndexManifest()
		if err != nil {
			openErr = err
			return
		}
		for _, d := range m.Manifests {
			ref := d.Annotations[ociimage.AnnotationRefName]
			idx, err := top.ImageIndex(d.Digest)
			if err != nil {
				openErr = fmt.Errorf("layout: %s: %w", ref, err)
				return
			}
			r, err := name.NewTag(ref)
			if err != nil {
				openErr = fmt.Errorf("layout: ref name %q: %w", ref, err)
				return
			}
			comp := r.Context().RepositoryStr()
			b.indexes[comp[strings.LastIndex(comp, "/")+1:]] = idx
		}
		opened = b
	})
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if openErr != nil {
		t.Fatalf("open the images in %s: %v", os.Getenv(DirEnv), openErr)
	}
	return opened
}

// want are the components, platforms and users the images must have.
func want() []ociimage.Component { return ociimage.DefaultComponents("", "", "") }

func (b *build) image(t *testing.T, comp string, p v1.Platform) v1.Image {
	t.Helper()
	idx, ok := b.indexes[comp]
	if !ok {
		t.Fatalf("the layout has no index for %s", comp)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Equals(p) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("%s has no %s image", comp, ociimage.PlatformString(p))
	return nil
}

// file returns the file at path (no leading slash) in img's flattened
// filesystem, with its tar header.
func file(t *testing.T, img v1.Image, path string) ([]byte, *tar.Header) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("no %s in the image", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSuffix(h.Name, "/") == path {
			b, err := io.ReadAll(io.LimitReader(tr, 512<<20))
			if err != nil {
				t.Fatal(err)
			}
			return b, h
		}
	}
}

// binary writes comp's program taken out of its image for p into a
// temporary file and returns its path.
func (b *build) binary(t *testing.T, comp string, p v1.Platform) string {
	t.Helper()
	img := b.image(t, comp, p)
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	extractM.Lock()
	defer extractM.Unlock()
	key := d.String() + comp
	data, ok := files[key]
	if !ok {
		data, _ = file(t, img, strings.TrimPrefix(ociimage.BinDir, "/")+"/"+comp)
		files[key] = data
	}
	path := filepath.Join(t.TempDir(), comp)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestIndexes(t *testing.T) {
	b := open(t)
	for _, comp := range want() {
		t.Run(comp.Name, func(t *testing.T) {
			idx, ok := b.indexes[comp.Name]
			if !ok {
				t.Fatalf("the layout has no index for %s (has %d)", comp.Name, len(b.indexes))
			}
			m, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var got, exp []string
			for _, d := range m.Manifests {
				got = append(got, ociimage.PlatformString(*d.Platform))
			}
			for _, p := range comp.Platforms {
				exp = append(exp, ociimage.PlatformString(p))
			}
			if !slices.Equal(got, exp) {
				t.Errorf("index platforms %v, want %v", got, exp)
			}
			d, _ := idx.Digest()
			cs := summary(t, b, comp.Name)
			if d.String() != cs.Digest {
				t.Errorf("index digest %s, images.json says %s", d, cs.Digest)
			}
			for _, p := range comp.Platforms {
				checkImage(t, b, comp, p)
			}
		})
	}
}

func summary(t *testing.T, b *build, comp string) ociimage.ComponentSummary {
	t.Helper()
	for _, cs := range b.sum.Components {
		if cs.Name == comp {
			return cs
		}
	}
	t.Fatalf("images.json has no %s", comp)
	return ociimage.ComponentSummary{}
}

// platformSummary is cs's image for plat in images.json.
func platformSummary(t *testing.T, cs ociimage.ComponentSummary, plat string) ociimage.PlatformSummary {
	t.Helper()
	i := slices.IndexFunc(cs.Platforms, func(ps ociimage.PlatformSummary) bool { return ps.Platform == plat })
	if i < 0 {
		t.Fatalf("%s: images.json has no %s", cs.Name, plat)
	}
	return cs.Platforms[i]
}

// checkImage checks one image's configuration and base files.
func checkImage(t *testing.T, b *build, comp ociimage.Component, p v1.Platform) {
	img := b.image(t, comp.Name, p)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	plat := ociimage.PlatformString(p)
	if cf.OS != p.OS || cf.Architecture != p.Architecture || cf.Variant != p.Variant {
		t.Errorf("%s: config platform %s/%s/%s", plat, cf.OS, cf.Architecture, cf.Variant)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != ociimage.BinDir+"/"+comp.Name {
		t.Errorf("%s: entrypoint %q", plat, got)
	}
	// The agent runs as root so that CAP_BPF and CAP_PERFMON (the only
	// capabilities the chart adds, every other one dropped) are in its
	// effective set: Kubernetes grants no ambient capabilities to a
	// non-root user. Every other program is non-root.
	wantUser := "65532:65532"
	if comp.Name == "edge-agent" {
		wantUser = "0:0"
	}
	if cf.Config.User != wantUser {
		t.Errorf("%s: user %q, want %q", plat, cf.Config.User, wantUser)
	}
	if cf.Config.Labels[ociimage.AnnotationRevision] != b.sum.Commit || cf.Created.Time.IsZero() || !cf.Created.Time.Equal(b.sum.Created) {
		t.Errorf("%s: labels %v created %v; want commit %s created %v", plat, cf.Config.Labels, cf.Created, b.sum.Commit, b.sum.Created)
	}
	passwd, _ := file(t, img, "etc/passwd")
	if !bytes.Contains(passwd, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("%s: /etc/passwd has no nonroot user:\n%s", plat, passwd)
	}
	ca, _ := file(t, img, strings.TrimPrefix(ociimage.CACertsPath, "/"))
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("%s: no CA certificates at %s", plat, ociimage.CACertsPath)
	}
	if _, h := file(t, img, "tmp"); h.Typeflag != tar.TypeDir || h.Mode&0o7777 != 0o1777 {
		t.Errorf("%s: /tmp mode %o type %c, want a 1777 directory", plat, h.Mode, h.Typeflag)
	}
	if _, h := file(t, img, strings.TrimPrefix(ociimage.BinDir, "/")+"/"+comp.Name); h.Mode&0o777 != 0o755 || h.Uid != 0 {
		t.Errorf("%s: program mode %o owner %d", plat, h.Mode, h.Uid)
	}
}

// TestArchives opens every per-platform archive (the docker-archive K3s
// imports): the image named REGISTRY/NAME:TAG with the same configuration
// and layers as the layout's.
func TestArchives(t *testing.T) {
	b := open(t)
	for _, comp := range want() {
		cs := summary(t, b, comp.Name)
		for _, p := range comp.Platforms {
			plat := ociimage.PlatformString(p)
			ps := platformSummary(t, cs, plat)
			tag, err := name.NewTag(cs.Image)
			if err != nil {
				t.Fatal(err)
			}
			arch, err := tarball.ImageFromPath(filepath.Join(b.dir, ps.Archive), &tag)
			if err != nil {
				t.Errorf("%s %s: archive %s does not hold %s: %v", comp.Name, plat, ps.Archive, tag, err)
				continue
			}
			lay := b.image(t, comp.Name, p)
			ac, _ := arch.ConfigName()
			lc, _ := lay.ConfigName()
			if ac != lc {
				t.Errorf("%s %s: archive config %s, layout config %s", comp.Name, plat, ac, lc)
			}
			al, _ := arch.Layers()
			ll, _ := lay.Layers()
			if len(al) != len(ll) {
				t.Fatalf("%s %s: %d layers in the archive, %d in the layout", comp.Name, plat, len(al), len(ll))
			}
			for j := range al {
				ad, _ := al[j].Digest()
				ld, _ := ll[j].Digest()
				if ad != ld {
					t.Errorf("%s %s: layer %d %s in the archive, %s in the layout", comp.Name, plat, j, ad, ld)
				}
			}
			ld, _ := lay.Digest()
			if ld.String() != ps.Digest {
				t.Errorf("%s %s: layout digest %s, images.json %s", comp.Name, plat, ld, ps.Digest)
			}
		}
	}
}

// TestSizes checks the compressed and binary sizes against the goals and prints
// every image's.
func TestSizes(t *testing.T) {
	b := open(t)
	for _, cs := range b.sum.Components {
		for _, p := range cs.Platforms {
			t.Logf("%-17s %-13s %s compressed (binary %s) %s", cs.Name, p.Platform, ociimage.MB(p.CompressedSize), ociimage.MB(p.BinarySize), p.Digest)
			if goal, ok := sizeGoal[cs.Name]; ok && p.CompressedSize > goal {
				t.Errorf("%s %s: %s compressed, goal %s", cs.Name, p.Platform, ociimage.MB(p.CompressedSize), ociimage.MB(goal))
			}
			if goal, ok := binaryGoal[cs.Name]; ok && p.BinarySize > goal {
				t.Errorf("%s %s: binary %s, goal %s", cs.Name, p.Platform, ociimage.MB(p.BinarySize), ociimage.MB(goal))
			}
		}
	}
}

// TestVersionAMD64 runs each program taken out of its amd64 image.
func TestVersionAMD64(t *testing.T) {
	b := open(t)
	if out, err := exec.Command("uname", "-m").Output(); err != nil || strings.TrimSpace(string(out)) != "x86_64" {
		t.Skipf("not an x86_64 machine (uname -m: %q, %v): the amd64 binaries cannot run here", out, err)
	}
	for _, comp := range want() {
		bin := b.binary(t, comp.Name, ociimage.LinuxAMD64)
		checkVersion(t, b, comp.Name, "linux/amd64", exec.Command(bin, "--version"))
	}
}

// checkVersion runs cmd (a program's --version) and checks its line:
// "NAME VERSION commit COMMIT built DATE goX PLATFORM".
func checkVersion(t *testing.T, b *build, comp, platform string, cmd *exec.Cmd) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	out, err := c.CombinedOutput()
	line := strings.TrimSpace(string(out))
	t.Logf("%s", line)
	if err != nil {
		t.Errorf("%s %s --version: %v\n%s", comp, platform, err, out)
		return
	}
	if comp == "nats-server" {
		// nats-server's own line: its release, the one go.mod pins
		if want := "nats-server: " + natsVersion(t); line != want {
			t.Errorf("nats-server --version printed %q, want %q", line, want)
		}
		return
	}
	// internal/cli's line; edge-scheduler adds the kube-scheduler it is
	want := regexp.MustCompile("^" + regexp.QuoteMeta(fmt.Sprintf("%s %s commit %s built %s ", comp, b.sum.Version, b.sum.Commit, b.sum.Created.Format(time.RFC3339))) +
		`go\S+ ` + regexp.QuoteMeta(platform) + `( kube-scheduler v\S+)?$`)
	if !want.MatchString(line) {
		t.Errorf("%s --version printed %q, want a line matching %s", comp, line, want)
	}
}

// natsVersion is the nats-server release go.mod pins.
func natsVersion(t *testing.T) string {
	t.Helper()
	root, err := gobuild.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/nats-io/nats-server/v2" {
			return f[1]
		}
	}
	t.Fatal("go.mod does not require github.com/nats-io/nats-server/v2")
	return ""
}

// TestELF checks the non-amd64 programs: static ELF files for their
// machine, built as released (debug/buildinfo).
func TestELF(t *testing.T) {
	b := open(t)
	machines := map[string]struct {
		m     elf.Machine
		class elf.Class
	}{"arm64": {elf.EM_AARCH64, elf.ELFCLASS64}, "arm": {elf.EM_ARM, elf.ELFCLASS32}, "amd64": {elf.EM_X86_64, elf.ELFCLASS64}}
	for _, comp := range want() {
		for _, p := range comp.Platforms {
			plat := ociimage.PlatformString(p)
			path := b.binary(t, comp.Name, p)
			f, err := elf.Open(path)
			if err != nil {
				t.Errorf("%s %s: %v", comp.Name, plat, err)
				continue
			}
			w := machines[p.Architecture]
			if f.Machine != w.m || f.Class != w.class || f.Type != elf.ET_EXEC {
				t.Errorf("%s %s: ELF machine %v class %v type %v, want %v %v EXEC", comp.Name, plat, f.Machine, f.Class, f.Type, w.m, w.class)
			}
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
					t.Errorf("%s %s: dynamically linked (%v)", comp.Name, plat, prog.Type)
				}
			}
			if syms, err := f.Symbols(); err == nil && len(syms) > 0 {
				t.Errorf("%s %s: %d symbols: not stripped (-s -w)", comp.Name, plat, len(syms))
			}
			f.Close()
			bi, err := buildinfo.ReadFile(path)
			if err != nil {
				t.Errorf("%s %s: build info: %v", comp.Name, plat, err)
				continue
			}
			settings := map[string]string{}
			for _, s := range bi.Settings {
				settings[s.Key] = s.Value
			}
			if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOARCH"] != p.Architecture {
				t.Errorf("%s %s: built with CGO_ENABLED=%q -trimpath=%q GOARCH=%q", comp.Name, plat, settings["CGO_ENABLED"], settings["-trimpath"], settings["GOARCH"])
			}
			if p.Variant != "" && settings["GOARM"] != strings.TrimPrefix(p.Variant, "v") {
				t.Errorf("%s %s: GOARM=%q", comp.Name, plat, settings["GOARM"])
			}
			if (comp.Name == "edge-agent" || comp.Name == "edge-scheduler") && !strings.Contains(settings["-tags"], "nogorgonia") {
				t.Errorf("%s %s: tags %q, want the Makefile's AGENT_TAGS or SCHEDULER_TAGS (nogorgonia)", comp.Name, plat, settings["-tags"])
			}
			// the scheduler's vector kernel exists only on amd64
			if comp.Name == "edge-scheduler" && (p.Architecture == "amd64") != strings.Contains(settings["GOEXPERIMENT"], "simd") {
				t.Errorf("%s %s: GOEXPERIMENT=%q", comp.Name, plat, settings["GOEXPERIMENT"])
			}
		}
	}
}

// qemu finds Debian's user-mode emulator for arch, or skips t with why.
func qemu(t *testing.T, arch string) string {
	t.Helper()
	for _, n := range []string{"qemu-" + arch + "-static", "qemu-" + arch} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skipf("qemu-%s-static is not installed (Debian's qemu-user-static; `make test-images` installs it when run as root): the %s programs are not run", arch, arch)
	return ""
}

// TestVersionEmulated runs the arm64 agent and scheduler, and the arm/v7
// agent, under user-mode emulation.
func TestVersionEmulated(t *testing.T) {
	b := open(t)
	t.Run("arm64", func(t *testing.T) {
		q := qemu(t, "aarch64")
		for _, comp := range []string{"edge-agent", "edge-scheduler"} {
			checkVersion(t, b, comp, "linux/arm64", exec.Command(q, b.binary(t, comp, ociimage.LinuxARM64), "--version"))
		}
	})
	t.Run("arm-v7", func(t *testing.T) {
		q := qemu(t, "arm")
		checkVersion(t, b, "edge-agent", "linux/arm", exec.Command(q, b.binary(t, "edge-agent", ociimage.LinuxARMv7), "--version"))
	})
}

// TestUnitTestsEmulated runs the unit tests of quant, quant/int8net (the
// portable kernel an arm64 scheduler scores with) and policy built for
// arm64 (policy twice: as the scheduler and coordinator link it, and with
// the agent's tags) under qemu. Only correctness counts: timings under emulation say nothing
// about an arm64 core.
func TestUnitTestsEmulated(t *testing.T) {
	open(t)
	q := qemu(t, "aarch64")
	goBin, err := gobuild.GoTool()
	if err != nil {
		t.Skip(err)
	}
	root, err := gobuild.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler and the coordinator link policy with gorgonia's
	// tensors, the agent without (AGENT_TAGS): both builds of the network.
	for _, run := range []struct{ tags, pkgs string }{
		{"", "./quant/ ./quant/int8net/ ./policy/"},
		{"nogorgonia", "./policy/"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		// -trimpath: the packages the arm64 images compiled are reused.
		// -short: TestFederatedInt8Updates (PPO training of 3 sites x 4
		// rounds, 38 s native) took most of 576 s under qemu and proves
		// nothing about the architecture; every kernel, quantization,
		// artifact and network test runs.
		args := []string{"test", "-count=1", "-short", "-timeout", "20m", "-trimpath", "-exec", q}
		if run.tags != "" {
			args = append(args, "-tags", run.tags)
		}
		args = append(args, strings.Fields(run.pkgs)...)
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		t.Logf("GOARCH=arm64 go %s (%s):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Second), out)
		if err != nil {
			t.Errorf("arm64 unit tests under %s: %v", q, err)
		}
	}
}

// TestContainerdImport imports the archives into a real containerd (K3s
// runs containerd and imports its images folder with the same importer):
// Debian's containerd, started on a socket in a temporary directory. Every
// archive imports under its name, containerd's manifest names the same
// configuration and layers as the layout, and the amd64 images run with
// runc as the user their configuration names (nonroot 65532: the base
// layer's /etc/passwd resolves it) and print their version.
func TestContainerdImport(t *testing.T) {
	b := open(t)
	ctrd, err1 := exec.LookPath("containerd")
	ctrBin, err2 := exec.LookPath("ctr")
	if err1 != nil || err2 != nil {
		t.Skipf("containerd or ctr is not installed (Debian's containerd; `make test-images` installs it when run as root): %v %v", err1, err2)
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root here")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "ctd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "containerd.sock")
	cfg := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"+
		"[grpc]\n  address = %q\n[ttrpc]\n  address = %q\n[debug]\n  address = \"\"\n[metrics]\n  address = \"\"\n",
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	daemon := exec.Command(ctrd, "--config", filepath.Join(dir, "config.toml"))
	daemon.Stdout, daemon.Stderr = logf, logf
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		daemon.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { daemon.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			daemon.Process.Kill()
			<-done
		}
	})
	ctr := func(args ...string) (string, error) {
		c := exec.CommandContext(ctx, ctrBin, append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
		out, err := c.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := ctr("version"); err == nil {
			break
		} else if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Fatalf("containerd did not answer: %v\n%s", err, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Native snapshotter: overlayfs may not mount inside this sandbox;
	// K3s uses overlayfs, which changes nothing about the import.
	const snap = "native"
	for _, comp := range want() {
		cs := summary(t, b, comp.Name)
		for _, p := range comp.Platforms {
			plat := ociimage.PlatformString(p)
			ps := platformSummary(t, cs, plat)
			// K3s imports with all platforms (an arm64 archive on an amd64 node
			// still imports); unpacking only makes sense for this machine's.
			args := []string{"images", "import", "--all-platforms", "--snapshotter", snap}
			if p.Architecture != "amd64" {
				args = append(args, "--no-unpack")
			}
			if out, err := ctr(append(args, filepath.Join(b.dir, ps.Archive))...); err != nil {
				t.Errorf("%s %s: %v", comp.Name, plat, err)
				continue
			} else {
				t.Logf("%s %s: %s", comp.Name, plat, strings.TrimSpace(out))
			}
			ls, err := ctr("images", "ls")
			if err != nil {
				t.Fatal(err)
			}
			var target string
			for _, line := range strings.Split(ls, "\n") {
				if f := strings.Fields(line); len(f) >= 3 && f[0] == cs.Image {
					target = f[2]
				}
			}
			if target == "" {
				t.Errorf("%s %s: containerd lists no %s:\n%s", comp.Name, plat, cs.Image, ls)
				continue
			}
			raw, err := ctr("content", "get", target)
			if err != nil {
				t.Fatal(err)
			}
			var m v1.Manifest
			if err := json.Unmarshal([]byte(raw), &m); err != nil {
				t.Fatalf("%s %s: containerd's manifest %s: %v", comp.Name, plat, target, err)
			}
			lay, err := b.image(t, comp.Name, p).Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.Config.Digest != lay.Config.Digest || len(m.Layers) != len(lay.Layers) {
				t.Errorf("%s %s: containerd's image has config %s and %d layers; the layout's %s and %d", comp.Name, plat, m.Config.Digest, len(m.Layers), lay.Config.Digest, len(lay.Layers))
			}
			for j := range min(len(m.Layers), len(lay.Layers)) {
				if m.Layers[j].Digest != lay.Layers[j].Digest {
					t.Errorf("%s %s: layer %d %s in containerd, %s in the layout", comp.Name, plat, j, m.Layers[j].Digest, lay.Layers[j].Digest)
				}
			}
			if p.Architecture != "amd64" {
				continue
			}
			id := "t-" + comp.Name
			out, err := ctr("run", "--rm", "--snapshotter", snap, cs.Image, id, ociimage.BinDir+"/"+comp.Name, "--version")
			if err != nil {
				t.Errorf("%s: ctr run: %v", comp.Name, err)
				continue
			}
			t.Logf("ctr run %s: %s", cs.Image, strings.TrimSpace(out))
			if !strings.Contains(out, b.sum.Commit) && comp.Name != "nats-server" {
				t.Errorf("%s in containerd printed %q, want the commit %s", comp.Name, out, b.sum.Commit)
			}
		}
	}
}
