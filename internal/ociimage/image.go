package ociimage

import (
	"fmt"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotation and label keys the images carry (OCI image-spec
// annotations; containerd names imported images by the second).
const (
	AnnotationRefName    = "org.opencontainers.image.ref.name"
	AnnotationImageName  = "io.containerd.image.name"
	AnnotationCreated    = "org.opencontainers.image.created"
	AnnotationRevision   = "org.opencontainers.image.revision"
	AnnotationVersion    = "org.opencontainers.image.version"
	AnnotationSource     = "org.opencontainers.image.source"
	AnnotationTitle      = "org.opencontainers.image.title"
	AnnotationDesc       = "org.opencontainers.image.description"
	AnnotationLicenses   = "org.opencontainers.image.licenses"
	sourceURL            = "https://github.com/edgesched/edgesched"
	licenses             = "Apache-2.0"
	defaultPathVariable  = "PATH=/usr/local/bin:/usr/bin:/bin"
	defaultSSLCertEnvVar = "SSL_CERT_FILE=" + CACertsPath
)

// Meta is what every image of a build records about its source.
type Meta struct {
	Version string    // release version (git describe)
	Commit  string    // full commit hash
	Created time.Time // the commit's time (SOURCE_DATE_EPOCH)
}

// ImageSpec is one component's image for one platform.
type ImageSpec struct {
	Name        string      // program name, e.g. edge-agent; the entrypoint is BinDir/Name
	Description string      // org.opencontainers.image.description
	User        string      // "UID:GID" the container runs as unless the pod says otherwise
	Platform    v1.Platform // OS, Architecture, Variant
}

// NewImage assembles the OCI image of spec from the shared base layer and
// the program's binary.
func NewImage(spec ImageSpec, base v1.Layer, bin []byte, meta Meta) (v1.Image, error) {
	if spec.Name == "" || strings.Contains(spec.Name, "/") {
		return nil, fmt.Errorf("%w: image name %q", ErrConfig, spec.Name)
	}
	entry := path.Join(BinDir, spec.Name)
	prog, err := NewLayer(BinaryEntries(spec.Name, bin), meta.Created)
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", spec.Name, err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: meta.Created.UTC()}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "edgesched base: users root and nonroot (65532), CA certificates, /tmp", Comment: "internal/ociimage"}},
		mutate.Addendum{Layer: prog, History: v1.History{Created: created, CreatedBy: "COPY " + spec.Name + " " + entry, Comment: "internal/ociimage"}},
	)
	if err != nil {
		return nil, fmt.Errorf("layers of %s: %w", spec.Name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Variant = spec.Platform.Architecture, spec.Platform.OS, spec.Platform.Variant
	cf.Created = created
	cf.Author = "edgesched"
	cf.Config = v1.Config{
		Entrypoint: []string{entry},
		User:       spec.User,
		Env:        []string{defaultPathVariable, defaultSSLCertEnvVar},
		WorkingDir: "/",
		Labels:     labels(spec, meta),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return img, nil
}

// labels are the image configuration's labels (the same as the index's
// annotations, minus the names).
func labels(spec ImageSpec, meta Meta) map[string]string {
	return map[string]string{
		AnnotationCreated:  meta.Created.UTC().Format(time.RFC3339),
		AnnotationRevision: meta.Commit,
		AnnotationVersion:  meta.Version,
		AnnotationSource:   sourceURL,
		AnnotationTitle:    spec.Name,
		AnnotationDesc:     spec.Description,
		AnnotationLicenses: licenses,
	}
}

// NewIndex is the multi-platform OCI image index of one component's
// images, in the order given (platforms sorted by the caller).
func NewIndex(specs []ImageSpec, imgs []v1.Image, meta Meta) (v1.ImageIndex, error) {
	if len(specs) != len(imgs) || len(specs) == 0 {
		return nil, fmt.Errorf("%w: %d specs for %d images", ErrConfig, len(specs), len(imgs))
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range imgs {
		p := specs[i].Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &p},
		})
	}
	a := labels(specs[0], meta)
	return mutate.Annotations(idx, a).(v1.ImageIndex), nil
}

// PlatformString is OS/ARCH[/VARIANT], as docker and containerd write it.
func PlatformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// platformDir is OS_ARCH[_VARIANT], a file-name-safe PlatformString.
func platformDir(p v1.Platform) string {
	return strings.ReplaceAll(PlatformString(p), "/", "_")
}
