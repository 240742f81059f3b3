package dataplane

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire format: every frame is a 9-byte header, payload length (uint32,
// big endian), stream id (uint32) and type (uint8), then the payload. Types
// 1 to 6 are the data kinds (Kind); the others are the link's own. Stream
// ids are chosen by the stream's sender, so the two directions of a link
// have separate id spaces: open, data and close frames name the id of a
// stream their writer sends, credit and release frames the id of a stream
// their writer receives.
const headerLen = 9

// Link frame types.
const (
	typeOpen      uint8 = 0x40 // sender → receiver: name and label of a new stream
	typeCredit    uint8 = 0x41 // receiver → sender: uint32 more frames allowed
	typeClose     uint8 = 0x42 // sender → receiver: no more frames on the stream
	typeRelease   uint8 = 0x43 // receiver → sender: the receiver closed, stop sending
	typeHeartbeat uint8 = 0x44 // either way, stream 0: still here
	typeRefuse    uint8 = 0x45 // either way, stream 0: reason, then the connection closes
	typeHello     uint8 = 0x50 // dialer: version, job, from, to, nonce
	typeChallenge uint8 = 0x51 // acceptor: nonce, proof
	typeProof     uint8 = 0x52 // dialer: proof
	typeAccept    uint8 = 0x53 // acceptor: the link is up
)

// Bounds of the link's own payloads, checked before anything is allocated.
const (
	maxName       = 1024 // stream name or label, bytes
	maxID         = 256  // job or node id, bytes
	maxReason     = 256  // refuse reason, bytes
	maxHandshake  = 4 + 3*(2+maxID) + 2*nonceLen + 64
	maxOpenFrame  = 2 * (2 + maxName)
	nonceLen      = 32
	proofLen      = 32
	protocolVer   = 1
	creditPayload = 4
)

// errProtocol is wrapped by every malformed-input error of a link.
var errProtocol = errors.New("dataplane: protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, args...))
}

// header is a decoded frame header.
type header struct {
	n   uint32 // payload length
	id  uint32
	typ uint8
}

func isData(typ uint8) bool { return typ >= uint8(KindBatch) && typ <= uint8(KindControl) }

// appendHeader appends a frame header to b.
func appendHeader(b []byte, n int, id uint32, typ uint8) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(b, typ)
}

// appendFrame appends a whole frame to b.
func appendFrame(b []byte, id uint32, typ uint8, payload []byte) []byte {
	return append(appendHeader(b, len(payload), id, typ), payload...)
}

// maxPayload is the largest payload a frame of type typ may carry on a link
// whose data frames are bounded by maxFrame; -1 for an unknown type.
func maxPayload(typ uint8, maxFrame int) int {
	switch {
	case isData(typ):
		return maxFrame
	case typ == typeOpen:
		return maxOpenFrame
	case typ == typeCredit:
		return creditPayload
	case typ == typeClose, typ == typeRelease, typ == typeHeartbeat, typ == typeAccept:
		return 0
	case typ == typeRefuse:
		return maxReason
	case typ == typeHello, typ == typeChallenge, typ == typeProof:
		return maxHandshake
	}
	return -1
}

// decoder reads frames from a connection. It checks every header against
// the bounds of its type before the payload is allocated, so hostile bytes
// cost at most maxFrame bytes of memory per frame.
type decoder struct {
	r        *bufio.Reader
	maxFrame int
	hdr      [headerLen]byte
}

// Read buffer sizes: a connection reads its handshake through a small
// buffer (a handshake frame is under 1 KiB) and gets the large one only
// once its peer is authenticated, so a connection that never authenticates
// costs little.
const (
	handshakeBuffer = 1 << 10
	linkBuffer      = 64 << 10
)

func newDecoder(r io.Reader, maxFrame int) *decoder {
	return &decoder{r: bufio.NewReaderSize(r, handshakeBuffer), maxFrame: maxFrame}
}

