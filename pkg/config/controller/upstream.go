package controller

import "antrea.io/antrea/pkg/config/internal/strict"

// spec declares upstream's feature gates and the upstream keys this Antrea
// does not implement, with the values accepted for them: upstream's
// defaults as its chart (build/charts/antrea/conf/antrea-controller.conf of
// antrea-io/antrea) writes them, so that file loads here; and, for keys
// that have no effect while their feature is off, any value.
var spec = strict.Spec{
	GatesKey: "featureGates",
	Gates: []strict.Gate{
		{Name: "AdminNetworkPolicy"},
		{Name: "AllAlpha"},
		{Name: "AllBeta"},
		{Name: "AntreaIPAM"},
		{Name: "AntreaPolicy", Default: true},
		{Name: Egress, Default: true, Implemented: true},
		{Name: "ExternalNode"},
		{Name: "IPsecCertAuth"},
		{Name: L7NetworkPolicy, Implemented: true},
		{Name: "Multicast"},
		{Name: "Multicluster"},
		{Name: "NetworkPolicyStats", Default: true},
		{Name: "NodeIPAM"},
		{Name: ServiceExternalIP, Implemented: true},
		{Name: SupportBundleCollection, Implemented: true},
		{Name: "Traceflow", Default: true},
	},
	Unsupported: []strict.Unsupported{
		{Key: "clientConnection.acceptContentTypes", Accept: []any{""}},
		{Key: "clientConnection.contentType", Accept: []any{""}},
		{Key: "clientConnection.qps", Accept: []any{0}},
		{Key: "clientConnection.burst", Accept: []any{0}},
		{Key: "legacyCRDMirroring", AnyValue: true},
		{Key: "nodeIPAM.enableNodeIPAM", Accept: []any{false}, Why: "NodeIPAM is not implemented"},
		{Key: "nodeIPAM.*", AnyValue: true},
		{Key: "ipsecCSRSigner.*", AnyValue: true},
		{Key: "multicluster.enableStretchedNetworkPolicy", Accept: []any{false}, Why: "Multicluster is not implemented"},
		{Key: "multicluster.*", AnyValue: true},
	},
}
