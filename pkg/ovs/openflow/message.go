// Package openflow is the project's own OpenFlow 1.5 binding (with OpenFlow 1.3
// as fallback) and Nicira extensions, talking to Open vSwitch over its bridge's
// unix socket or TCP. It encodes and decodes messages, offers a typed builder
// for flows whose String() is the text `ovs-ofctl -O OpenFlow15 dump-flows`
// prints, and a connection that negotiates the version, keeps the channel alive,
// matches replies and errors to requests by xid, and writes batches as atomic
// bundles. References: the OpenFlow 1.5.1 specification and Open vSwitch's
// include/openflow/{openflow-1.5.h,nicira-ext.h}.
package openflow

import "strconv"

// OpenFlow wire versions (ofp_header.version).
const (
	Version13 uint8 = 0x04
	Version15 uint8 = 0x06
)

// HeaderLen is the size of ofp_header.
const HeaderLen = 8

// Header is ofp_header: every message starts with it.
type Header struct {
	Version uint8
	Type    uint8
	Length  uint16
	Xid     uint32
}

// Message is an OpenFlow message that a connection can send: the connection
// writes the header (version, type, length, xid) and the message its body.
type Message interface {
	// MsgType is the OFPT_* type of the message.
	MsgType() uint8
	// AppendBody appends the encoded body (everything after ofp_header) for the
	// negotiated version and returns the extended slice.
	AppendBody(b []byte, version uint8) ([]byte, error)
}

// Marshal encodes a whole message: header with the given version and xid, then body.
func Marshal(m Message, version uint8, xid uint32) ([]byte, error) {
	return AppendMessage(make([]byte, 0, 64), m, version, xid)
}

// AppendMessage appends a whole encoded message to b (for batching many
// messages into one write without extra allocations).
func AppendMessage(b []byte, m Message, version uint8, xid uint32) ([]byte, error) {
	start := len(b)
	b = append(b, version, m.MsgType(), 0, 0, byte(xid>>24), byte(xid>>16), byte(xid>>8), byte(xid))
	b, err := m.AppendBody(b, version)
	if err != nil {
		return b[:start], err
	}
	n := len(b) - start
	if n > 0xffff {
		return b[:start], errTooLong(n)
	}
	b[start+2], b[start+3] = byte(n>>8), byte(n)
	return b, nil
}

type errTooLong int

func (e errTooLong) Error() string {
	return "openflow: message of " + strconv.Itoa(int(e)) + " bytes exceeds 65535"
}
