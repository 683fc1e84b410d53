package openflow

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ParseFlow parses a flow in the text form Flow.String() prints (the form of
// `ovs-ofctl --no-stats dump-flows`, which ovs-ofctl add-flow also accepts):
// "cookie=0x1, table=2, priority=100,ip,nw_src=10.0.0.1 actions=resubmit(,3)".
// Statistics fields that dump-flows prints without --no-stats are ignored.
func ParseFlow(s string) (*Flow, error) {
	head, acts, ok := cutTopLevel(s, "actions=")
	if !ok {
		return nil, fmt.Errorf("openflow: flow %q has no actions", s)
	}
	f := &Flow{Priority: defaultPriority}
	p := matchParser{m: &f.Match}
	for _, tok := range splitFields(head) {
		key, val, hasVal := strings.Cut(tok, "=")
		var err error
		switch key {
		case "cookie":
			f.Cookie, err = parseUint(val, 64)
		case "table":
			var v uint64
			v, err = parseUint(val, 8)
			f.Table = uint8(v)
		case "priority":
			var v uint64
			v, err = parseUint(val, 16)
			f.Priority = uint16(v)
		case "idle_timeout", "hard_timeout", "importance":
			var v uint64
			v, err = parseUint(val, 16)
			switch key {
			case "idle_timeout":
				f.IdleTimeout = uint16(v)
			case "hard_timeout":
				f.HardTimeout = uint16(v)
			default:
				f.Importance = uint16(v)
			}
		case "duration", "n_packets", "n_bytes", "idle_age", "hard_age":
			// statistics of dump-flows without --no-stats
		case "send_flow_rem", "check_overlap", "reset_counts", "no_packet_counts", "no_byte_counts":
			if hasVal {
				return nil, fmt.Errorf("openflow: flag %s takes no value", key)
			}
			f.Flags |= map[string]FlowFlags{"send_flow_rem": FlowSendFlowRem, "check_overlap": FlowCheckOverlap,
				"reset_counts": FlowResetCounts, "no_packet_counts": FlowNoPktCounts, "no_byte_counts": FlowNoBytCounts}[key]
		default:
			err = p.field(key, val, hasVal)
		}
		if err != nil {
			return nil, fmt.Errorf("openflow: flow %q: %s: %w", s, tok, err)
		}
	}
	if err := p.finish(); err != nil {
		return nil, fmt.Errorf("openflow: flow %q: %w", s, err)
	}
	var err error
	if f.Actions, err = ParseActions(acts); err != nil {
		return nil, fmt.Errorf("openflow: flow %q: %w", s, err)
	}
	return f, nil
}

// ParseMatch parses a match in ovs-ofctl syntax ("tcp,nw_src=10.0.0.0/8,tp_dst=80").
func ParseMatch(s string) (Match, error) {
	var m Match
	p := matchParser{m: &m}
	for _, tok := range splitFields(s) {
		key, val, hasVal := strings.Cut(tok, "=")
		if err := p.field(key, val, hasVal); err != nil {
			return m, fmt.Errorf("openflow: match %q: %s: %w", s, tok, err)
		}
	}
	return m, p.finish()
}

// cutTopLevel splits s at the first sep outside parentheses.
func cutTopLevel(s, sep string) (before, after string, ok bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth == 0 && strings.HasPrefix(s[i:], sep) && (i == 0 || s[i-1] == ' ' || s[i-1] == ',') {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// splitFields splits the part before actions= at commas and spaces.
func splitFields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
}

// SplitTopLevel splits s at commas outside parentheses and brackets, as
// OVS's text forms nest them (flows, and `dpctl/dump-conntrack` entries,
// which pkg/agent/flowexporter reads).
func SplitTopLevel(s string) []string { return splitTopLevel(s) }

// splitTopLevel splits s at commas outside parentheses and brackets.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" || len(out) > 0 {
		out = append(out, rest)
	}
	return out
}

func parseUint(s string, bitSize int) (uint64, error) {
	return strconv.ParseUint(s, 0, bitSize)
}

