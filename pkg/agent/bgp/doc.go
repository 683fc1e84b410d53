// Package bgp is the agent's side of BGPPolicy (crd.antrea.io/v1alpha1,
// docs/bgp-policy.md): a BGP speaker in the agent's process that advertises
// this Node's Pod CIDRs, Service IPs and the Egress IPs it holds to the
// peers of the BGPPolicy in effect on the Node.
//
//   - Effective (policy.go): of the BGPPolicies whose nodeSelector selects
//     the Node, the oldest is in effect (upstream's rule); the others are
//     reported in Events and logs.
//   - Desired (routes.go): a pure function from the policy's
//     advertisements, the Node's Pod CIDRs, the Services and their
//     EndpointSlices (externalTrafficPolicy / internalTrafficPolicy Local:
//     only with a ready local endpoint) and the held Egress IPs to the set of
//     prefixes to advertise, each with where it comes from.
//   - GoBGP (gobgp.go): the speaker, github.com/osrg/gobgp/v3 in-process,
//     behind the Speaker interface the Controller declares.
//   - Controller (controller.go): on every event, the whole state: the
//     speaker's global configuration (a change of ASN, port, router ID or
//     confederation restarts it), its peers (added, updated, removed one by
//     one) and its routes (the difference between desired and advertised).
//     It answers the agent API's /bgppolicy, /bgppeers and /bgproutes
//     (antctl get bgppolicy|bgppeers|bgproutes).
//
// Routes received from the peers are not installed, as upstream.
package bgp
