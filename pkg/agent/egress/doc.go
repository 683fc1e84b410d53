// Package egress is the agent's side of Egress (crd.antrea.io/v1beta1): pods
// an Egress selects leave the cluster with its Egress IP as their source,
// from whichever node holds the IP.
//
//   - Cluster: the agents form a memberlist cluster on their transport
//     addresses (clusterPort, 10351). Which node holds an IP is a pure
//     function of the alive members the IP's ExternalIPPool allows (Owner,
//     rendezvous hashing), so every agent agrees without a leader; when a
//     node fails, memberlist sees it within seconds and only its IPs move;
//     when it returns they move back.
//   - IPAssigner: the holder adds the IP (/32 or /128, labelled) to the
//     interface with the node's address and announces it with gratuitous ARP.
//   - Controller: from the Egresses, their pools, the Nodes and the
//     EgressGroups (controlplane.antrea.io, every member), it writes the
//     node netfilter's SNAT of every member pod of the Egresses this node
//     holds (nodenet.SetEgressSNAT), and the OpenFlow Egress flows that send
//     this node's member pods' traffic through the tunnel to the holder
//     (agentof.EgressFlows), and the holder reports the Egress status.
//
// docs/egress.md is the user's guide; docs/design/ovs-pipeline.md and
// docs/design/node-netfilter.md show the flows and the chain.
package egress