// parseU128 parses a decimal or 0x-prefixed hexadecimal number of up to 128 bits.
func parseU128(s string) (U128, error) {
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		if h == "" || len(h) > 32 {
			return U128{}, fmt.Errorf("bad hexadecimal %q", s)
		}
		var u U128
		for _, c := range h {
			d, err := strconv.ParseUint(string(c), 16, 8)
			if err != nil {
				return U128{}, fmt.Errorf("bad hexadecimal %q", s)
			}
			u = u.shl(4).or(U64(d))
		}
		return u, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return U64(v), err
}

// parsePort parses a port number or reserved port name.
func parsePort(s string) (uint32, error) {
	switch s {
	case "IN_PORT", "in_port":
		return PortInPort, nil
	case "TABLE", "table":
		return PortTable, nil
	case "NORMAL", "normal":
		return PortNormal, nil
	case "FLOOD", "flood":
		return PortFlood, nil
	case "ALL", "all":
		return PortAll, nil
	case "CONTROLLER", "controller":
		return PortController, nil
	case "LOCAL", "local":
		return PortLocal, nil
	case "ANY", "NONE":
		return PortAny, nil
	}
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return uint32(v), nil
}

// parseFieldValue parses a field's value with an optional /mask in the
// syntax of the field's format.
func parseFieldValue(f Field, s string) (value, mask U128, err error) {
	fi := &fieldInfos[f]
	full := f.fullMask()
	vs, ms, masked := strings.Cut(s, "/")
	switch fi.format {
	case fmtIPv4:
		a, err := netip.ParseAddr(vs)
		if err != nil || !a.Is4() {
			return value, mask, fmt.Errorf("bad IPv4 address %q", vs)
		}
		value, mask = addrU128(a), full
		if masked {
			if n, err := strconv.Atoi(ms); err == nil && n >= 0 && n <= 32 {
				mask = ones(32).and(ones(32 - uint(n)).not())
			} else if m, err := netip.ParseAddr(ms); err == nil && m.Is4() {
				mask = addrU128(m)
			} else {
				return value, mask, fmt.Errorf("bad IPv4 mask %q", ms)
			}
		}
	case fmtIPv6:
		a, err := netip.ParseAddr(vs)
		if err != nil || a.Is4() {
			return value, mask, fmt.Errorf("bad IPv6 address %q", vs)
		}
		value, mask = addrU128(a), full
		if masked {
			if n, err := strconv.Atoi(ms); err == nil && n >= 0 && n <= 128 {
				mask = ones(128).and(ones(128 - uint(n)).not())
			} else if m, err := netip.ParseAddr(ms); err == nil && !m.Is4() {
				mask = addrU128(m)
			} else {
				return value, mask, fmt.Errorf("bad IPv6 mask %q", ms)
			}
		}
	case fmtEthernet:
		hw, err := net.ParseMAC(vs)
		if err != nil || len(hw) != 6 {
			return value, mask, fmt.Errorf("bad MAC address %q", vs)
		}
		value, mask = macU128(hw), full
		if masked {
			hm, err := net.ParseMAC(ms)
			if err != nil || len(hm) != 6 {
				return value, mask, fmt.Errorf("bad MAC mask %q", ms)
			}
			mask = macU128(hm)
		}
	case fmtPort:
		if masked {
			return value, mask, fmt.Errorf("a port cannot be masked")
		}
		p, err := parsePort(vs)
		if err != nil {
			return value, mask, err
		}
		value, mask = U64(uint64(p)), full
	case fmtCTState:
		v, m, err := parseFlags(s, ctStateNames[:], 0xff)
		return U64(uint64(v)), U64(uint64(m)), err
	case fmtTCPFlags:
		v, m, err := parseFlags(s, tcpFlagNames[:], 0xfff)
		return U64(uint64(v)), U64(uint64(m)), err
	default:
		if value, err = parseU128(vs); err != nil {
			return value, mask, err
		}
		mask = full
		if masked {
			if mask, err = parseU128(ms); err != nil {
				return value, mask, err
			}
		}
	}
	if value.and(full) != value {
		return value, mask, fmt.Errorf("value %s too wide for %s", vs, f)
	}
	return value, mask, nil
}

