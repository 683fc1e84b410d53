// Package nodenet is the one owner of the node's netfilter. Everything the
// agent writes into the node's (not OVS's) packet filter lives in one
// nftables table, TableFamily TableName ("inet antrea": family inet, so an
// IPv6 rule needs no new table), written only through knftables
// transactions. Each feature owns a group of chains named "<feature>-<hook>"
// (base chains on the netfilter hook) and "<feature>-<purpose>" (regular
// chains it jumps to); a feature rewrites only its own chains, each time
// from its whole desired state, in one transaction, so a reader of
// `nft list table inet antrea` finds a feature's rules by prefix and never
// sees half an update. Features today: hostport (HostPorts: DNAT of pods'
// hostPorts, including 127.0.0.1, and the masquerade it needs), masquerade
// (Masquerade: pod traffic leaving the node), nodeport (NodePorts:
// AntreaProxy's NodePort DNAT, driven by pkg/agent/route's NodePath), egress
// (SetEgressSNAT), nodeportlocal (SetNodePortLocal: node ports of
// annotated Services' Pods, driven by pkg/agent/nodeportlocal) and
// nodepolicy (NodePolicy: ClusterNetworkPolicies applied to Nodes, driven
// by the agent's policy controller);
// docs/design/node-netfilter.md keeps the map of who writes what.
package nodenet

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/knftables"
)

// The node's netfilter table.
const (
	TableName   = "antrea"
	TableFamily = knftables.InetFamily
)

// Table is the node's nftables table: it serializes the features'
// transactions and adds the table itself to each, so a feature's first
// write also creates it.
type Table struct {
	nft knftables.Interface
	mu  sync.Mutex
	// other opens another table (to delete what earlier agents kept
	// elsewhere); nil: there is none to delete (tests on a fake).
	other func(family knftables.Family, name string) (knftables.Interface, error)
}

// New opens the node's table through the nft binary (in the caller's
// network namespace, which must be the node's).
func New() (*Table, error) {
	nft, err := knftables.New(TableFamily, TableName)
	if err != nil {
		return nil, fmt.Errorf("nftables table %s %s: %w", TableFamily, TableName, err)
	}
	t := NewWith(nft)
	t.other = func(family knftables.Family, name string) (knftables.Interface, error) {
		return knftables.New(family, name)
	}
	return t, nil
}

// deleteOtherTable deletes a table earlier agents kept (not this one); a
// table that is not there is no error.
func (t *Table) deleteOtherTable(ctx context.Context, family knftables.Family, name string) error {
	if t.other == nil {
		return nil
	}
	nft, err := t.other(family, name)
	if err != nil {
		return fmt.Errorf("nftables table %s %s: %w", family, name, err)
	}
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("delete nftables table %s %s: %w", family, name, err)
	}
	return nil
}

// NewWith uses nft, an Interface for family TableFamily and table TableName
// (knftables.NewFake in tests).
func NewWith(nft knftables.Interface) *Table { return &Table{nft: nft} }

// run writes one transaction: the table, then what fill adds.
func (t *Table) run(ctx context.Context, fill func(tx *knftables.Transaction)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	tx := t.nft.NewTransaction()
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("Antrea: the node's netfilter, one chain group per feature")})
	fill(tx)
	if err := t.nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("nftables table %s %s: %w", TableFamily, TableName, err)
	}
	return nil
}

// Remove deletes the table and everything in it (the agent's uninstall);
// a table that is not there is no error (run adds it first).
func (t *Table) Remove(ctx context.Context) error {
	return t.run(ctx, func(tx *knftables.Transaction) { tx.Delete(&knftables.Table{}) })
}

// baseChain declares one of a feature's base chains.
func baseChain(name string, typ knftables.BaseChainType, hook knftables.BaseChainHook, prio knftables.BaseChainPriority) *knftables.Chain {
	return &knftables.Chain{Name: name, Type: &typ, Hook: &hook, Priority: &prio}
}
