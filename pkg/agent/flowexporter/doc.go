// Package flowexporter is the agent's FlowExporter: every poll interval it
// reads the connections the datapath tracks (ConnectionSource: OVS's
// userspace conntrack through `ovs-appctl dpctl/dump-conntrack`; a
// netfilter conntrack source for the kernel datapath fits the same
// interface), adds the packet and byte counts the userspace conntrack does
// not keep (CounterFeed: the IPFIX records ovs-vswitchd exports for the
// bridge), keeps them in a bounded Store keyed by 5-tuple and zone, and
// sends an IPFIX record (pkg/ipfix) per connection at the active timeout
// while it lives, at the idle timeout when it stops moving, and when it
// ends, to the collector: over gRPC (upstream's FlowExportService) or as
// IPFIX over TLS, TCP or UDP. Records carry upstream Antrea's elements: the
// local pods' names, namespaces and labels, the node, the Service's ClusterIP
// and port, the flow type, the TCP state and the NetworkPolicy rules that
// allowed the connection. Connections a rule denied never reach conntrack's
// committed entries: the policy flows that drop send a metered packet-in of
// what they drop, which the agent's policy controller names and hands to the
// exporter's bounded DenyStore (Exporter.Deny); they are exported with the
// rule that denied them. The poll loop never
// waits on the collector: batches go through a bounded queue, and the
// sender reconnects by itself. docs/flow-export.md says how to enable it.
package flowexporter
