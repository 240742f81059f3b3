package codec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/flowplane/flowplane/internal/sandbox"
)

// protoSource is the configuration shared by the protobuf codec and the
// protobuf processors: where the descriptors come from and which message
// they carry.
type protoSource struct {
	MessageType   string   `json:"message_type"`
	ProtoInputs   []string `json:"proto_inputs"`
	ProtoIncludes []string `json:"proto_includes"`
}

// protoSourceSchema is the schema of protoSource's fields.
func protoSourceSchema() map[string]any {
	return map[string]any{
		"message_type": prop("string", "The fully qualified message type, such as example.v1.Reading."),
		"proto_inputs": stringList("Where the descriptors come from: .proto files, directories (every .proto " +
			"under them), or descriptor sets (.pb, .desc, .binpb: a serialized FileDescriptorSet). Relative " +
			"paths are relative to the working directory."),
		"proto_includes": stringList("Directories searched for the imports of .proto files, besides the " +
			"directories of proto_inputs and the well-known types."),
	}
}

// isDescriptorSet reports whether path names a serialized
// FileDescriptorSet rather than a .proto source.
func isDescriptorSet(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".pb", ".desc", ".binpb", ".protoset":
		return true
	}
	return false
}

// load compiles the sources and returns the message descriptor of
// message_type.
// Every file is read through fsys.
func (s protoSource) load(ctx context.Context, fsys sandbox.FS) (protoreflect.MessageDescriptor, error) {
	if s.MessageType == "" {
		return nil, errors.New("message_type: required")
	}
	if len(s.ProtoInputs) == 0 {
		return nil, errors.New("proto_inputs: at least one path is required")
	}
	var (
		roots  []string // import paths: the includes, then the inputs' directories
		names  []string // .proto files to compile, relative to their root
		finder []func(protoreflect.FullName) (protoreflect.Descriptor, error)
	)
	roots = append(roots, s.ProtoIncludes...)
	for i, in := range s.ProtoInputs {
		st, err := fsys.Stat(in)
		if err != nil {
			return nil, fmt.Errorf("proto_inputs[%d]: %w", i, err)
		}
		switch {
		case st.IsDir():
			roots = append(roots, in)
			found := 0
			err := fsys.WalkDir(in, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || filepath.Ext(p) != ".proto" {
					return err
				}
				rel, err := filepath.Rel(in, p)
				if err != nil {
					return err
				}
				names = append(names, filepath.ToSlash(rel))
				found++
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("proto_inputs[%d]: %w", i, err)
			}
			if found == 0 {
				return nil, fmt.Errorf("proto_inputs[%d]: no .proto file under %s", i, in)
			}
		case isDescriptorSet(in):
			files, err := readDescriptorSet(fsys, in)
			if err != nil {
				return nil, fmt.Errorf("proto_inputs[%d]: %w", i, err)
			}
			finder = append(finder, files)
		default:
			dir, base := filepath.Split(in)
			if dir == "" {
				dir = "."
			}
			roots = append(roots, dir)
			names = append(names, base)
		}
	}
	if len(names) > 0 {
		c := protocompile.Compiler{
			Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: roots,
				Accessor: func(path string) (io.ReadCloser, error) { return fsys.Open(path) }}),
		}
		files, err := c.Compile(ctx, dedupe(names)...)
		if err != nil {
			return nil, fmt.Errorf("proto_inputs: %w", err)
		}
		r := files.AsResolver()
		finder = append([]func(protoreflect.FullName) (protoreflect.Descriptor, error){r.FindDescriptorByName}, finder...)
	}
	return findMessage(s.MessageType, finder)
}

// findMessage looks name up in each source in turn.
func findMessage(name string, finder []func(protoreflect.FullName) (protoreflect.Descriptor, error)) (protoreflect.MessageDescriptor, error) {
	for _, find := range finder {
		d, err := find(protoreflect.FullName(name))
		if err != nil {
			continue
		}
		md, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			return nil, fmt.Errorf("message_type: %q is not a message", name)
		}
		return md, nil
	}
	return nil, fmt.Errorf("message_type: %q not found in proto_inputs", name)
}

func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// readDescriptorSet reads a serialized FileDescriptorSet.
func readDescriptorSet(fsys sandbox.FS, path string) (func(protoreflect.FullName) (protoreflect.Descriptor, error), error) {
	b, err := fsys.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%s: not a FileDescriptorSet: %w", path, err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return files.FindDescriptorByName, nil
}

// compileSchema compiles one .proto source held in memory (a schema
// registry's schema text).
func compileSchema(ctx context.Context, text string) (protoreflect.FileDescriptor, error) {
	const name = "registry.proto"
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{name: text}),
		}),
	}
	files, err := c.Compile(ctx, name)
	if err != nil {
		return nil, err
	}
	return files[0], nil
}
