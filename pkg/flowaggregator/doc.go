// Package flowaggregator is the Flow Aggregator: a Deployment that receives
// the records every agent's FlowExporter (pkg/agent/flowexporter) sends: over
// gRPC (upstream's FlowExportService, port 14739, mutual TLS with a CA it
// makes and publishes for the agents: pkg/flowtls), or as IPFIX over TCP,
// UDP or TLS (port 4739, one decoding Session (pkg/ipfix) per peer). It joins the two records of one inter-node connection — the source
// node's and the destination node's, keyed by 5-tuple and protocol — into one
// record naming both Pods and Nodes (Correlator; a side whose partner does
// not come within a bounded wait is released alone; intra-node and external
// records need no partner, nor those an egress rule denied), computes
// throughput from the deltas, outputs a live connection again each active
// timeout while its agents send nothing (Aggregator), keeps the
// latest records in a bounded ring (Store) and hands each record to the
// exporters: IPFIX to a collector with upstream's aggregated elements
// (IPFIXExporter), a size-bounded JSON-lines log (JSONLog), and the HTTP API
// `antctl get flows` and the web UI read (/flows, /flows/stream). Its
// configuration is flow-aggregator.conf in upstream's shape (Config); a key
// it does not know, or a value it cannot use, stops it at start with the key
// named. docs/flow-export.md says how to deploy and query it.
package flowaggregator
