package openflow

import (
	"encoding/binary"
	"fmt"
)

// FeaturesRequest is OFPT_FEATURES_REQUEST.
type FeaturesRequest struct{}

// MsgType implements Message.
func (FeaturesRequest) MsgType() uint8 { return TypeFeaturesRequest }

// AppendBody implements Message: the request has no body.
func (FeaturesRequest) AppendBody(b []byte, _ uint8) ([]byte, error) { return b, nil }

// Features is the decoded OFPT_FEATURES_REPLY (ofp_switch_features).
type Features struct {
	DatapathID   uint64
	NBuffers     uint32
	NTables      uint8
	AuxiliaryID  uint8
	Capabilities uint32
}

// DecodeFeatures decodes the body of an OFPT_FEATURES_REPLY.
func DecodeFeatures(body []byte) (Features, error) {
	if len(body) < 24 {
		return Features{}, fmt.Errorf("openflow: features reply has %d body bytes, need 24", len(body))
	}
	return Features{
		DatapathID:   binary.BigEndian.Uint64(body[0:8]),
		NBuffers:     binary.BigEndian.Uint32(body[8:12]),
		NTables:      body[12],
		AuxiliaryID:  body[13],
		Capabilities: binary.BigEndian.Uint32(body[16:20]),
	}, nil
}
