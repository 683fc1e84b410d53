// Package query answers antctl's questions about what Antrea computed, as
// data: the controlplane NetworkPolicies, AppliedToGroups and AddressGroups
// filtered as the user asked, and which policies and rules concern a pod.
// It takes its clients as values (Clients) and knows nothing of flags or
// printing, so antctl's commands (flags → query → printer) and a web UI's
// backend ask the same questions the same way.
package query
