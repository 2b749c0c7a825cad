// Command protogen compiles .proto files with a Go-native protobuf
// compiler (github.com/bufbuild/protocompile) and hands them to
// protoc-gen-go (google.golang.org/protobuf/cmd/protoc-gen-go, a tool of
// go.mod run as `go tool protoc-gen-go`) the way protoc would: a
// CodeGeneratorRequest on its standard input, a CodeGeneratorResponse on
// its standard output. Both generators are pinned in go.mod, so `make
// generate` needs Go alone.
//
//	go run ./internal/protogen -I DIR -opt OPTIONS -out DIR FILE.proto...
//
// FILE names are relative to the import directory; OPTIONS is
// protoc-gen-go's parameter (e.g. paths=source_relative,Mfile.proto=pkg).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run() error {
	importDir := flag.String("I", ".", "import directory the .proto files are relative to")
	opt := flag.String("opt", "paths=source_relative", "protoc-gen-go's parameter")
	out := flag.String("out", ".", "directory to write the generated files into")
	plugin := flag.String("plugin", "go tool protoc-gen-go", "protoc-gen-go command line")
	flag.Parse()
	files := flag.Args()
	if len(files) == 0 {
		return fmt.Errorf("no .proto files given")
	}
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{*importDir}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(context.Background(), files...)
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	// protoc lists every file the request names, dependencies first.
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files, Parameter: proto.String(*opt)}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		add(f)
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	args := strings.Fields(*plugin)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stderr = bytes.NewReader(in), os.Stderr
	outb, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %w", *plugin, err)
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(outb, &resp); err != nil {
		return fmt.Errorf("%s: response: %w", *plugin, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%s: %s", *plugin, resp.GetError())
	}
	for _, f := range resp.File {
		path := filepath.Join(*out, filepath.FromSlash(f.GetName()))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}
