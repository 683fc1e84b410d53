package multicast

import (
	"cmp"
	"encoding/json"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sort"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/interfacestore"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// PodStatsPath is where the agent API serves the local Pods' multicast
// counters (antctl get podmulticaststats).
const PodStatsPath = "/podmulticaststats"

// PodStats are the multicast counters of the local Pods, those of
// namespace ns (all when empty) and of pod (all when empty).
func (c *Controller) PodStats(r *http.Request, ns, pod string) ([]apis.PodMulticastStats, error) {
	counters, err := c.cfg.Flows.MulticastPodStats(r.Context())
	if err != nil {
		return nil, err
	}
	out := []apis.PodMulticastStats{}
	for _, i := range c.cfg.Interfaces.GetInterfacesByType(interfacestore.ContainerInterface) {
		if i.ContainerInterfaceConfig == nil || i.OVSPortConfig == nil {
			continue
		}
		if (ns != "" && i.PodNamespace != ns) || (pod != "" && i.PodName != pod) {
			continue
		}
		cn := counters[uint32(i.OFPort)]
		out = append(out, apis.PodMulticastStats{PodName: i.PodName, PodNamespace: i.PodNamespace, Inbound: cn.Inbound, Outbound: cn.Outbound})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].PodNamespace != out[b].PodNamespace {
			return out[a].PodNamespace < out[b].PodNamespace
		}
		return out[a].PodName < out[b].PodName
	})
	return out, nil
}

// PodStatsHandler serves PodStats (?namespace=&name=, upstream's
// parameters).
func (c *Controller) PodStatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		out, err := c.PodStats(r, q.Get("namespace"), q.Get("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// Groups are the multicast groups the local Pods joined and, per group,
// those Pods (sorted), for the controller's multicastgroups: the
// NetworkPolicy stats collector sends them in its NodeStatsSummary.
// Members whose port is no longer a Pod's are left out.
func (c *Controller) Groups() []cpv1beta2.MulticastGroupInfo {
	c.mu.Lock()
	byGroup := make(map[netip.Addr][]uint32, len(c.members))
	for g, ports := range c.members {
		for p := range ports {
			byGroup[g] = append(byGroup[g], p)
		}
	}
	c.mu.Unlock()
	groups := slices.SortedFunc(maps.Keys(byGroup), func(a, b netip.Addr) int { return a.Compare(b) })
	out := make([]cpv1beta2.MulticastGroupInfo, 0, len(groups))
	for _, g := range groups {
		info := cpv1beta2.MulticastGroupInfo{Group: g.String()}
		for _, p := range byGroup[g] {
			i, ok := c.cfg.Interfaces.GetInterfaceByOFPort(int32(p))
			if !ok || i.ContainerInterfaceConfig == nil {
				continue
			}
			info.Pods = append(info.Pods, cpv1beta2.PodReference{Name: i.PodName, Namespace: i.PodNamespace})
		}
		if len(info.Pods) == 0 {
			continue
		}
		slices.SortFunc(info.Pods, func(a, b cpv1beta2.PodReference) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		out = append(out, info)
	}
	return out
}
