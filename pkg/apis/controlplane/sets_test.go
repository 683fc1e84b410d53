package controlplane

import (
	"net"
	"testing"
)

func member(name, ip string, ports ...NamedPort) *GroupMember {
	return &GroupMember{Pod: &PodReference{Namespace: "ns", Name: name}, IPs: []IPAddress{IPAddress(net.ParseIP(ip))}, Ports: ports}
}

func TestGroupMemberSetDifferences(t *testing.T) {
	a := member("a", "10.0.0.1")
	aNewIP := member("a", "10.0.0.9")
	aNamedPort := member("a", "10.0.0.1", NamedPort{Name: "http", Port: 80, Protocol: ProtocolTCP})
	b := member("b", "10.0.0.2")
	tests := []struct {
		name        string
		old, new    GroupMemberSet
		wantAdded   int
		wantRemoved int
	}{
		{"equal sets differ in nothing", NewGroupMemberSet(a, b), NewGroupMemberSet(member("a", "10.0.0.1"), b), 0, 0},
		{"a member whose IP changed is one removal and one addition", NewGroupMemberSet(a), NewGroupMemberSet(aNewIP), 1, 1},
		{"a member whose named ports changed is one removal and one addition", NewGroupMemberSet(a), NewGroupMemberSet(aNamedPort), 1, 1},
		{"a new member is one addition", NewGroupMemberSet(a), NewGroupMemberSet(a, b), 1, 0},
		{"from nil to one member is one addition", nil, NewGroupMemberSet(a), 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.new.Difference(tt.old).Len(); got != tt.wantAdded {
				t.Errorf("added = %d, want %d", got, tt.wantAdded)
			}
			if got := tt.old.Difference(tt.new).Len(); got != tt.wantRemoved {
				t.Errorf("removed = %d, want %d", got, tt.wantRemoved)
			}
			if eq := tt.old.Equal(tt.new); eq != (tt.wantAdded == 0 && tt.wantRemoved == 0) {
				t.Errorf("Equal = %v", eq)
			}
		})
	}
	if u := NewGroupMemberSet(a).Union(NewGroupMemberSet(b, a)); u.Len() != 2 || !u.Has(b) {
		t.Errorf("Union = %v, want a and b", u)
	}
	if items := NewGroupMemberSet(b, a).Items(); items[0].Pod.Name != "a" {
		t.Errorf("Items not sorted: first is %s", items[0].Pod.Name)
	}
}