// parseFlags parses "+trk+est-new", "new|trk", "0" or a number with mask.
func parseFlags(s string, names []string, max uint32) (value, mask uint32, err error) {
	if s == "" {
		return 0, 0, fmt.Errorf("empty flags")
	}
	if s[0] == '+' || s[0] == '-' {
		for s != "" {
			set := s[0] == '+'
			s = s[1:]
			end := strings.IndexAny(s, "+-")
			if end < 0 {
				end = len(s)
			}
			bit, ok := flagBit(s[:end], names)
			if !ok {
				return 0, 0, fmt.Errorf("unknown flag %q", s[:end])
			}
			mask |= bit
			if set {
				value |= bit
			}
			s = s[end:]
		}
		return value, mask, nil
	}
	if s[0] >= '0' && s[0] <= '9' {
		vs, ms, masked := strings.Cut(s, "/")
		v, err := strconv.ParseUint(vs, 0, 32)
		if err != nil {
			return 0, 0, err
		}
		m := uint64(max)
		if masked {
			if m, err = strconv.ParseUint(ms, 0, 32); err != nil {
				return 0, 0, err
			}
		}
		return uint32(v), uint32(m), nil
	}
	for _, n := range strings.Split(s, "|") {
		bit, ok := flagBit(n, names)
		if !ok {
			return 0, 0, fmt.Errorf("unknown flag %q", n)
		}
		value |= bit
	}
	return value, max, nil
}

