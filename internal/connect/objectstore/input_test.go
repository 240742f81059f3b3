package objectstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/message"
)

// bucketDir makes a directory holding name -> content files.
func bucketDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func connected(t *testing.T, conf map[string]any) (*Input, context.Context) {
	t.Helper()
	in := newInput(t, conf)
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	return in, ctx
}

func TestInputCodecs(t *testing.T) {
	dir := bucketDir(t, map[string][]byte{
		"b.txt":                        []byte("b1\r\nb2\n\nb4"),
		"a.txt":                        []byte("a1\na2\n"),
		"c.txt.gz":                     gz(t, "c1\nc2\n"),
		"d/empty":                      nil,
		"j.json":                       []byte(`[{"x":1}, 2, "s"]`),
		"w.bin":                        []byte("whole\nobject"),
		"x.jsonl.1a2b3c4d5e6f7a8b.tmp": []byte("in progress\n"),
		"_pending/sink-0/u":            []byte("uncommitted\n"),
	})
	tests := []struct {
		name string
		conf map[string]any
		want []string
	}{
		{"lines in key order", map[string]any{"prefix": "", "batch_size": float64(2)},
			[]string{"a1", "a2", "b1", "b2", "", "b4", "c1", "c2", `[{"x":1}, 2, "s"]`, "whole", "object"}},
		{"json_array", map[string]any{"prefix": "j", "codec": "json_array"}, []string{`{"x":1}`, "2", `"s"`}},
		{"whole", map[string]any{"prefix": "w", "codec": "whole"}, []string{"whole\nobject"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.conf["url"] = "file://" + dir
			in, ctx := connected(t, tt.conf)
			got := readAll(t, ctx, in, 100, ackNil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestInputMetadataAndBatches(t *testing.T) {
	dir := bucketDir(t, map[string][]byte{"k1": []byte("a\nb\nc\n"), "k2": []byte("d\n")})
	in, ctx := connected(t, map[string]any{"url": "file://" + dir, "batch_size": float64(2)})
	var got []string
	for range 3 {
		b, ack, err := in.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, m := range b.Messages {
			s = append(s, fmt.Sprintf("%s/%d/%s", m.Meta.Source, m.Meta.Offset, m.Meta.Fields["object_key"]))
		}
		got = append(got, strings.Join(s, " "))
		_ = ack(ctx, nil)
	}
	want := []string{"k1/0/k1 k1/1/k1", "k1/2/k1", "k2/0/k2"} // a batch holds one object's records
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestInputRedeliversAndDeletesOnlyWhenAllAcked: a failed batch comes
// back; the object is deleted only once its every batch was acknowledged.
func TestInputRedeliversAndDeletesOnlyWhenAllAcked(t *testing.T) {
	dir := bucketDir(t, map[string][]byte{"o": []byte("1\n2\n3\n")})
	in, ctx := connected(t, map[string]any{"url": "file://" + dir, "batch_size": float64(1), "delete_after_read": true})
	var acks []message.AckFunc
	for range 3 {
		_, ack, err := in.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ack)
	}
	exists := func() bool { _, err := os.Stat(filepath.Join(dir, "o")); return err == nil }
	_ = acks[0](ctx, nil)
	_ = acks[1](ctx, errors.New("downstream failed"))
	_ = acks[2](ctx, nil)
	b, ack, err := in.Read(ctx) // the redelivery
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := b.Messages[0].Payload(); string(p) != "2" {
		t.Errorf("redelivered %q, want 2", p)
	}
	if !exists() {
		t.Fatal("object deleted before its failed batch was acknowledged")
	}
	if _, _, err := in.Read(ctx); !errors.Is(err, message.ErrEndOfInput) {
		t.Fatalf("Read = %v, want end of input", err)
	}
	_ = ack(ctx, nil)
	if exists() {
		t.Error("object kept after every batch was acknowledged")
	}
}

func TestInputSkipsCorruptObjects(t *testing.T) {
	good := gz(t, "g1\ng2\n")
	dir := bucketDir(t, map[string][]byte{
		"l/1-bad.gz":      []byte("not gzip at all"),
		"l/2-cut.gz":      good[:len(good)-6],
		"l/3-good.gz":     good,
		"j/1-bad.json":    []byte(`{"not": "an array"}`),
		"j/2-bad.json.gz": []byte("nope"),
		"j/3-good.json":   []byte(`[1]`),
	})
	in, ctx := connected(t, map[string]any{"url": "file://" + dir, "prefix": "l/", "delete_after_read": true})
	got := readAll(t, ctx, in, 20, ackNil)
	// The cut object yields what decodes before the cut, if anything.
	if n := len(got); n < 2 || got[n-2] != "g1" || got[n-1] != "g2" {
		t.Errorf("got %q, want the good object's records last", got)
	}
	in, ctx = connected(t, map[string]any{"url": "file://" + dir, "prefix": "j/", "codec": "json_array", "delete_after_read": true})
	if diff := cmp.Diff([]string{"1"}, readAll(t, ctx, in, 20, ackNil)); diff != "" {
		t.Errorf("json_array (-want +got):\n%s", diff)
	}
	want := []string{"j/1-bad.json", "j/2-bad.json.gz", "l/1-bad.gz", "l/2-cut.gz"}
	got = keys(fileObjects(t, dir))
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects left (-want +got): want the corrupt ones kept, the good ones deleted\n%s", diff)
	}
}

func TestInputPollsForNewObjects(t *testing.T) {
	dir := bucketDir(t, map[string][]byte{"1": []byte("one\n")})
	in, ctx := connected(t, map[string]any{"url": "file://" + dir, "poll_interval": "10ms"})
	first := readN(t, ctx, in, 1)
	if err := os.WriteFile(filepath.Join(dir, "0"), []byte("zero\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A key sorting before those already read is still new.
	second := readN(t, ctx, in, 1)
	if diff := cmp.Diff([]string{"one", "zero"}, append(first, second...)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func readN(t *testing.T, ctx context.Context, in *Input, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		b, ack, err := in.Read(ctx)
		if err != nil {
			t.Fatalf("Read after %q: %v", got, err)
		}
		for _, m := range b.Messages {
			p, _ := m.Payload()
			got = append(got, string(p))
		}
		_ = ack(ctx, nil)
	}
	return got
}

// TestInputPositionSeek: an input restored from a position continues
// with the next record, inside an object or after it.
func TestInputPositionSeek(t *testing.T) {
	dir := bucketDir(t, map[string][]byte{"a": []byte("a1\na2\na3\n"), "b": []byte("b1\n"), "c": []byte("c1\n")})
	conf := func() map[string]any { return map[string]any{"url": "file://" + dir, "batch_size": float64(2)} }
	all := []string{"a1", "a2", "a3", "b1", "c1"}
	for reads := range 5 {
		t.Run(fmt.Sprint(reads), func(t *testing.T) {
			in, ctx := connected(t, conf())
			var got []string
			for range reads {
				b, ack, err := in.Read(ctx)
				if errors.Is(err, message.ErrEndOfInput) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range b.Messages {
					p, _ := m.Payload()
					got = append(got, string(p))
				}
				_ = ack(ctx, nil)
			}
			pos, err := in.Position()
			if err != nil {
				t.Fatal(err)
			}
			again, ctx2 := connected(t, conf())
			if err := again.Seek(ctx2, pos); err != nil {
				t.Fatal(err)
			}
			got = append(got, readAll(t, ctx2, again, 20, ackNil)...)
			if diff := cmp.Diff(all, got); diff != "" {
				t.Errorf("position %s (-want +got):\n%s", pos, diff)
			}
		})
	}
	if err := newInput(t, conf()).Seek(context.Background(), []byte(`{"key":"a","records":-1}`)); err == nil {
		t.Error("Seek accepted a negative record count")
	}
}

func TestInputConnectMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	in := newInput(t, map[string]any{"url": "file://" + dir})
	ctx := testCtx(t)
	err := in.Connect(ctx)
	if err == nil || !strings.Contains(err.Error(), "object_store input: open file://"+dir) {
		t.Fatalf("Connect = %v, want an error naming the bucket", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := in.Connect(ctx); err != nil { // callable again
		t.Fatal(err)
	}
	if got := readAll(t, ctx, in, 5, ackNil); len(got) != 0 {
		t.Errorf("read %q from an empty bucket", got)
	}
	_ = in.Close(ctx)
}

// TestInputResumesAtByteOffset: after a failed read, a plain lines
// object is opened again at the byte after the records emitted instead of
// being read again from its start; a gzip one skips records. The objects
// are rewritten in between so that the two ways give different records.
func TestInputResumesAtByteOffset(t *testing.T) {
	for _, tc := range []struct {
		key  string
		data func(string) []byte
		want []string
	}{
		{"plain", func(s string) []byte { return []byte(s) }, []string{"l1", "o", "l1", "l2"}},
		{"zipped.gz", func(s string) []byte { return gz(t, s) }, []string{"l1", "l1", "l2"}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			dir := bucketDir(t, map[string][]byte{tc.key: tc.data("l1\nl2\n")})
			in, ctx := connected(t, map[string]any{"url": "file://" + dir, "batch_size": float64(1)})
			got := readN(t, ctx, in, 1)
			in.closeReader() // as after a read error
			if err := os.WriteFile(filepath.Join(dir, tc.key), tc.data("zero\nl1\nl2\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got = append(got, readAll(t, ctx, in, 10, ackNil)...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
