package openflow

import (
	"encoding/binary"
	"fmt"
)

// OFPHET_VERSIONBITMAP: the hello element listing every version a side speaks
// (OpenFlow 1.5.1 section 7.5.1).
const helloElemVersionBitmap uint16 = 1

// Hello is OFPT_HELLO with a version bitmap element.
type Hello struct {
	// Versions are the wire versions offered; the header carries the highest.
	Versions []uint8
}

// MsgType implements Message.
func (*Hello) MsgType() uint8 { return TypeHello }

// AppendBody implements Message: one OFPHET_VERSIONBITMAP element with a
// single 32-bit bitmap word (enough for every version up to 1.5).
func (h *Hello) AppendBody(b []byte, _ uint8) ([]byte, error) {
	var bitmap uint32
	for _, v := range h.Versions {
		if v >= 32 {
			return b, fmt.Errorf("openflow: hello cannot offer version %#x", v)
		}
		bitmap |= 1 << v
	}
	b = binary.BigEndian.AppendUint16(b, helloElemVersionBitmap)
	b = binary.BigEndian.AppendUint16(b, 8)
	b = binary.BigEndian.AppendUint32(b, bitmap)
	return b, nil
}

// highestVersion is the version a hello's header must carry.
func highestVersion(vs []uint8) uint8 {
	var hi uint8
	for _, v := range vs {
		hi = max(hi, v)
	}
	return hi
}

// helloBitmap returns the version bitmap of a received hello, if it has one.
func helloBitmap(body []byte) (uint32, bool) {
	for len(body) >= 4 {
		typ, n := binary.BigEndian.Uint16(body[0:2]), int(binary.BigEndian.Uint16(body[2:4]))
		if n < 4 || n > len(body) {
			return 0, false
		}
		if typ == helloElemVersionBitmap && n >= 8 {
			return binary.BigEndian.Uint32(body[4:8]), true
		}
		// Elements are padded to 8 bytes.
		n = (n + 7) &^ 7
		if n > len(body) {
			return 0, false
		}
		body = body[n:]
	}
	return 0, false
}

// NegotiateVersion picks the version both sides speak, as OpenFlow 1.5.1
// section 6.3.1 says: the highest common version of both bitmaps when the
// peer sent one, otherwise the lower of both header versions if we speak it.
func NegotiateVersion(ours []uint8, peer Header, peerBody []byte) (uint8, error) {
	if bitmap, ok := helloBitmap(peerBody); ok {
		var best uint8
		found := false
		for _, v := range ours {
			if v < 32 && bitmap&(1<<v) != 0 && (!found || v > best) {
				best, found = v, true
			}
		}
		if !found {
			return 0, fmt.Errorf("openflow: no common version: we speak %v, the switch offers bitmap %#x", ours, bitmap)
		}
		return best, nil
	}
	v := min(highestVersion(ours), peer.Version)
	for _, o := range ours {
		if o == v {
			return v, nil
		}
	}
	return 0, fmt.Errorf("openflow: no common version: we speak %v, the switch speaks up to %#x", ours, peer.Version)
}
