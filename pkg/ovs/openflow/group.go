package openflow

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// GroupType is OFPGT_*.
type GroupType uint8

// Group types (OpenFlow 1.5.1 enum ofp_group_type).
const (
	GroupAll          GroupType = 0
	GroupSelect       GroupType = 1
	GroupIndirect     GroupType = 2
	GroupFastFailover GroupType = 3
)

var groupTypeNames = [...]string{"all", "select", "indirect", "ff"}

// String names the type as ovs-ofctl does.
func (t GroupType) String() string {
	if int(t) < len(groupTypeNames) {
		return groupTypeNames[t]
	}
	return fmt.Sprintf("type%d", t)
}

// GroupModCommand is OFPGC_*.
type GroupModCommand uint16

// Group mod commands (OpenFlow 1.5.1 enum ofp_group_mod_command). Insert
// bucket is OpenFlow 1.5 only.
const (
	GroupAdd          GroupModCommand = 0
	GroupModify       GroupModCommand = 1
	GroupDelete       GroupModCommand = 2
	GroupInsertBucket GroupModCommand = 3
)

// Special bucket ids for CommandBucketID (OpenFlow 1.5.1 enum
// ofp15_group_bucket): where insert-bucket puts its buckets.
const (
	BucketFirst uint32 = 0xfffffffd
	BucketLast  uint32 = 0xfffffffe
	BucketAll   uint32 = 0xffffffff
)

// GroupIDAll is OFPG_ALL: every group (for deletes and stats).
const GroupIDAll uint32 = 0xfffffffc

// Bucket is one bucket of a group. Weight matters for select groups (a
// bucket of weight 0 gets no traffic); WatchPort and WatchGroup (0: none)
// for fast-failover groups.
type Bucket struct {
	ID         uint32
	Weight     uint16
	WatchPort  uint32
	WatchGroup uint32
	Actions    []Action
}

// GroupMod is OFPT_GROUP_MOD. When every bucket's ID is 0 the buckets are
// numbered 0, 1, … in order. SelectionMethod ("hash" or "dp_hash", empty for
// the switch's default) with SelectionMethodParam and Fields choose how a
// select group spreads packets (Open vSwitch's Netronome extension, OpenFlow
// 1.5 only).
type GroupMod struct {
	Command GroupModCommand
	Type    GroupType
	GroupID uint32
	// CommandBucketID is where GroupInsertBucket inserts (BucketFirst,
	// BucketLast or after a bucket id); 0 means BucketLast for an insert
	// and BucketAll (unused) otherwise.
	CommandBucketID      uint32
	Buckets              []Bucket
	SelectionMethod      string
	SelectionMethodParam uint64
	Fields               []Field
}

// MsgType implements Message.
func (m *GroupMod) MsgType() uint8 { return TypeGroupMod }

func (m *GroupMod) bucketID(i int) uint32 {
	for _, bk := range m.Buckets {
		if bk.ID != 0 {
			return m.Buckets[i].ID
		}
	}
	return uint32(i)
}

const (
	ntrVendorID           uint32 = 0x0000154d
	ntrSelectionMethod    uint32 = 1
	ntrMaxSelectionMethod        = 16
	groupPropExperimenter uint16 = 0xffff
	bucketPropWeight      uint16 = 0
	bucketPropWatchPort   uint16 = 1
	bucketPropWatchGroup  uint16 = 2
)

func (m *GroupMod) commandBucketID() uint32 {
	switch {
	case m.CommandBucketID != 0:
		return m.CommandBucketID
	case m.Command == GroupInsertBucket:
		return BucketLast
	}
	return BucketAll
}