func flagBit(name string, names []string) (uint32, bool) {
	for i, n := range names {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// matchParser accumulates a match; tp_src/tp_dst and icmp_type/icmp_code
// name different fields depending on the protocol, known only at the end.
type matchParser struct {
	m       *Match
	pending []pendingField
}

type pendingField struct {
	key, val string
}

func (p *matchParser) field(key, val string, hasVal bool) error {
	shortcut := map[string][2]uint16{
		"ip": {EthTypeIPv4, 0}, "ipv6": {EthTypeIPv6, 0}, "arp": {EthTypeARP, 0}, "rarp": {EthTypeRARP, 0},
		"tcp": {EthTypeIPv4, 6}, "udp": {EthTypeIPv4, 17}, "sctp": {EthTypeIPv4, 132}, "icmp": {EthTypeIPv4, 1},
		"tcp6": {EthTypeIPv6, 6}, "udp6": {EthTypeIPv6, 17}, "sctp6": {EthTypeIPv6, 132}, "icmp6": {EthTypeIPv6, 58},
	}
	if sc, ok := shortcut[key]; ok && !hasVal {
		p.m.EthType(sc[0])
		if sc[1] != 0 {
			p.m.IPProto(uint8(sc[1]))
		}
		return nil
	}
	if !hasVal {
		return fmt.Errorf("unknown match keyword")
	}
	switch key {
	case "tp_src", "tp_dst", "icmp_type", "icmp_code":
		p.pending = append(p.pending, pendingField{key, val})
		return nil
	case "dl_vlan":
		v, err := parseUint(val, 12)
		if err != nil {
			return err
		}
		p.m.VlanVID(uint16(v))
		return nil
	case "nw_frag":
		frag := map[string][2]uint8{
			"no": {0, IPFragAny}, "yes": {IPFragAny, IPFragAny}, "first": {IPFragAny, IPFragAny | IPFragLater},
			"later": {IPFragLater, IPFragLater}, "not_later": {0, IPFragLater},
		}
		v, ok := frag[val]
		if !ok {
			return fmt.Errorf("nw_frag %q is none of no, yes, first, later, not_later", val)
		}
		p.m.IPFrag(v[0], v[1])
		return nil
	case "nw_tos":
		v, err := parseUint(val, 8)
		if err != nil {
			return err
		}
		p.m.IPDSCP(uint8(v >> 2))
		return nil
	}
	if n, ok := strings.CutPrefix(key, "reg"); ok {
		i, err := strconv.Atoi(n)
		if err == nil && i >= 0 && i < 16 {
			v, mask, err := parseFieldValue(Reg(i), val)
			if err != nil {
				return err
			}
			p.m.SetMasked(Reg(i), v, mask)
			return nil
		}
	}
	f, ok := FieldByName(key)
	if !ok {
		return fmt.Errorf("unknown field %q", key)
	}
	v, mask, err := parseFieldValue(f, val)
	if err != nil {
		return err
	}
	if mask != f.fullMask() && !fieldInfos[f].maskable {
		return fmt.Errorf("field %s cannot be masked", f)
	}
	p.m.SetMasked(f, v, mask)
	return nil
}

func (p *matchParser) finish() error {
	ethType, proto := p.m.implied()
	for _, pf := range p.pending {
		var f Field
		switch {
		case pf.key == "icmp_type" && ethType == EthTypeIPv6:
			f = FieldICMPv6Type
		case pf.key == "icmp_code" && ethType == EthTypeIPv6:
			f = FieldICMPv6Code
		case pf.key == "icmp_type":
			f = FieldICMPv4Type
		case pf.key == "icmp_code":
			f = FieldICMPv4Code
		default:
			byProto := map[uint8][2]Field{IPProtoTCP: {FieldTCPSrc, FieldTCPDst}, IPProtoUDP: {FieldUDPSrc, FieldUDPDst}, IPProtoSCTP: {FieldSCTPSrc, FieldSCTPDst}}
			pair, ok := byProto[proto]
			if !ok {
				return fmt.Errorf("%s needs tcp, udp or sctp", pf.key)
			}
			f = pair[0]
			if pf.key == "tp_dst" {
				f = pair[1]
			}
		}
		v, mask, err := parseFieldValue(f, pf.val)
		if err != nil {
			return fmt.Errorf("%s=%s: %w", pf.key, pf.val, err)
		}
		p.m.SetMasked(f, v, mask)
	}
	p.pending = nil
	return nil
}

// ParseActions parses an action list in ovs-ofctl syntax ("drop" or
// comma-separated actions and instructions).
func ParseActions(s string) ([]Action, error) {
	s = strings.TrimSpace(s)
	if s == "drop" || s == "" {
		return nil, nil
	}
	var acts []Action
	for _, tok := range splitTopLevel(s) {
		a, err := parseAction(tok)
		if err != nil {
			return nil, fmt.Errorf("action %q: %w", tok, err)
		}
		acts = append(acts, a)
	}
	return acts, nil
}

// parseSubfield parses NAME[], NAME[n] or NAME[a..b].
func parseSubfield(s string) (FieldRange, error) {
	name, rng, ok := strings.Cut(s, "[")
	if !ok || !strings.HasSuffix(rng, "]") {
		return FieldRange{}, fmt.Errorf("bad subfield %q", s)
	}
	f, found := FieldByName(name)
	if !found {
		return FieldRange{}, fmt.Errorf("unknown field %q", name)
	}
	rng = strings.TrimSuffix(rng, "]")
	r := f.All()
	if rng != "" {
		a, b, isRange := strings.Cut(rng, "..")
		start, err := strconv.ParseUint(a, 10, 8)
		if err != nil {
			return r, fmt.Errorf("bad subfield %q", s)
		}
		end := start
		if isRange {
			if end, err = strconv.ParseUint(b, 10, 8); err != nil {
				return r, fmt.Errorf("bad subfield %q", s)
			}
		}
		r = FieldRange{f, uint8(start), uint8(end)}
	}
	return r, r.valid()
}

// parenArgs returns the text inside "name(...)".
func parenArgs(tok, name string) (string, bool) {
	if strings.HasPrefix(tok, name+"(") && strings.HasSuffix(tok, ")") {
		return tok[len(name)+1 : len(tok)-1], true
	}
	return "", false
}

func parseAction(tok string) (Action, error) {
	key, val, hasVal := strings.Cut(tok, ":")
	if i := strings.IndexByte(tok, '('); i >= 0 && (!hasVal || i < len(key)) {
		key, val, hasVal = tok[:i], "", false
	}
	switch {
	case tok == "dec_ttl":
		return &DecTTL{}, nil
	case tok == "ct_clear":
		return &CTClear{}, nil
	case tok == "pop_vlan":
		return &PopVLAN{}, nil
	case tok == "clear_actions":
		return &ClearActions{}, nil
	case tok == "IN_PORT" || tok == "NORMAL" || tok == "FLOOD" || tok == "ALL" || tok == "LOCAL" || tok == "TABLE":
		p, _ := parsePort(tok)
		return &Output{Port: p}, nil
	case tok == "CONTROLLER":
		return &Controller{Reason: ReasonAction}, nil
	case key == "CONTROLLER" && hasVal:
		v, err := parseUint(val, 16)
		if err != nil {
			return nil, err
		}
		return &Controller{Reason: ReasonAction, MaxLen: uint16(v)}, nil
	case key == "output" && hasVal:
		if strings.Contains(val, "[") {
			return nil, fmt.Errorf("output to a field is not supported")
		}
		p, err := parsePort(val)
		return &Output{Port: p}, err
	case key == "resubmit" && hasVal:
		p, err := parsePort(val)
		return &Resubmit{Port: p, Table: NoTable}, err
	case key == "goto_table" && hasVal:
		v, err := parseUint(val, 8)
		return &GotoTable{Table: uint8(v)}, err
	case key == "group" && hasVal:
		v, err := parseUint(val, 32)
		return &Group{ID: uint32(v)}, err
	case key == "meter" && hasVal:
		v, err := parseUint(val, 32)
		return &Meter{ID: uint32(v)}, err
	case key == "push_vlan" && hasVal:
		v, err := parseUint(val, 16)
		return &PushVLAN{EtherType: uint16(v)}, err
	case key == "write_metadata" && hasVal:
		vs, ms, masked := strings.Cut(val, "/")
		v, err := parseUint(vs, 64)
		if err != nil {
			return nil, err
		}
		a := &WriteMetadata{Value: v}
		if masked {
			a.Mask, err = parseUint(ms, 64)
		}
		return a, err
	case key == "note" && hasVal:
		var data []byte
		for _, h := range strings.Split(val, ".") {
			c, err := strconv.ParseUint(h, 16, 8)
			if err != nil {
				return nil, fmt.Errorf("bad note byte %q", h)
			}
			data = append(data, byte(c))
		}
		return &Note{Data: data}, nil
	case key == "set_field" && hasVal:
		vs, name, ok := strings.Cut(val, "->")
		if !ok {
			return nil, fmt.Errorf("set_field needs value->field")
		}
		f, found := FieldByName(name)
		if !found {
			return nil, fmt.Errorf("unknown field %q", name)
		}
		v, mask, err := parseFieldValue(f, vs)
		if err != nil {
			return nil, err
		}
		a := &SetField{Field: f, Value: v}
		if mask != f.fullMask() {
			a.Mask = mask
		}
		return a, nil
	case key == "load" && hasVal:
		vs, dst, ok := strings.Cut(val, "->")
		if !ok {
			return nil, fmt.Errorf("load needs value->field")
		}
		r, err := parseSubfield(dst)
		if err != nil {
			return nil, err
		}
		v, err := parseU128(vs)
		if err != nil {
			return nil, err
		}
		a := LoadU128(r, v)
		if a.Mask == r.Field.fullMask() {
			a.Mask = U128{}
		}
		return a, nil
	case key == "move" && hasVal:
		src, dst, ok := strings.Cut(val, "->")
		if !ok {
			return nil, fmt.Errorf("move needs src->dst")
		}
		s, err := parseSubfield(src)
		if err != nil {
			return nil, err
		}
		d, err := parseSubfield(dst)
		return &RegMove{Src: s, Dst: d}, err
	}
	if args, ok := parenArgs(tok, "resubmit"); ok {
		parts := strings.Split(args, ",")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("resubmit needs (port,table[,ct])")
		}
		a := &Resubmit{Table: NoTable}
		if parts[0] != "" {
			p, err := parsePort(parts[0])
			if err != nil {
				return nil, err
			}
			if p != PortInPort {
				a.Port = p
			}
		}
		if parts[1] != "" {
			v, err := parseUint(parts[1], 8)
			if err != nil {
				return nil, err
			}
			a.Table = uint8(v)
		}
		if len(parts) == 3 {
			if parts[2] != "ct" {
				return nil, fmt.Errorf("unknown resubmit option %q", parts[2])
			}
			a.CT = true
		}
		return a, nil
	}
	if args, ok := parenArgs(tok, "conjunction"); ok {
		id, kn, ok := strings.Cut(args, ",")
		k, n, ok2 := strings.Cut(kn, "/")
		if !ok || !ok2 {
			return nil, fmt.Errorf("conjunction needs (id,k/n)")
		}
		iv, err1 := parseUint(id, 32)
		kv, err2 := parseUint(k, 8)
		nv, err3 := parseUint(n, 8)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("bad conjunction numbers")
		}
		return &Conjunction{ID: uint32(iv), Clause: uint8(kv), NClauses: uint8(nv)}, nil
	}
	if args, ok := parenArgs(tok, "controller"); ok {
		return parseController(args)
	}
	if args, ok := parenArgs(tok, "ct"); ok {
		return parseCT(args)
	}
	if tok == "nat" {
		return &NAT{}, nil
	}
	if args, ok := parenArgs(tok, "nat"); ok {
		return parseNAT(args)
	}
	if args, ok := parenArgs(tok, "write_actions"); ok {
		acts, err := ParseActions(args)
		return &WriteActions{Actions: acts}, err
	}
	if args, ok := parenArgs(tok, "learn"); ok {
		return parseLearn(args)
	}
	return nil, fmt.Errorf("unknown action")
}

