package federated

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MinServerVersion is the oldest nats-server edgesched supports
// (docs/federated.md "NATS server versions"): 2.9.0 brought direct gets,
// which sites read the state bucket and the model store with (they may
// create no consumers), and the pull-request features of the jetstream
// client package. Tested against 2.9.10 (Debian's package) and the
// version go.mod pins (test/fl/natsversion_test.go).
const MinServerVersion = "2.9.0"

// ErrServerVersion: the connected nats-server is older than
// MinServerVersion, or did not say its version.
var ErrServerVersion = errors.New("federated: unsupported nats-server")

// Version is a nats-server release (major.minor.patch; a pre-release
// suffix such as "-beta.2" is ignored).
type Version struct{ Major, Minor, Patch int }

// ParseVersion reads "2.9.10" or "v2.11.0-RC.3".
func ParseVersion(s string) (Version, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("%w: version %q is not major.minor.patch", ErrServerVersion, s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("%w: version %q is not major.minor.patch", ErrServerVersion, s)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether the server version s is v or newer (false when
// s does not parse).
func AtLeast(s string, v Version) bool {
	got, err := ParseVersion(s)
	return err == nil && !got.Less(v)
}

// CheckServerVersion refuses a nats-server older than MinServerVersion
// with a message naming both versions and the server; version is what
// the connection reports (nats.Conn.ConnectedServerVersion), url where it
// is.
func CheckServerVersion(version, url string) error {
	if version == "" {
		return fmt.Errorf("%w: the server at %s did not say its version (not connected?)", ErrServerVersion, url)
	}
	got, err := ParseVersion(version)
	if err != nil {
		return fmt.Errorf("the server at %s: %w", url, err)
	}
	min, _ := ParseVersion(MinServerVersion)
	if got.Less(min) {
		return fmt.Errorf("%w: nats-server %s at %s is older than %s, the oldest edgesched supports (docs/federated.md \"NATS server versions\"); upgrade the server", ErrServerVersion, got, url, min)
	}
	return nil
}
