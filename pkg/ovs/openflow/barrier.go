package openflow

// BarrierRequest is OFPT_BARRIER_REQUEST: the switch answers it only after it
// has processed, and answered, every message sent before it.
type BarrierRequest struct{}

// MsgType implements Message.
func (BarrierRequest) MsgType() uint8 { return TypeBarrierRequest }

// AppendBody implements Message: the barrier has no body.
func (BarrierRequest) AppendBody(b []byte, _ uint8) ([]byte, error) { return b, nil }
