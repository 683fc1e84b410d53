package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// OFPET_EXPERIMENTER: an error whose code is defined by an experimenter
// (Nicira's NXBRC_*/NXBAC_*..., ONF's bundle errors in OpenFlow 1.3).
const errTypeExperimenter uint16 = 0xffff

// Error type numbers worth naming in code (OpenFlow 1.5.1 section 7.5.4).
const (
	ErrTypeHelloFailed   uint16 = 0
	ErrTypeBadRequest    uint16 = 1
	ErrTypeBadAction     uint16 = 2
	ErrTypeBadInstr      uint16 = 3
	ErrTypeBadMatch      uint16 = 4
	ErrTypeFlowModFailed uint16 = 5
	ErrTypeGroupModFail  uint16 = 6
	ErrTypeBundleFailed  uint16 = 17
)

// Bundle error codes (OFPET_BUNDLE_FAILED) the bundle code reacts to.
const (
	errCodeBundleMsgFailed uint16 = 13
	// onfErrBundleMsgFailed is the same error in ONF form (OpenFlow 1.3).
	onfErrBundleMsgFailed uint16 = 2313
)

// errCodeNames names the codes of each standard error type, indexed by code.
// The names are the OpenFlow 1.3/1.5 specification's (OFPET_* section 7.5.4),
// which are also what ovs-ofctl prints.
var errCodeNames = [...]struct {
	typeName string
	prefix   string
	codes    string
}{
	0:  {"OFPET_HELLO_FAILED", "OFPHFC_", "INCOMPATIBLE EPERM"},
	1:  {"OFPET_BAD_REQUEST", "OFPBRC_", "BAD_VERSION BAD_TYPE BAD_MULTIPART BAD_EXPERIMENTER BAD_EXP_TYPE EPERM BAD_LEN BUFFER_EMPTY BUFFER_UNKNOWN BAD_TABLE_ID IS_SLAVE BAD_PORT BAD_PACKET MULTIPART_BUFFER_OVERFLOW MULTIPART_REQUEST_TIMEOUT MULTIPART_REPLY_TIMEOUT MULTIPART_BAD_SCHED PIPELINE_FIELDS_ONLY UNKNOWN"},
	2:  {"OFPET_BAD_ACTION", "OFPBAC_", "BAD_TYPE BAD_LEN BAD_EXPERIMENTER BAD_EXP_TYPE BAD_OUT_PORT BAD_ARGUMENT EPERM TOO_MANY BAD_QUEUE BAD_OUT_GROUP MATCH_INCONSISTENT UNSUPPORTED_ORDER BAD_TAG BAD_SET_TYPE BAD_SET_LEN BAD_SET_ARGUMENT BAD_SET_MASK BAD_METER"},
	3:  {"OFPET_BAD_INSTRUCTION", "OFPBIC_", "UNKNOWN_INST UNSUP_INST BAD_TABLE_ID UNSUP_METADATA UNSUP_METADATA_MASK BAD_EXPERIMENTER BAD_EXP_TYPE BAD_LEN EPERM DUP_INST"},
	4:  {"OFPET_BAD_MATCH", "OFPBMC_", "BAD_TYPE BAD_LEN BAD_TAG BAD_DL_ADDR_MASK BAD_NW_ADDR_MASK BAD_WILDCARDS BAD_FIELD BAD_VALUE BAD_MASK BAD_PREREQ DUP_FIELD EPERM"},
	5:  {"OFPET_FLOW_MOD_FAILED", "OFPFMFC_", "UNKNOWN TABLE_FULL BAD_TABLE_ID OVERLAP EPERM BAD_TIMEOUT BAD_COMMAND BAD_FLAGS CANT_SYNC BAD_PRIORITY IS_SYNC"},
	6:  {"OFPET_GROUP_MOD_FAILED", "OFPGMFC_", "GROUP_EXISTS INVALID_GROUP WEIGHT_UNSUPPORTED OUT_OF_GROUPS OUT_OF_BUCKETS CHAINING_UNSUPPORTED WATCH_UNSUPPORTED LOOP UNKNOWN_GROUP CHAINED_GROUP BAD_TYPE BAD_COMMAND BAD_BUCKET BAD_WATCH EPERM UNKNOWN_BUCKET BUCKET_EXISTS"},
	7:  {"OFPET_PORT_MOD_FAILED", "OFPPMFC_", "BAD_PORT BAD_HW_ADDR BAD_CONFIG BAD_ADVERTISE EPERM"},
	8:  {"OFPET_TABLE_MOD_FAILED", "OFPTMFC_", "BAD_TABLE BAD_CONFIG EPERM"},
	9:  {"OFPET_QUEUE_OP_FAILED", "OFPQOFC_", "BAD_PORT BAD_QUEUE EPERM"},
	10: {"OFPET_SWITCH_CONFIG_FAILED", "OFPSCFC_", "BAD_FLAGS BAD_LEN EPERM"},
	11: {"OFPET_ROLE_REQUEST_FAILED", "OFPRRFC_", "STALE UNSUP BAD_ROLE ID_UNSUP ID_IN_USE"},
	12: {"OFPET_METER_MOD_FAILED", "OFPMMFC_", "UNKNOWN METER_EXISTS INVALID_METER UNKNOWN_METER BAD_COMMAND BAD_FLAGS BAD_RATE BAD_BURST BAD_BAND BAD_BAND_VALUE OUT_OF_METERS OUT_OF_BANDS"},
	13: {"OFPET_TABLE_FEATURES_FAILED", "OFPTFFC_", "BAD_TABLE BAD_METADATA - - - EPERM BAD_CAPA BAD_MAX_ENT BAD_FEATURES BAD_COMMAND TOO_MANY"},
	14: {"OFPET_BAD_PROPERTY", "OFPBPC_", "BAD_TYPE BAD_LEN BAD_VALUE TOO_MANY DUP_TYPE BAD_EXPERIMENTER BAD_EXP_TYPE BAD_EXP_VALUE EPERM"},
	15: {"OFPET_ASYNC_CONFIG_FAILED", "OFPACFC_", "INVALID UNSUPPORTED EPERM"},
	16: {"OFPET_FLOW_MONITOR_FAILED", "OFPMOFC_", "UNKNOWN MONITOR_EXISTS INVALID_MONITOR UNKNOWN_MONITOR BAD_COMMAND BAD_FLAGS BAD_TABLE_ID BAD_OUT"},
	17: {"OFPET_BUNDLE_FAILED", "OFPBFC_", "UNKNOWN EPERM BAD_ID BUNDLE_EXIST BUNDLE_CLOSED OUT_OF_BUNDLES BAD_TYPE BAD_FLAGS MSG_BAD_LEN MSG_BAD_XID MSG_UNSUP MSG_CONFLICT MSG_TOO_MANY MSG_FAILED TIMEOUT BUNDLE_IN_PROGRESS SCHED_NOT_SUPPORTED SCHED_FUTURE SCHED_PAST"},
}