// authenticated raises the decoder's bounds for a link: frames up to
// maxFrame, read through the large buffer (which drains the small one
// first: nothing read ahead is lost).
func (d *decoder) authenticated(maxFrame int) {
	d.maxFrame = maxFrame
	d.r = bufio.NewReaderSize(d.r, linkBuffer)
}

// readHeader reads and checks the next frame header. io.EOF means the
// connection ended between frames.
func (d *decoder) readHeader() (header, error) {
	if _, err := io.ReadFull(d.r, d.hdr[:]); err != nil {
		return header{}, err
	}
	h := header{
		n:   binary.BigEndian.Uint32(d.hdr[0:4]),
		id:  binary.BigEndian.Uint32(d.hdr[4:8]),
		typ: d.hdr[8],
	}
	limit := maxPayload(h.typ, d.maxFrame)
	if limit < 0 {
		return h, protoErr("unknown frame type %#x", h.typ)
	}
	if uint64(h.n) > uint64(limit) {
		return h, protoErr("frame type %#x of %d bytes over its limit %d", h.typ, h.n, limit)
	}
	if h.typ == typeCredit && h.n != creditPayload {
		return h, protoErr("credit frame of %d bytes", h.n)
	}
	return h, nil
}

// readPayload reads the payload of h into a new slice (nil when empty).
func (d *decoder) readPayload(h header) ([]byte, error) {
	if h.n == 0 {
		return nil, nil
	}
	p := make([]byte, h.n)
	if _, err := io.ReadFull(d.r, p); err != nil {
		return nil, unexpected(err)
	}
	return p, nil
}

// discard skips the payload of h.
func (d *decoder) discard(h header) error {
	_, err := d.r.Discard(int(h.n))
	return unexpected(err)
}

// next reads one whole frame.
func (d *decoder) next() (header, []byte, error) {
	h, err := d.readHeader()
	if err != nil {
		return h, nil, err
	}
	p, err := d.readPayload(h)
	return h, p, err
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// fields is a cursor over a payload of length-prefixed strings and fixed
// byte runs. The first problem sticks; callers check err once.
type fields struct {
	b   []byte
	err error
}

func (f *fields) str(limit int) string {
	if f.err != nil {
		return ""
	}
	if len(f.b) < 2 {
		f.err = protoErr("short string")
		return ""
	}
	n := int(binary.BigEndian.Uint16(f.b))
	if n > limit || len(f.b) < 2+n {
		f.err = protoErr("string of %d bytes", n)
		return ""
	}
	s := string(f.b[2 : 2+n])
	f.b = f.b[2+n:]
	return s
}

func (f *fields) bytes(n int) []byte {
	if f.err != nil {
		return nil
	}
	if len(f.b) < n {
		f.err = protoErr("short field")
		return nil
	}
	p := f.b[:n:n]
	f.b = f.b[n:]
	return p
}

// end checks that the payload was consumed exactly.
func (f *fields) end() error {
	if f.err == nil && len(f.b) != 0 {
		f.err = protoErr("%d trailing bytes", len(f.b))
	}
	return f.err
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// openPayload encodes a stream's name and label.
func openPayload(name, label string) []byte {
	return appendStr(appendStr(nil, name), label)
}

// parseOpen decodes an open frame's payload.
func parseOpen(p []byte) (name, label string, err error) {
	f := fields{b: p}
	name = f.str(maxName)
	label = f.str(maxName)
	if err := f.end(); err != nil {
		return "", "", err
	}
	if name == "" {
		return "", "", protoErr("open without a name")
	}
	return name, label, nil
}

// parseCredit decodes a credit frame's payload.
func parseCredit(p []byte) (uint32, error) {
	if len(p) != creditPayload {
		return 0, protoErr("credit frame of %d bytes", len(p))
	}
	return binary.BigEndian.Uint32(p), nil
}

// checkName rejects stream names and labels the wire cannot carry.
func checkName(what, s string, limit int) error {
	if s == "" && what == "name" {
		return fmt.Errorf("dataplane: empty stream name")
	}
	if len(s) > limit {
		return fmt.Errorf("dataplane: stream %s of %d bytes over %d", what, len(s), limit)
	}
	return nil
}