func parseController(args string) (Action, error) {
	a := &Controller{Reason: ReasonAction}
	for _, kv := range splitTopLevel(args) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "pause":
			a.Pause = true
		case "reason":
			found := false
			for i, n := range reasonNames {
				if n == v {
					a.Reason, found = uint8(i), true
				}
			}
			if !found {
				return nil, fmt.Errorf("unknown reason %q", v)
			}
		case "max_len", "id":
			n, err := parseUint(v, 16)
			if err != nil {
				return nil, err
			}
			if k == "id" {
				a.ControllerID = uint16(n)
			} else {
				a.MaxLen = uint16(n)
			}
		case "meter_id":
			n, err := parseUint(v, 32)
			if err != nil {
				return nil, err
			}
			a.MeterID = uint32(n)
		case "userdata":
			for _, h := range strings.Split(v, ".") {
				c, err := strconv.ParseUint(h, 16, 8)
				if err != nil {
					return nil, fmt.Errorf("bad userdata byte %q", h)
				}
				a.UserData = append(a.UserData, byte(c))
			}
		default:
			return nil, fmt.Errorf("unknown controller option %q", k)
		}
	}
	return a, nil
}

func parseCT(args string) (Action, error) {
	a := &CT{Table: NoTable}
	for _, kv := range splitTopLevel(args) {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case kv == "commit":
			a.Commit = true
		case kv == "force":
			a.Force = true
		case k == "table":
			n, err := parseUint(v, 8)
			if err != nil {
				return nil, err
			}
			a.Table = uint8(n)
		case k == "zone":
			if strings.Contains(v, "[") {
				r, err := parseSubfield(v)
				if err != nil {
					return nil, err
				}
				a.ZoneSrc = &r
			} else {
				n, err := parseUint(v, 16)
				if err != nil {
					return nil, err
				}
				a.Zone = uint16(n)
			}
		case k == "alg":
			switch v {
			case "ftp":
				a.Alg = 21
			case "tftp":
				a.Alg = 69
			default:
				n, err := parseUint(v, 16)
				if err != nil {
					return nil, err
				}
				a.Alg = uint16(n)
			}
		case kv == "nat" || strings.HasPrefix(kv, "nat("):
			nat, err := parseAction(kv)
			if err != nil {
				return nil, err
			}
			a.Actions = append([]Action{nat}, a.Actions...)
		case strings.HasPrefix(kv, "exec("):
			inner, _ := parenArgs(kv, "exec")
			acts, err := ParseActions(inner)
			if err != nil {
				return nil, err
			}
			a.Actions = append(a.Actions, acts...)
		default:
			return nil, fmt.Errorf("unknown ct option %q", kv)
		}
	}
	return a, nil
}