// nxErrNames names Nicira experimenter error codes (OVS's ofp-errors.h,
// "NX1.2+(n)": sent as OFPET_EXPERIMENTER with experimenter NX_VENDOR_ID).
var nxErrNames = map[uint16]string{
	2: "NXBRC_NXM_INVALID", 3: "NXBRC_NXM_BAD_TYPE", 4: "NXBRC_MUST_BE_ZERO", 5: "NXBRC_BAD_REASON",
	9: "NXBRC_FM_BAD_EVENT", 10: "NXBRC_UNENCODABLE_ERROR", 11: "NXBAC_MUST_BE_ZERO", 12: "NXFMFC_HARDWARE",
	13: "NXFMFC_BAD_TABLE_ID", 15: "NXBAC_BAD_CONJUNCTION", 16: "NXTTMFC_BAD_COMMAND", 17: "NXTTMFC_BAD_OPT_LEN",
	18: "NXTTMFC_BAD_FIELD_IDX", 19: "NXTTMFC_TABLE_FULL", 20: "NXTTMFC_ALREADY_MAPPED", 21: "NXTTMFC_DUP_ENTRY",
	23: "NXQOFC_QUEUE_ERROR", 34: "NXR_NOT_SUPPORTED", 35: "NXR_STALE", 36: "NXST_NOT_CONFIGURED",
	37: "NXFMFC_INVALID_TLV_FIELD", 38: "NXTTMFC_INVALID_TLV_DEL", 39: "NXBAC_BAD_HEADER_TYPE",
	40: "NXBAC_UNKNOWN_ED_PROP", 41: "NXBAC_BAD_ED_PROP", 42: "NXBAC_CT_DATAPATH_SUPPORT",
	43: "NXBMC_CT_DATAPATH_SUPPORT", 44: "NXTFFC_DUP_TABLE",
}

// onfErrNames names ONF experimenter error codes: OpenFlow 1.3's bundle
// extension (ONF TR-"bundles", codes 2300-2315) and a few backports.
var onfErrNames = map[uint16]string{
	2300: "OFPBFC_UNKNOWN", 2301: "OFPBFC_EPERM", 2302: "OFPBFC_BAD_ID", 2303: "OFPBFC_BUNDLE_EXIST",
	2304: "OFPBFC_BUNDLE_CLOSED", 2305: "OFPBFC_OUT_OF_BUNDLES", 2306: "OFPBFC_BAD_TYPE", 2307: "OFPBFC_BAD_FLAGS",
	2308: "OFPBFC_MSG_BAD_LEN", 2309: "OFPBFC_MSG_BAD_XID", 2310: "OFPBFC_MSG_UNSUP", 2311: "OFPBFC_MSG_CONFLICT",
	2312: "OFPBFC_MSG_TOO_MANY", 2313: "OFPBFC_MSG_FAILED", 2314: "OFPBFC_TIMEOUT", 2315: "OFPBFC_BUNDLE_IN_PROGRESS",
	2360: "OFPFMFC_BAD_PRIORITY", 2370: "OFPACFC_INVALID", 2371: "OFPACFC_UNSUPPORTED", 2372: "OFPACFC_EPERM",
	2640: "OFPBRC_MULTIPART_REQUEST_TIMEOUT", 2641: "OFPBRC_MULTIPART_REPLY_TIMEOUT",
	4443: "OFPBPC_TOO_MANY", 4444: "OFPBPC_DUP_TYPE", 4445: "OFPBPC_BAD_EXPERIMENTER", 4446: "OFPBPC_BAD_EXP_TYPE",
	4447: "OFPBPC_BAD_EXP_VALUE", 4448: "OFPBPC_EPERM",
}