// AppendBody implements Message: ofp15_group_mod or ofp11_group_mod.
func (m *GroupMod) AppendBody(b []byte, version uint8) ([]byte, error) {
	if version < Version15 {
		return m.appendBody13(b)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(m.Command))
	b = append(b, byte(m.Type), 0)
	b = binary.BigEndian.AppendUint32(b, m.GroupID)
	lenAt := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, m.commandBucketID())
	start := len(b)
	var err error
	if m.Command != GroupDelete {
		for i := range m.Buckets {
			if b, err = m.appendBucket15(b, i, version); err != nil {
				return b, err
			}
		}
	}
	binary.BigEndian.PutUint16(b[lenAt:], uint16(len(b)-start))
	if m.SelectionMethod != "" && m.Command != GroupDelete {
		if len(m.SelectionMethod) >= ntrMaxSelectionMethod {
			return b, fmt.Errorf("openflow: group %d: selection method %q too long", m.GroupID, m.SelectionMethod)
		}
		pstart := len(b)
		b = binary.BigEndian.AppendUint16(b, groupPropExperimenter)
		b = append(b, 0, 0)
		b = binary.BigEndian.AppendUint32(b, ntrVendorID)
		b = binary.BigEndian.AppendUint32(b, ntrSelectionMethod)
		b = append(b, 0, 0, 0, 0)
		var name [ntrMaxSelectionMethod]byte
		copy(name[:], m.SelectionMethod)
		b = append(b, name[:]...)
		b = binary.BigEndian.AppendUint64(b, m.SelectionMethodParam)
		// A field array holds each field with an all-ones value: hash it whole.
		for _, f := range m.Fields {
			b = appendOXM(b, f, f.fullMask(), f.fullMask())
		}
		binary.BigEndian.PutUint16(b[pstart+2:], uint16(len(b)-pstart))
		b = appendPad8(b, len(b)-pstart)
	}
	return b, nil
}

func (m *GroupMod) appendBucket15(b []byte, i int, version uint8) ([]byte, error) {
	bk := &m.Buckets[i]
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, m.bucketID(i))
	astart := len(b)
	var err error
	if b, err = appendActions(b, bk.Actions, version); err != nil {
		return b, fmt.Errorf("openflow: group %d bucket %d: %w", m.GroupID, i, err)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-astart))
	if m.Type == GroupSelect {
		b = appendProp(b, bucketPropWeight, []byte{byte(bk.Weight >> 8), byte(bk.Weight), 0, 0})
	}
	if m.Type == GroupFastFailover {
		if bk.WatchPort != 0 {
			b = appendProp(b, bucketPropWatchPort, binary.BigEndian.AppendUint32(nil, bk.WatchPort))
		}
		if bk.WatchGroup != 0 {
			b = appendProp(b, bucketPropWatchGroup, binary.BigEndian.AppendUint32(nil, bk.WatchGroup))
		}
	}
	binary.BigEndian.PutUint16(b[start:], uint16(len(b)-start))
	return b, nil
}

func (m *GroupMod) appendBody13(b []byte) ([]byte, error) {
	if m.Command > GroupDelete {
		return b, fmt.Errorf("openflow: group %d: bucket commands need OpenFlow 1.5", m.GroupID)
	}
	if m.SelectionMethod != "" {
		return b, fmt.Errorf("openflow: group %d: selection_method needs OpenFlow 1.5", m.GroupID)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(m.Command))
	b = append(b, byte(m.Type), 0)
	b = binary.BigEndian.AppendUint32(b, m.GroupID)
	if m.Command == GroupDelete {
		return b, nil
	}
	for i := range m.Buckets {
		bk := &m.Buckets[i]
		start := len(b)
		b = append(b, 0, 0)
		b = binary.BigEndian.AppendUint16(b, bk.Weight)
		watchPort, watchGroup := PortAny, PortAny
		if bk.WatchPort != 0 {
			watchPort = bk.WatchPort
		}
		if bk.WatchGroup != 0 {
			watchGroup = bk.WatchGroup
		}
		b = binary.BigEndian.AppendUint32(b, watchPort)
		b = binary.BigEndian.AppendUint32(b, watchGroup)
		b = append(b, 0, 0, 0, 0)
		var err error
		if b, err = appendActions(b, bk.Actions, Version13); err != nil {
			return b, fmt.Errorf("openflow: group %d bucket %d: %w", m.GroupID, i, err)
		}
		binary.BigEndian.PutUint16(b[start:], uint16(len(b)-start))
	}
	return b, nil
}

