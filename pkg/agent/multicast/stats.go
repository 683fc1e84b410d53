package multicast

import (
	"encoding/json"
	"net/http"
	"sort"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/interfacestore"
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
