package openflow

// Cookies, declared once (as fields.go declares registers). A flow's cookie
// says which feature wrote it and whether it outlives the agent:
//
//	bits 63..32  the agent's round, bumped at every agent start   round-scoped flows
//	bits 31..0   the feature (cookiePodConnectivity, cookieTraceflow|tag)
//
//	bits 63..48  a feature tag (cookieServiceTag, ...)             flows that outlive the agent
//	bits 47..0   the feature's own use (cookiePolicyStatsFlag, an endpoint)
//
// Round-scoped flows of an earlier run that were not re-installed are found
// and removed by their round (DeleteRound) without flushing the bridge.
// Tagged flows carry no round: a restarted agent reads them back (the
// features' Recover* calls) and rewrites only what changed, so DeleteRound
// must leave them. A round never has a tag's high 16 bits in practice
// (rounds count agent starts).
type Cookie uint64

// Cookie layout.
const (
	cookieRoundShift        = 32
	cookieRoundMask  Cookie = 0xffffffff << cookieRoundShift
	// cookieTagMask selects the tag of a tagged cookie.
	cookieTagMask Cookie = 0xffff << 48
)

// Round-scoped cookies (low 32 bits; the round is added by withRound).
const (
	// cookiePodConnectivity is the cookie of the fixed flows and of the
	// pods' and peer nodes' flows.
	cookiePodConnectivity Cookie = 0x1
	// cookieEgress is the cookie of the Egress feature's flows.
	cookieEgress Cookie = 0x2
	// cookieFQDN is the cookie of the DNS interception flows of toFQDN
	// rules (fqdn.go).
	cookieFQDN Cookie = 0x3
	// cookieTrafficControl is the cookie of TrafficControl's flows
	// (traffic_control.go).
	cookieTrafficControl Cookie = 0x4
	// cookieMulticast is the cookie of the multicast feature's flows
	// (multicast.go).
	cookieMulticast Cookie = 0x5
	// cookieL7Policy is the cookie of the layer 7 steering flows
	// (l7_policy.go).
	cookieL7Policy Cookie = 0x6
	// cookieTraceflow is the cookie of a Traceflow tag's flows, with the
	// tag in its low byte.
	cookieTraceflow Cookie = 0x7f000000
	// cookiePacketCapture is the cookie of a packet capture's flows, with
	// its id in the low byte.
	cookiePacketCapture Cookie = 0x7e000000
)

// Tagged cookies (high 16 bits): flows that outlive the agent.
const (
	// cookieServiceTag is the cookie of the flows of Service ports and
	// endpoints (ServiceLB, EndpointDNAT, SessionAffinity's lookup and
	// learn flows).
	cookieServiceTag Cookie = 0x5ec1 << 48
	// cookieAffinityTag is the cookie of the flows SessionAffinity learns:
	// then the endpoint's port and IPv4 address (affinityCookie), so the
	// flows learned for one endpoint can be deleted alone.
	cookieAffinityTag Cookie = 0x5ec2 << 48
	// cookieLBSourceRangesTag is the cookie of the LoadBalancer source
	// ranges' flows: they outlive the agent with the Services they guard
	// (FinishSourceRangesRecovery removes what the new run did not set).
	cookieLBSourceRangesTag Cookie = 0x5ec3 << 48
	// cookiePolicyTag is the cookie of policy rule and isolation flows.
	cookiePolicyTag Cookie = 0x9011 << 48
	// cookiePolicyStatsFlag marks, within cookiePolicyTag, the flows whose
	// counters are a rule's statistics: the metric flows of Allow rules and
	// the conj_id flows of the other rules. PolicyRuleStats dumps only these.
	cookiePolicyStatsFlag Cookie = 1 << 47
)

// withRound is a round-scoped cookie of the given round.
func withRound(round uint32, c Cookie) uint64 { return uint64(round)<<cookieRoundShift | uint64(c) }