func parseNAT(args string) (Action, error) {
	a := &NAT{}
	for _, kv := range splitTopLevel(args) {
		k, v, hasVal := strings.Cut(kv, "=")
		switch k {
		case "src", "dst":
			a.Src, a.Dst = k == "src", k == "dst"
			if !hasVal {
				continue
			}
			if err := a.parseRange(v); err != nil {
				return nil, err
			}
		case "persistent":
			a.Persistent = true
		case "hash":
			a.Hash = true
		case "random":
			a.Random = true
		default:
			return nil, fmt.Errorf("unknown nat option %q", kv)
		}
	}
	return a, nil
}

// parseRange parses ADDR[-ADDR][:PORT[-PORT]], IPv6 addresses in brackets when ports follow.
func (a *NAT) parseRange(s string) error {
	var addrs, ports string
	if strings.HasPrefix(s, "[") {
		// [a]-[b]:p-q
		i := strings.LastIndex(s, "]")
		addrs = strings.NewReplacer("[", "", "]", "").Replace(s[:i+1])
		ports = strings.TrimPrefix(s[i+1:], ":")
	} else if strings.Count(s, ":") > 1 {
		addrs = s // bare IPv6 range, no ports
	} else {
		addrs, ports, _ = strings.Cut(s, ":")
	}
	lo, hi, isRange := strings.Cut(addrs, "-")
	var err error
	if a.MinAddr, err = netip.ParseAddr(lo); err != nil {
		return fmt.Errorf("bad nat address %q", lo)
	}
	if isRange {
		if a.MaxAddr, err = netip.ParseAddr(hi); err != nil {
			return fmt.Errorf("bad nat address %q", hi)
		}
	}
	if ports != "" {
		plo, phi, isPortRange := strings.Cut(ports, "-")
		v, err := parseUint(plo, 16)
		if err != nil {
			return err
		}
		a.MinPort = uint16(v)
		if isPortRange {
			if v, err = parseUint(phi, 16); err != nil {
				return err
			}
			a.MaxPort = uint16(v)
		}
	}
	return nil
}

