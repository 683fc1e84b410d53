package controlplane

import (
	"net"
	"sort"
	"strconv"
	"strings"
)

// GroupMemberSet is a set of GroupMembers keyed by MemberKey. The key holds the
// member's identity and its IPs and ports, so a member whose IP changes shows
// up in a difference as one removal plus one addition, which is exactly the
// patch an agent needs.
type GroupMemberSet map[string]*GroupMember

// MemberKey is the key of a member in a GroupMemberSet.
func MemberKey(m *GroupMember) string {
	var b strings.Builder
	switch {
	case m.Pod != nil:
		b.WriteString("pod:")
		b.WriteString(m.Pod.Namespace)
		b.WriteByte('/')
		b.WriteString(m.Pod.Name)
	case m.Node != nil:
		b.WriteString("node:")
		b.WriteString(m.Node.Name)
	case m.Service != nil:
		b.WriteString("service:")
		b.WriteString(m.Service.Namespace)
		b.WriteByte('/')
		b.WriteString(m.Service.Name)
	default:
		b.WriteString("ip:")
	}
	for _, ip := range m.IPs {
		b.WriteByte('|')
		b.WriteString(net.IP(ip).String())
	}
	for _, p := range m.Ports {
		b.WriteByte('|')
		b.WriteString(p.Name)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(int(p.Port)))
		b.WriteByte('/')
		b.WriteString(string(p.Protocol))
	}
	return b.String()
}

// NewGroupMemberSet builds a set holding the given members.
func NewGroupMemberSet(members ...*GroupMember) GroupMemberSet {
	s := make(GroupMemberSet, len(members))
	s.Insert(members...)
	return s
}

// Insert adds members to the set.
func (s GroupMemberSet) Insert(members ...*GroupMember) {
	for _, m := range members {
		s[MemberKey(m)] = m
	}
}

// Delete removes members from the set.
func (s GroupMemberSet) Delete(members ...*GroupMember) {
	for _, m := range members {
		delete(s, MemberKey(m))
	}
}

// Has reports whether the set holds the member.
func (s GroupMemberSet) Has(m *GroupMember) bool {
	_, ok := s[MemberKey(m)]
	return ok
}

// Len is the number of members.
func (s GroupMemberSet) Len() int { return len(s) }

// Union returns a new set with the members of both sets.
func (s GroupMemberSet) Union(o GroupMemberSet) GroupMemberSet {
	r := make(GroupMemberSet, len(s)+len(o))
	for k, m := range s {
		r[k] = m
	}
	for k, m := range o {
		r[k] = m
	}
	return r
}

// Difference returns a new set with the members of s that are not in o.
func (s GroupMemberSet) Difference(o GroupMemberSet) GroupMemberSet {
	r := GroupMemberSet{}
	for k, m := range s {
		if _, ok := o[k]; !ok {
			r[k] = m
		}
	}
	return r
}

// Equal reports whether both sets hold the same member keys.
func (s GroupMemberSet) Equal(o GroupMemberSet) bool {
	if len(s) != len(o) {
		return false
	}
	for k := range s {
		if _, ok := o[k]; !ok {
			return false
		}
	}
	return true
}

// Items returns the members sorted by key, so that serialized groups are stable.
func (s GroupMemberSet) Items() []GroupMember {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r := make([]GroupMember, 0, len(s))
	for _, k := range keys {
		r = append(r, *s[k])
	}
	return r
}
