// Package ociimage builds edgesched's container images without a Docker
// daemon or a registry: statically linked Go binaries (CGO_ENABLED=0,
// -trimpath) on a minimal base this package constructs itself, assembled
// with go-containerregistry into OCI images (docs/quickstart-k3s.md,
// "Images").
//
// Every image has two layers:
//
//   - the base (BaseLayer), the same for every image and platform:
//     /etc/passwd and /etc/group with root (0) and nonroot (65532),
//     /etc/nsswitch.conf, the CA bundle at /etc/ssl/certs/ca-certificates.crt,
//     /home/nonroot and a world-writable, sticky /tmp;
//   - the program (BinaryLayer): /usr/local/bin/NAME, mode 0755.
//
// Reproducible: tar entries are sorted by name, owned by 0:0 (or the
// nonroot user's home by 65532), stamped with one fixed time (the
// commit's, SOURCE_DATE_EPOCH), compressed by compress/gzip at a fixed
// level, and the image configuration and history carry the same time, so
// the same commit, toolchain and flags give the same digests. Go builds
// themselves are reproducible with -trimpath and a fixed -ldflags (the
// build date is the commit's time, not the clock's).
//
// Build writes, under Config.Dir:
//
//   - bin/OS_ARCH[_VARIANT]/NAME: the binaries (each built once);
//   - oci/: one OCI image layout holding a multi-platform image index per
//     component, named by the org.opencontainers.image.ref.name and
//     io.containerd.image.name annotations (REGISTRY/NAME:TAG);
//   - archives/NAME-OS-ARCH[-VARIANT].tar: one image per file in the
//     docker-archive format (`docker save`'s), which K3s imports from
//     /var/lib/rancher/k3s/agent/images/ and `k3s ctr images import` reads;
//   - images.json (Summary): digests and compressed sizes per platform,
//     and the key of the inputs, so an unchanged build is not redone;
//   - images.txt: REGISTRY/NAME@DIGEST per component, the list K3s pulls
//     from when dropped into its images folder (online import).
//
// Concurrency and lifetimes: Build runs one `go build` at a time (the go
// command parallelises itself) and owns every file it writes; it stops at
// the next step when ctx ends and leaves no half-written output under a
// final name (archives and images.json are written to a temporary name
// and renamed). Two Builds must not share a Dir. Images and layers
// returned by NewImage hold their compressed bytes in memory (tens of MB
// for the scheduler).
package ociimage
