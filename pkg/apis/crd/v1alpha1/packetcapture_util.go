package v1alpha1

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Protocols are the names spec.packet.protocol may give (any case), with
// their IP protocol numbers.
var Protocols = map[string]uint8{"TCP": 6, "UDP": 17, "ICMP": 1}

// ICMPMsgTypes are upstream's ICMP type names with their numbers (RFC 792).
var ICMPMsgTypes = map[ICMPMsgType]uint8{
	ICMPMsgTypeEcho: 8, ICMPMsgTypeEchoReply: 0, ICMPMsgTypeDstUnreach: 3, ICMPMsgTypeTimexceed: 11,
}

// ProtocolNumber reads spec.packet.protocol (0 when unset: any protocol).
func ProtocolNumber(p *intstr.IntOrString) (uint8, error) {
	if p == nil {
		return 0, nil
	}
	if p.Type == intstr.Int {
		if p.IntVal < 0 || p.IntVal > 255 {
			return 0, fmt.Errorf("protocol %d is not in 0..255", p.IntVal)
		}
		return uint8(p.IntVal), nil
	}
	if n, ok := Protocols[strings.ToUpper(p.StrVal)]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("protocol %q is not TCP, UDP, ICMP or a number", p.StrVal)
}

// ICMPTypeNumber reads an ICMP message matcher's type.
func ICMPTypeNumber(t intstr.IntOrString) (uint8, error) {
	if t.Type == intstr.Int {
		if t.IntVal < 0 || t.IntVal > 255 {
			return 0, fmt.Errorf("ICMP type %d is not in 0..255", t.IntVal)
		}
		return uint8(t.IntVal), nil
	}
	if n, ok := ICMPMsgTypes[ICMPMsgType(strings.ToLower(t.StrVal))]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("ICMP type %q is not a number nor one of icmp-echo, icmp-echoreply, icmp-unreach, icmp-timxceed", t.StrVal)
}

// Base64Bytes are bytes written in JSON as base64. They read both the
// standard alphabet and the URL-safe one, padded or not: upstream's own
// example key (docs/packetcapture.md) has a '_', which encoding/json's
// []byte refuses, and one such object would make every informer's list of
// PacketCaptures fail to decode. They are written in the standard alphabet.
type Base64Bytes []byte

// UnmarshalJSON implements json.Unmarshaler.
func (b *Base64Bytes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if v, err := enc.DecodeString(s); err == nil {
			*b = v
			return nil
		}
	}
	return fmt.Errorf("%q is not base64", s)
}

// MarshalJSON implements json.Marshaler.
func (b Base64Bytes) MarshalJSON() ([]byte, error) {
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}
