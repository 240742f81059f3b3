package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/message"
)

// ErrBadBatch reports bytes that DecodeBatch cannot read.
var ErrBadBatch = errors.New("wal: malformed batch")

const batchVersion = 1

// Per-message presence flags.
const (
	hasKey = 1 << iota
	hasTimestamp
	hasIngestTime
	knownFlags = hasKey | hasTimestamp | hasIngestTime
)

// EncodeBatch appends the encoding of b to dst: each message's payload and
// metadata (key, source, partition, offset, timestamps, fields). A message
// holding only a structured value is encoded as its JSON payload, which is
// then cached in b's message, as Message.Payload does. Times keep their
// instant, not their location or monotonic reading.
func EncodeBatch(dst []byte, b message.Batch) ([]byte, error) {
	dst = append(dst, batchVersion)
	dst = binary.AppendUvarint(dst, uint64(len(b.Messages)))
	for i := range b.Messages {
		m := &b.Messages[i]
		p, err := m.Payload()
		if err != nil {
			return dst, fmt.Errorf("wal: encode message %d: %w", i, err)
		}
		md := &m.Meta
		var flags uint64
		if md.Key != nil {
			flags |= hasKey
		}
		if !md.Timestamp.IsZero() {
			flags |= hasTimestamp
		}
		if !md.IngestTime.IsZero() {
			flags |= hasIngestTime
		}
		dst = binary.AppendUvarint(dst, flags)
		dst = appendBytes(dst, p)
		if md.Key != nil {
			dst = appendBytes(dst, md.Key)
		}
		dst = appendString(dst, md.Source)
		dst = binary.AppendVarint(dst, int64(md.Partition))
		dst = binary.AppendVarint(dst, md.Offset)
		if flags&hasTimestamp != 0 {
			dst = appendTime(dst, md.Timestamp)
		}
		if flags&hasIngestTime != 0 {
			dst = appendTime(dst, md.IngestTime)
		}
		dst = binary.AppendUvarint(dst, uint64(len(md.Fields)))
		for k, v := range md.Fields {
			dst = appendString(dst, k)
			dst = appendString(dst, v)
		}
	}
	return dst, nil
}

// DecodeBatch decodes what EncodeBatch wrote. Payloads and keys alias data,
// which the caller must then leave unchanged.
func DecodeBatch(data []byte) (message.Batch, error) {
	d := decoder{p: data}
	if v := d.byte(); d.err == nil && v != batchVersion {
		return message.Batch{}, fmt.Errorf("%w: version %d", ErrBadBatch, v)
	}
	n := d.count()
	var b message.Batch
	var source string
	if n > 0 {
		b.Messages = make([]message.Message, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		flags := d.uvarint()
		if flags&^knownFlags != 0 {
			d.fail()
		}
		m := message.New(d.bytes())
		if flags&hasKey != 0 {
			m.Meta.Key = d.bytes()
		}
		if src := d.bytes(); string(src) != source { // messages of a batch usually share it
			source = string(src)
		}
		m.Meta.Source = source
		part := d.varint()
		if part != int64(int32(part)) {
			d.fail()
		}
		m.Meta.Partition = int32(part)
		m.Meta.Offset = d.varint()
		if flags&hasTimestamp != 0 {
			m.Meta.Timestamp = d.time()
		}
		if flags&hasIngestTime != 0 {
			m.Meta.IngestTime = d.time()
		}
		if nf := d.count(); nf > 0 {
			m.Meta.Fields = make(map[string]string, nf)
			for range nf {
				k := string(d.bytes())
				m.Meta.Fields[k] = string(d.bytes())
			}
		}
		b.Messages = append(b.Messages, m)
	}
	if d.err == nil && len(d.p) != 0 {
		d.fail()
	}
	if d.err != nil {
		return message.Batch{}, fmt.Errorf("%w at byte %d", ErrBadBatch, len(data)-len(d.p))
	}
	return b, nil
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

// decoder reads a batch; after the first error every read returns zero.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = ErrBadBatch
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.p) == 0 {
		d.fail()
		return 0
	}
	c := d.p[0]
	d.p = d.p[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

// count reads an element count, which cannot exceed the bytes left since
// every element takes at least one.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.p)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	b := d.p[:n:n]
	d.p = d.p[n:]
	return b
}

func (d *decoder) time() time.Time {
	sec := d.varint()
	nsec := d.uvarint()
	if nsec >= uint64(time.Second) {
		d.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec))
}
