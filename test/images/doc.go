// Package images checks the container images `make images` builds
// (internal/ociimage), without a cluster: `make test-images` builds them
// (once per commit; an unchanged build is reused) and runs these tests with
// EDGESCHED_IMAGES_DIR naming the output directory. Without that variable
// every test skips and says so (`go test ./...` does not build images).
//
// They open the OCI layout and every per-platform archive with the library
// that wrote them (go-containerregistry) and check:
//
//   - each component's multi-platform index: its platforms, and each image's
//     entrypoint, user (nonroot 65532 for all but edge-agent, which runs as
//     root so that its only two added capabilities, CAP_BPF and CAP_PERFMON,
//     are effective: docs/quickstart-k3s.md), base files and labels;
//   - the archives: the same images as the layout, named REGISTRY/NAME:TAG;
//   - the amd64 binaries taken out of the images run --version and report
//     the commit; the arm64 and arm/v7 binaries are static ELF files for
//     their machine, built with CGO_ENABLED=0 and -trimpath;
//   - compressed sizes within the goals (agent 35 MB, scheduler 70 MB);
//   - with Debian's containerd and runc (installed by `make test-images` as
//     root; skipped with the reason otherwise): every archive imported as K3s
//     imports its images folder, containerd's manifest naming the layout's
//     configuration and layers, and each amd64 image run with `ctr run` as
//     the user its configuration names, printing its version;
//   - under Debian's qemu-user-static when it is installed (`make
//     test-images` installs it as root; otherwise the tests skip with the
//     reason): the arm64 agent and scheduler (and the arm/v7 agent) run
//     --version, and the unit tests of quant, quant/int8net and policy pass as arm64
//     binaries (`go test -exec qemu-aarch64-static`).
//
// Timing under emulation means nothing about a real arm64 core and is not
// measured here (docs/quickstart-k3s.md, "int8 on arm64").
package images
