package openflow

// EchoRequest is OFPT_ECHO_REQUEST; the connection sends one per keepalive
// interval and declares the switch dead when replies stop.
type EchoRequest struct {
	Data []byte
}

// MsgType implements Message.
func (*EchoRequest) MsgType() uint8 { return TypeEchoRequest }

// AppendBody implements Message.
func (e *EchoRequest) AppendBody(b []byte, _ uint8) ([]byte, error) { return append(b, e.Data...), nil }

// EchoReply is OFPT_ECHO_REPLY; it returns the request's data unchanged.
type EchoReply struct {
	Data []byte
}

// MsgType implements Message.
func (*EchoReply) MsgType() uint8 { return TypeEchoReply }

// AppendBody implements Message.
func (e *EchoReply) AppendBody(b []byte, _ uint8) ([]byte, error) { return append(b, e.Data...), nil }
