package ipfix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
)

// Wire constants of RFC 7011.
const (
	// Version is the header's version number (section 3.1).
	Version = 10
	// HeaderLen is the message header's length.
	HeaderLen = 16
	// SetHeaderLen is a set header's length (section 3.3.2).
	SetHeaderLen = 4
	// TemplateSetID and OptionsTemplateSetID are the set ids of template
	// sets; data sets take their template's id, MinTemplateID or above.
	TemplateSetID        = 2
	OptionsTemplateSetID = 3
	MinTemplateID        = 256
	// MaxMessageLen is the largest message the 16-bit length allows.
	MaxMessageLen = math.MaxUint16
)

// Template is a template record: its id and its fields in order.
type Template struct {
	ID     uint16
	Fields []Element
}

// Value is one field's value; which member holds it follows the element's
// type: Uint for unsigned, boolean and dateTime types, Str for strings,
// Addr for addresses, Bytes for octet arrays and MAC addresses.
type Value struct {
	Uint  uint64
	Str   string
	Addr  netip.Addr
	Bytes []byte
}

// U is a Value holding an unsigned number.
func U(v uint64) Value { return Value{Uint: v} }

// S is a Value holding a string.
func S(s string) Value { return Value{Str: s} }

// A is a Value holding an address.
func A(a netip.Addr) Value { return Value{Addr: a} }

// appendValue appends v encoded as field e (RFC 7011 section 6 and 7).
func appendValue(b []byte, e Element, v Value) ([]byte, error) {
	switch e.Type {
	case Unsigned8, Unsigned16, Unsigned32, Unsigned64, Boolean, DateTimeSeconds, DateTimeMillis, Signed32:
		n := int(e.Length)
		if n < 1 || n > 8 {
			return b, fmt.Errorf("element %s: length %d is not 1 to 8", e, n)
		}
		if n < 8 && v.Uint>>(8*n) != 0 {
			return b, fmt.Errorf("element %s: %d does not fit in %d bytes", e, v.Uint, n)
		}
		// Reduced-size encoding (section 6.2): the low-order bytes.
		for i := n - 1; i >= 0; i-- {
			b = append(b, byte(v.Uint>>(8*i)))
		}
		return b, nil
	case IPv4Address:
		if !v.Addr.Is4() {
			return b, fmt.Errorf("element %s: %v is not an IPv4 address", e, v.Addr)
		}
		a := v.Addr.As4()
		return append(b, a[:]...), nil
	case IPv6Address:
		if !v.Addr.IsValid() {
			return b, fmt.Errorf("element %s: no address", e)
		}
		a := v.Addr.As16()
		return append(b, a[:]...), nil
	case String:
		if e.Length == VariableLength && len(v.Str) < 255 {
			// The common case without converting the string.
			return append(append(b, byte(len(v.Str))), v.Str...), nil
		}
		return appendVariable(b, e, []byte(v.Str))
	case OctetArray, MACAddress:
		if e.Length != VariableLength {
			if len(v.Bytes) != int(e.Length) {
				return b, fmt.Errorf("element %s: %d bytes, want %d", e, len(v.Bytes), e.Length)
			}
			return append(b, v.Bytes...), nil
		}
		return appendVariable(b, e, v.Bytes)
	}
	return b, fmt.Errorf("element %s: type %d is not supported", e, e.Type)
}

// appendVariable appends a variable-length field: a one-byte length below
// 255, else 255 and a two-byte length (section 7). A fixed length in the
// template truncates or pads with zeros.
func appendVariable(b []byte, e Element, v []byte) ([]byte, error) {
	if e.Length != VariableLength {
		n := int(e.Length)
		if len(v) > n {
			v = v[:n]
		}
		b = append(b, v...)
		for i := len(v); i < n; i++ {
			b = append(b, 0)
		}
		return b, nil
	}
	if len(v) > MaxMessageLen-HeaderLen-SetHeaderLen-3 {
		return b, fmt.Errorf("element %s: %d bytes is too long", e, len(v))
	}
	if len(v) < 255 {
		b = append(b, byte(len(v)))
	} else {
		b = append(b, 255)
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	}
	return append(b, v...), nil
}

// decodeValue decodes one field from b; it returns the bytes it used.
func decodeValue(b []byte, e Element) (Value, int, error) {
	n, off := int(e.Length), 0
	if e.Length == VariableLength {
		if len(b) < 1 {
			return Value{}, 0, errShort
		}
		n, off = int(b[0]), 1
		if n == 255 {
			if len(b) < 3 {
				return Value{}, 0, errShort
			}
			n, off = int(binary.BigEndian.Uint16(b[1:3])), 3
		}
	}
	if len(b) < off+n {
		return Value{}, 0, errShort
	}
	f := b[off : off+n]
	var v Value
	switch e.Type {
	case Unsigned8, Unsigned16, Unsigned32, Unsigned64, Boolean, DateTimeSeconds, DateTimeMillis, Signed32:
		if n > 8 {
			return v, 0, fmt.Errorf("element %s: length %d is more than 8", e, n)
		}
		for _, c := range f {
			v.Uint = v.Uint<<8 | uint64(c)
		}
	case IPv4Address:
		if n != 4 {
			return v, 0, fmt.Errorf("element %s: length %d, want 4", e, n)
		}
		v.Addr = netip.AddrFrom4([4]byte(f))
	case IPv6Address:
		if n != 16 {
			return v, 0, fmt.Errorf("element %s: length %d, want 16", e, n)
		}
		v.Addr = netip.AddrFrom16([16]byte(f))
	case String:
		v.Str = string(f)
	default:
		v.Bytes = append([]byte(nil), f...)
	}
	return v, off + n, nil
}

var errShort = errors.New("truncated")

// appendTemplateRecord appends t as a template record (section 3.4.1).
func appendTemplateRecord(b []byte, t Template) []byte {
	b = binary.BigEndian.AppendUint16(b, t.ID)
	b = binary.BigEndian.AppendUint16(b, uint16(len(t.Fields)))
	for _, e := range t.Fields {
		if e.Enterprise != IANAEnterprise {
			b = binary.BigEndian.AppendUint16(b, e.ID|0x8000)
			b = binary.BigEndian.AppendUint16(b, e.Length)
			b = binary.BigEndian.AppendUint32(b, e.Enterprise)
		} else {
			b = binary.BigEndian.AppendUint16(b, e.ID)
			b = binary.BigEndian.AppendUint16(b, e.Length)
		}
	}
	return b
}

// Validate checks that t can be sent: an id of a data set, at least one
// field, fixed lengths that fit their types.
func (t Template) Validate() error {
	if t.ID < MinTemplateID {
		return fmt.Errorf("template %d: id below %d", t.ID, MinTemplateID)
	}
	if len(t.Fields) == 0 {
		return fmt.Errorf("template %d: no fields", t.ID)
	}
	for _, e := range t.Fields {
		if e.ID&0x8000 != 0 {
			return fmt.Errorf("template %d: element %s: id above 32767", t.ID, e)
		}
		if l := fixedLength(e.Type); l != 0 && e.Length != l {
			switch e.Type {
			case Unsigned16, Unsigned32, Unsigned64, DateTimeMillis:
				if e.Length >= 1 && e.Length < l {
					continue // reduced-size encoding
				}
			}
			return fmt.Errorf("template %d: element %s: length %d for a type of %d", t.ID, e, e.Length, l)
		}
	}
	return nil
}