func parseLearn(args string) (Action, error) {
	a := &Learn{Priority: defaultPriority}
	for _, kv := range splitTopLevel(args) {
		k, v, hasVal := strings.Cut(kv, "=")
		num := func(bits int) (uint64, error) { return parseUint(v, bits) }
		var err error
		var n uint64
		switch {
		case k == "table" && hasVal:
			n, err = num(8)
			a.Table = uint8(n)
		case k == "idle_timeout" && hasVal:
			n, err = num(16)
			a.IdleTimeout = uint16(n)
		case k == "hard_timeout" && hasVal:
			n, err = num(16)
			a.HardTimeout = uint16(n)
		case k == "fin_idle_timeout" && hasVal:
			n, err = num(16)
			a.FinIdleTimeout = uint16(n)
		case k == "fin_hard_timeout" && hasVal:
			n, err = num(16)
			a.FinHardTimeout = uint16(n)
		case k == "priority" && hasVal:
			n, err = num(16)
			a.Priority = uint16(n)
		case k == "cookie" && hasVal:
			a.Cookie, err = num(64)
		case kv == "send_flow_rem":
			a.Flags |= LearnSendFlowRem
		case kv == "delete_learned":
			a.Flags |= LearnDeleteLearned
		default:
			var spec LearnSpec
			spec, err = parseLearnSpec(kv)
			a.Specs = append(a.Specs, spec)
		}
		if err != nil {
			return nil, fmt.Errorf("learn %q: %w", kv, err)
		}
	}
	return a, nil
}

func parseLearnSpec(s string) (LearnSpec, error) {
	if rest, ok := strings.CutPrefix(s, "load:"); ok {
		src, dst, ok := strings.Cut(rest, "->")
		if !ok {
			return LearnSpec{}, fmt.Errorf("load needs src->dst")
		}
		d, err := parseSubfield(dst)
		if err != nil {
			return LearnSpec{}, err
		}
		spec := LearnSpec{Kind: LearnLoad, Dst: d}
		if strings.Contains(src, "[") {
			spec.Src, err = parseSubfield(src)
		} else {
			spec.Immediate = true
			spec.Value, err = parseU128(src)
		}
		return spec, err
	}
	if rest, ok := strings.CutPrefix(s, "output:"); ok {
		r, err := parseSubfield(rest)
		return LearnSpec{Kind: LearnOutput, Src: r}, err
	}
	dst, src, hasSrc := strings.Cut(s, "=")
	if !strings.Contains(dst, "[") {
		// field=value: match the whole field against an immediate value.
		f, ok := FieldByName(dst)
		if !ok || !hasSrc {
			return LearnSpec{}, fmt.Errorf("unknown learn spec")
		}
		v, _, err := parseFieldValue(f, src)
		return LearnSpec{Kind: LearnMatch, Immediate: true, Value: v, Dst: f.All()}, err
	}
	d, err := parseSubfield(dst)
	if err != nil {
		return LearnSpec{}, err
	}
	spec := LearnSpec{Kind: LearnMatch, Src: d, Dst: d}
	switch {
	case !hasSrc:
	case strings.Contains(src, "["):
		spec.Src, err = parseSubfield(src)
	default:
		spec.Src = FieldRange{}
		spec.Immediate = true
		spec.Value, err = parseU128(src)
	}
	return spec, err
}
