// Package query answers antctl's questions about a cluster's Antrea as
// data, for antctl's commands (flags → query → printer, as kubectl's
// pkg/cmd/<verb>) and for other programs such as the web UI's backend:
//
//   - what the controller computed: NetworkPolicies (with PolicySelector,
//     SummarizePolicies for span and realization), Groups (AppliedToGroups,
//     AddressGroups, GroupSpans), and Endpoint, which policies and rules
//     concern a Pod;
//   - the policies' traffic statistics (Stats);
//   - what the components report and run: AgentInfos, ControllerInfo,
//     ClusterVersions, ClusterFeatureGates;
//   - Traceflow: NewTraceflow checks a request, RunTraceflow runs it.
//
// It takes its clients as values (Clients, NewClients) and knows nothing of
// flags or printing; errors name the object and, for a typo, the closest
// existing name. querytest holds a small fake cluster for tests.
package query