// String prints the group as `ovs-ofctl -O OpenFlow15 dump-groups` does
// (group_id=1,type=select,bucket=bucket_id:0,weight:100,actions=output:1).
func (m *GroupMod) String() string {
	b := fmt.Appendf(nil, "group_id=%d,type=%s", m.GroupID, m.Type)
	if m.SelectionMethod != "" {
		b = fmt.Appendf(b, ",selection_method=%s", m.SelectionMethod)
		if m.SelectionMethodParam != 0 {
			b = fmt.Appendf(b, ",selection_method_param=%d", m.SelectionMethodParam)
		}
		if len(m.Fields) > 0 {
			b = append(b, ",fields("...)
			for i, f := range m.Fields {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, f.Name()...)
			}
			b = append(b, ')')
		}
	}
	for i := range m.Buckets {
		bk := &m.Buckets[i]
		b = fmt.Appendf(b, ",bucket=bucket_id:%d,", m.bucketID(i))
		// ovs-ofctl omits the default weight: 1 in select groups, 0 elsewhere.
		if (m.Type == GroupSelect && bk.Weight != 1) || (m.Type != GroupSelect && bk.Weight != 0) {
			b = fmt.Appendf(b, "weight:%d,", bk.Weight)
		}
		if bk.WatchPort != 0 && bk.WatchPort != PortAny {
			b = append(b, "watch_port:"...)
			b = appendPort(b, bk.WatchPort)
			b = append(b, ',')
		}
		if bk.WatchGroup != 0 && bk.WatchGroup != PortAny {
			b = fmt.Appendf(b, "watch_group:%d,", bk.WatchGroup)
		}
		b = append(b, "actions="...)
		b = appendActionsText(b, bk.Actions)
	}
	return string(b)
}

// decodeBuckets15 decodes an OpenFlow 1.5 bucket array.
func decodeBuckets15(b []byte) ([]Bucket, error) {
	var out []Bucket
	for len(b) > 0 {
		if len(b) < 8 {
			return out, fmt.Errorf("openflow: truncated bucket")
		}
		n, alen := int(binary.BigEndian.Uint16(b)), int(binary.BigEndian.Uint16(b[2:]))
		if n < 8 || n > len(b) || 8+alen > n {
			return out, fmt.Errorf("openflow: bucket length %d (actions %d) does not fit %d bytes", n, alen, len(b))
		}
		bk := Bucket{ID: binary.BigEndian.Uint32(b[4:])}
		acts, err := DecodeActions(b[8 : 8+alen])
		if err != nil {
			return out, fmt.Errorf("openflow: bucket %d: %w", bk.ID, err)
		}
		bk.Actions = acts
		err = walkProps(b[8+alen:n], func(typ uint16, v []byte) error {
			switch {
			case typ == bucketPropWeight && len(v) >= 2:
				bk.Weight = binary.BigEndian.Uint16(v)
			case typ == bucketPropWatchPort && len(v) >= 4:
				bk.WatchPort = binary.BigEndian.Uint32(v)
			case typ == bucketPropWatchGroup && len(v) >= 4:
				bk.WatchGroup = binary.BigEndian.Uint32(v)
			}
			return nil
		})
		if err != nil {
			return out, err
		}
		if bk.WatchPort == PortAny {
			bk.WatchPort = 0
		}
		if bk.WatchGroup == PortAny {
			bk.WatchGroup = 0
		}
		out = append(out, bk)
		b = b[n:]
	}
	return out, nil
}

// decodeGroupProps15 decodes the selection-method property of a group.
func (m *GroupMod) decodeGroupProps15(b []byte) error {
	return walkProps(b, func(typ uint16, v []byte) error {
		if typ != groupPropExperimenter || len(v) < 36 {
			return nil
		}
		if binary.BigEndian.Uint32(v) != ntrVendorID || binary.BigEndian.Uint32(v[4:]) != ntrSelectionMethod {
			return nil
		}
		name := v[12 : 12+ntrMaxSelectionMethod]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		m.SelectionMethod = string(name)
		m.SelectionMethodParam = binary.BigEndian.Uint64(v[28:])
		for f := v[36:]; len(f) > 0; {
			fld, _, _, n, err := decodeOXM(f)
			if err != nil {
				return fmt.Errorf("openflow: group %d selection fields: %w", m.GroupID, err)
			}
			m.Fields = append(m.Fields, fld)
			f = f[n:]
		}
		return nil
	})
}

