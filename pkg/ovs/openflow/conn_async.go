package openflow

import "encoding/binary"

// Nicira extension message subtypes (nicira-ext.h, enum nicira_type).
const (
	nxtSetPacketInFormat uint32 = 16
	nxtPacketIn2         uint32 = 30
	// NXPIF_NXT_PACKET_IN2: packet-ins as NXT_PACKET_IN2, the only format
	// that carries controller(userdata=...) and the pipeline metadata.
	nxPacketInFormatNXT2 uint32 = 2
)

// setConfig is OFPT_SET_CONFIG with flags 0 (OFPC_FRAG_NORMAL) and the given
// miss_send_len; 0xffff (OFPCML_NO_BUFFER) sends whole packets unbuffered.
func setConfig(missSendLen uint16) Message {
	var body [4]byte
	binary.BigEndian.PutUint16(body[2:4], missSendLen)
	return &RawMessage{Type: TypeSetConfig, Body: body[:]}
}

// setPacketInFormat is NXT_SET_PACKET_IN_FORMAT.
func setPacketInFormat(format uint32) Message {
	b := appendExperimenter(make([]byte, 0, 12), NiciraExperimenter, nxtSetPacketInFormat)
	return &RawMessage{Type: TypeExperimenter, Body: binary.BigEndian.AppendUint32(b, format)}
}

// IsPacketIn2 reports whether a frame from PacketIns is an NXT_PACKET_IN2
// (its properties follow the 8-byte experimenter header) rather than a
// standard OFPT_PACKET_IN.
func IsPacketIn2(f Frame) bool {
	exp, sub, _, ok := experimenterHeader(f.Body)
	return f.Header.Type == TypeExperimenter && ok && exp == NiciraExperimenter && sub == nxtPacketIn2
}
