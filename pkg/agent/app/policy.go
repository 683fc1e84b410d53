package app

import (
	"context"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/klog/v2"

	npcontroller "antrea.io/antrea/pkg/agent/controller/networkpolicy"
	"antrea.io/antrea/pkg/agent/flowexporter"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agentmetrics "antrea.io/antrea/pkg/agent/metrics"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/stats"
)

// setupPolicy runs the NetworkPolicy controller (pkg/agent/controller/
// networkpolicy): it watches this node's span of the computed policies and
// realizes them. Policy flows of an earlier run stay in place (their cookie
// has no round): the controller adopts them and writes only what changed.
func setupPolicy(ctx context.Context, d *deps) (component, error) {
	controlplane := d.controlplane
	recovered, err := d.flows.RecoverPolicy(ctx)
	if err != nil {
		return nil, err
	}
	purger := d.purger
	var denied func(flowexporter.DeniedPacket)
	if d.exporter != nil {
		denied = d.exporter.Deny
	}
	d.podEvents = make(chan interfacestore.PodEvent, 64)
	var l7 npcontroller.L7Engine
	if d.l7 != nil {
		l7 = d.l7
	}
	policies := npcontroller.NewController(d.o.NodeName, controlplane, d.flows, d.store, npcontroller.Options{
		Recovered: recovered,
		PodEvents: d.podEvents,
		// A change that may forbid what was allowed purges the datapath
		// cache before the policy is reported realized: OVS re-translates
		// cached megaflows only after the commit is answered (package dpcache).
		OnNarrowed: func() {
			if err := purger.Sync(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Could not purge the datapath flow cache after a narrowing policy change")
			}
		},
		PacketIns: &npcontroller.PacketIns{IO: d.packets, Parser: d.flows, AuditLogDir: npcontroller.DefaultAuditLogDir},
		// An expired address a live connection still goes to is kept.
		FQDN: &npcontroller.FQDNOptions{MinTTL: d.o.FQDNCacheMinTTL, Flows: d.flows, DNSServer: clusterDNS(ctx, d),
			Live: npcontroller.ConntrackLive(&flowexporter.DpctlSource{RunDir: d.o.OVSRunDir, Zones: agentof.CtZones()})},
		Denied:     denied,
		NodePolicy: setupNodePolicyWriter(ctx, d),
		Services:   npcontroller.NewServiceLookup(d.informers.Core().V1().Services()),
		L7:         l7,
	})
	d.restore.released = purger.Changed
	d.policies = policies
	d.api.handle(npcontroller.FQDNCachePath, policies.FQDNCacheHandler())
	d.policyRules.Store(policies)
	d.api.metrics.Policies = func() agentmetrics.PolicyCounts {
		c := policies.Counts()
		return agentmetrics.PolicyCounts{NetworkPolicies: c.NetworkPolicies, IngressRules: c.IngressRules,
			EgressRules: c.EgressRules, AddressGroups: c.AddressGroups, AppliedToGroups: c.AppliedToGroups}
	}
	return loop(policies.Run), nil
}

// setupPolicyStats reports the policy rules' counters to the controller
// every statsCollectionInterval (the NetworkPolicyStats gate), with the
// multicast groups of the local Pods when multicast is on.
func setupPolicyStats(_ context.Context, d *deps) (component, error) {
	if d.o.StatsInterval <= 0 {
		return nil, nil
	}
	c := stats.NewCollector(d.o.NodeName, d.o.StatsInterval, d.policies, d.flows,
		stats.ClientReporter{Client: d.controlplane})
	if d.multicast != nil {
		c.SetMulticastGroups(d.multicast)
	}
	return loop(c.Run), nil
}

// clusterDNS is the DNS server the agent asks for the exact names of
// toFQDN rules: dnsServerOverride, else the ClusterIP of the Service
// kube-system/kube-dns (as upstream), else none (names are then learned
// from the pods' lookups only).
func clusterDNS(ctx context.Context, d *deps) string {
	if d.o.DNSServerOverride != "" {
		return d.o.DNSServerOverride
	}
	if d.kube == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	svc, err := d.kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		klog.InfoS("No cluster DNS Service: toFQDN names are learned from the pods' lookups only", "err", err)
		return ""
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return ""
	}
	return netip.AddrPortFrom(ip, 53).String()
}