// DecodeGroupMod decodes the body of an OFPT_GROUP_MOD.
func DecodeGroupMod(body []byte, version uint8) (*GroupMod, error) {
	if len(body) < 8 {
		return nil, fmt.Errorf("openflow: group_mod too short")
	}
	m := &GroupMod{Command: GroupModCommand(binary.BigEndian.Uint16(body)), Type: GroupType(body[2]), GroupID: binary.BigEndian.Uint32(body[4:])}
	if version < Version15 {
		buckets, err := decodeBuckets13(body[8:])
		m.Buckets = buckets
		return m, err
	}
	if len(body) < 16 {
		return nil, fmt.Errorf("openflow: group_mod too short")
	}
	blen := int(binary.BigEndian.Uint16(body[8:]))
	if 16+blen > len(body) {
		return nil, fmt.Errorf("openflow: group_mod bucket array of %d bytes overruns", blen)
	}
	if id := binary.BigEndian.Uint32(body[12:]); id != m.commandBucketID() {
		m.CommandBucketID = id
	}
	var err error
	if m.Buckets, err = decodeBuckets15(body[16 : 16+blen]); err != nil {
		return nil, err
	}
	return m, m.decodeGroupProps15(body[16+blen:])
}

// decodeBuckets13 decodes OpenFlow 1.3 ofp_bucket entries.
func decodeBuckets13(b []byte) ([]Bucket, error) {
	var out []Bucket
	for len(b) > 0 {
		if len(b) < 16 {
			return out, fmt.Errorf("openflow: truncated bucket")
		}
		n := int(binary.BigEndian.Uint16(b))
		if n < 16 || n > len(b) {
			return out, fmt.Errorf("openflow: bucket length %d does not fit %d bytes", n, len(b))
		}
		bk := Bucket{ID: uint32(len(out)), Weight: binary.BigEndian.Uint16(b[2:]),
			WatchPort: binary.BigEndian.Uint32(b[4:]), WatchGroup: binary.BigEndian.Uint32(b[8:])}
		if bk.WatchPort == PortAny {
			bk.WatchPort = 0
		}
		if bk.WatchGroup == PortAny {
			bk.WatchGroup = 0
		}
		acts, err := DecodeActions(b[16:n])
		if err != nil {
			return out, err
		}
		bk.Actions = acts
		out = append(out, bk)
		b = b[n:]
	}
	return out, nil
}

// MaxGroupModLen is the longest group mod Split makes: an OpenFlow message
// holds 65535 bytes, and a bundle wraps each message in 16 more.
const MaxGroupModLen = 0xffff - 16

// Split returns the group mod as messages of at most maxLen bytes each
// (encoded in OpenFlow 1.5), for groups with more buckets than one message
// holds: the add or modify with as many buckets as fit, then insert-bucket
// messages appending the rest in order. Buckets get explicit ids (their
// index, unless they have ids), so later messages do not reuse the first
// one's. Sent in one bundle, the group changes at once. A mod that fits is
// returned alone, unchanged.
func (m *GroupMod) Split(maxLen int) ([]*GroupMod, error) {
	body, err := m.AppendBody(nil, Version15)
	if err != nil {
		return nil, err
	}
	if HeaderLen+len(body) <= maxLen || (m.Command != GroupAdd && m.Command != GroupModify) {
		return []*GroupMod{m}, nil
	}
	buckets := append([]Bucket(nil), m.Buckets...)
	for i := range buckets {
		buckets[i].ID = m.bucketID(i)
	}
	head := *m
	head.Buckets = nil
	empty, err := Marshal(&head, Version15, 0)
	if err != nil {
		return nil, err
	}
	insert := GroupMod{Command: GroupInsertBucket, Type: m.Type, GroupID: m.GroupID, CommandBucketID: BucketLast}
	emptyInsert, err := Marshal(&insert, Version15, 0)
	if err != nil {
		return nil, err
	}
	all := GroupMod{Type: m.Type, GroupID: m.GroupID, Buckets: buckets}
	var out []*GroupMod
	cur, size := head, len(empty)
	for i := range buckets {
		bucket, err := all.appendBucket15(nil, i, Version15)
		if err != nil {
			return nil, err
		}
		if size+len(bucket) > maxLen {
			if len(cur.Buckets) == 0 {
				return nil, fmt.Errorf("openflow: group %d: bucket %d of %d bytes does not fit a message of %d", m.GroupID, buckets[i].ID, len(bucket), maxLen)
			}
			c := cur
			out = append(out, &c)
			cur, size = insert, len(emptyInsert)
			cur.Buckets = nil
		}
		cur.Buckets = append(cur.Buckets, buckets[i])
		size += len(bucket)
	}
	c := cur
	out = append(out, &c)
	return out, nil
}
