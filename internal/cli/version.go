package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped at build time, e.g.
//
//	go build -ldflags "-X github.com/edgesched/edgesched/internal/cli.Version=v0.3.0 \
//	  -X github.com/edgesched/edgesched/internal/cli.Commit=$(git rev-parse HEAD) \
//	  -X github.com/edgesched/edgesched/internal/cli.Date=$(date -u +%FT%TZ)"
//
// Empty values are filled from the Go build information (Info).
var (
	Version string // release version (git describe); "" is reported as "dev"
	Commit  string // VCS commit; "" falls back to vcs.revision
	Date    string // build date (RFC 3339); "" falls back to vcs.time, the commit's time
)

// BuildInfo is what a binary reports about its own build.
// Its JSON (a version verb's -o json) follows docs/cli.md's convention.
type BuildInfo struct {
	Version   string `json:"version"`            // "dev" when neither stamped nor a tagged module version
	Commit    string `json:"commit"`             // full commit hash; "unknown" when neither stamped nor recorded
	Date      string `json:"date"`               // build date when stamped, else the commit's time; "unknown" when neither
	Modified  bool   `json:"modified,omitempty"` // the working tree had uncommitted changes (vcs.modified)
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// Info returns the binary's build information: the stamped variables,
// with what the Go toolchain recorded (debug.ReadBuildInfo) for those
// left empty. Test binaries record no VCS information.
func Info() BuildInfo {
	b := BuildInfo{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		fromBuild(&b, bi)
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

// fromBuild fills b's empty fields from the Go build information.
func fromBuild(b *BuildInfo, bi *debug.BuildInfo) {
	stamped := b.Commit != ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if b.Commit == "" {
				b.Commit = s.Value
			}
		case "vcs.time":
			if b.Date == "" {
				b.Date = s.Value
			}
		case "vcs.modified":
			if !stamped {
				b.Modified = s.Value == "true"
			}
		}
	}
	if v := bi.Main.Version; b.Version == "" && v != "" && v != "(devel)" {
		b.Version = v // go install module@version
	}
}

// Line is the one line --version and the version verb print, e.g.
//
//	edgectl v0.3.0 commit 824bacb1f7… (modified) built 2025-06-01T10:00:00Z go1.26.0 linux/amd64
func (b BuildInfo) Line(binary string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s %s commit %s", binary, b.Version, b.Commit)
	if b.Modified {
		s.WriteString(" (modified)")
	}
	fmt.Fprintf(&s, " built %s %s %s", b.Date, b.GoVersion, b.Platform)
	return s.String()
}

// IsVersionFlag reports whether arg asks for the version: --version,
// -version or --version=true.
func IsVersionFlag(arg string) bool {
	switch arg {
	case "--version", "-version", "--version=true", "-version=true":
		return true
	}
	return false
}

// ModuleVersion is the version of module path the binary was built with
// ("" when it is not a dependency or the build information is missing).
func ModuleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}