// Error is an OFPT_ERROR message from the switch, tied to the request it
// answers. Its text names the error (e.g. "OFPBAC_BAD_OUT_PORT") and the
// request, so a failed flow in a log can be found and pasted into ovs-ofctl.
type Error struct {
	// Xid is the transaction id of the failed request.
	Xid uint32
	// Type and Code are ofp_error_msg's; for OFPET_EXPERIMENTER (0xffff) Code
	// is the experimenter's exp_code.
	Type, Code uint16
	// Experimenter is set when Type is OFPET_EXPERIMENTER.
	Experimenter uint32
	// Data holds (at least the first 64 bytes of) the failed request, or
	// ASCII text for OFPET_HELLO_FAILED.
	Data []byte
	// Request describes the failed request when the connection knows it.
	Request string
}

// Name is the symbolic name of the error, e.g. "OFPBAC_BAD_OUT_PORT",
// "NXBAC_BAD_CONJUNCTION", or a numeric form when unknown.
func (e *Error) Name() string {
	if e.Type == errTypeExperimenter {
		var n string
		switch e.Experimenter {
		case NiciraExperimenter:
			n = nxErrNames[e.Code]
		case ONFExperimenter:
			n = onfErrNames[e.Code]
		}
		if n != "" {
			return n
		}
		return fmt.Sprintf("OFPET_EXPERIMENTER(experimenter=%#x,code=%d)", e.Experimenter, e.Code)
	}
	if int(e.Type) < len(errCodeNames) {
		t := errCodeNames[e.Type]
		codes := strings.Fields(t.codes)
		if int(e.Code) < len(codes) && codes[e.Code] != "-" {
			return t.prefix + codes[e.Code]
		}
		return fmt.Sprintf("%s(code=%d)", t.typeName, e.Code)
	}
	return fmt.Sprintf("OFPET(type=%d,code=%d)", e.Type, e.Code)
}

// Error implements error.
func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString("openflow: switch rejected ")
	if e.Request != "" {
		sb.WriteString(e.Request)
	} else {
		sb.WriteString("request")
	}
	fmt.Fprintf(&sb, " (xid %d): %s", e.Xid, e.Name())
	if e.Type == ErrTypeHelloFailed && len(e.Data) > 0 {
		fmt.Fprintf(&sb, ": %q", strings.TrimRight(string(e.Data), "\x00"))
	}
	return sb.String()
}

// Is reports whether target is an *Error with the same type, code and
// experimenter, so callers can write errors.Is(err, &openflow.Error{Type: 2, Code: 4}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Type == e.Type && t.Code == e.Code && t.Experimenter == e.Experimenter
}

// FailedHeader decodes the header of the failed request echoed in Data, if present.
func (e *Error) FailedHeader() (Header, bool) {
	if e.Type == ErrTypeHelloFailed {
		return Header{}, false
	}
	h, err := ParseHeader(e.Data)
	return h, err == nil
}

// IsErrorCode reports whether err is, or wraps, an OpenFlow error of the given
// standard type and code.
func IsErrorCode(err error, typ, code uint16) bool {
	var e *Error
	return errors.As(err, &e) && e.Type == typ && e.Code == code
}

// DecodeError decodes the body of an OFPT_ERROR message.
func DecodeError(xid uint32, body []byte) (*Error, error) {
	if len(body) < 4 {
		return nil, fmt.Errorf("openflow: error message xid %d has %d body bytes, need 4", xid, len(body))
	}
	e := &Error{Xid: xid, Type: binary.BigEndian.Uint16(body[0:2]), Code: binary.BigEndian.Uint16(body[2:4])}
	rest := body[4:]
	if e.Type == errTypeExperimenter {
		if len(rest) < 4 {
			return nil, fmt.Errorf("openflow: experimenter error message xid %d is truncated", xid)
		}
		e.Experimenter = binary.BigEndian.Uint32(rest[0:4])
		rest = rest[4:]
	}
	e.Data = append([]byte(nil), rest...)
	return e, nil
}

// AppendErrorBody encodes an ofp_error_msg body (the inverse of DecodeError).
// The connection never sends errors to a switch; tests and fakes do.
func AppendErrorBody(b []byte, e *Error) []byte {
	b = binary.BigEndian.AppendUint16(b, e.Type)
	b = binary.BigEndian.AppendUint16(b, e.Code)
	if e.Type == errTypeExperimenter {
		b = binary.BigEndian.AppendUint32(b, e.Experimenter)
	}
	return append(b, e.Data...)
}
