package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The users of the base layer: root, and the unprivileged user every
// component but the agent runs as (the chart's runAsUser, 65532 as in
// distroless's "nonroot").
const (
	NonrootUID  = 65532
	NonrootName = "nonroot"
	NonrootHome = "/home/nonroot"
)

// BinDir is where a program lives in its image; the entrypoint is
// BinDir/NAME.
const BinDir = "/usr/local/bin"

// CACertsPath is where the base layer puts the CA bundle (Go's crypto/x509
// reads it on Linux).
const CACertsPath = "/etc/ssl/certs/ca-certificates.crt"

// gzipLevel is the compression of every layer. Changing it changes every
// digest.
const gzipLevel = gzip.BestCompression

// Entry is one file or directory of a layer.
type Entry struct {
	Path     string // absolute, cleaned, e.g. /etc/passwd
	Dir      bool   // a directory (Data is ignored)
	Mode     int64  // permission bits, e.g. 0o755; sticky is 0o1000
	UID, GID int
	Data     []byte
}

// Tar returns the entries as a tar stream: sorted by path, parent
// directories before their contents, every header stamped with mtime and
// no user or group names, so equal entries give equal bytes. It refuses
// relative, unclean or duplicate paths.
func Tar(entries []Entry, mtime time.Time) ([]byte, error) {
	es := slices.Clone(entries)
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range es {
		if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || e.Path == "/" {
			return nil, fmt.Errorf("tar entry %q: %w", e.Path, ErrBadPath)
		}
		if i > 0 && es[i-1].Path == e.Path {
			return nil, fmt.Errorf("tar entry %q: %w", e.Path, ErrDuplicatePath)
		}
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.Path, "/"),
			Mode:    e.Mode,
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: mtime.UTC().Truncate(time.Second),
			Format:  tar.FormatPAX,
		}
		if e.Dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar entry %q: %w", e.Path, err)
		}
		if !e.Dir {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, fmt.Errorf("tar entry %q: %w", e.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// withParents adds the missing parent directories of entries (root
// owned, 0755).
func withParents(entries []Entry) []Entry {
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Path] = true
	}
	out := slices.Clone(entries)
	for _, e := range entries {
		for d := path.Dir(e.Path); d != "/"; d = path.Dir(d) {
			if !have[d] {
				have[d] = true
				out = append(out, Entry{Path: d, Dir: true, Mode: 0o755})
			}
		}
	}
	return out
}

// BaseEntries are the base layer's files: the users, the name service
// order, the CA bundle caCerts (PEM; required: the coordinator and the
// agents speak TLS to NATS and the scheduler to the API server), the
// nonroot user's home and /tmp.
func BaseEntries(caCerts []byte) ([]Entry, error) {
	if !bytes.Contains(caCerts, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("%w: no PEM certificate in the CA bundle", ErrConfig)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n",
		NonrootName, NonrootUID, NonrootUID, NonrootName, NonrootHome)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", NonrootName, NonrootUID)
	return withParents([]Entry{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		// Go's resolver reads the order; files first, as glibc's default.
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: CACertsPath, Mode: 0o644, Data: caCerts},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: NonrootHome, Dir: true, Mode: 0o700, UID: NonrootUID, GID: NonrootUID},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
	}), nil
}

// BinaryEntries is the program layer: bin at BinDir/name.
func BinaryEntries(name string, bin []byte) []Entry {
	return withParents([]Entry{{Path: path.Join(BinDir, name), Mode: 0o755, Data: bin}})
}

// NewLayer is the OCI layer (tar+gzip) of entries, compressed once and
// held in memory.
func NewLayer(entries []Entry, mtime time.Time) (v1.Layer, error) {
	raw, err := Tar(entries, mtime)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzipLevel)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	blob := gz.Bytes()
	// The opener hands back the gzip stream: go-containerregistry uses it
	// as the compressed blob as is and decompresses it for the diff ID.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
