package networkpolicy

import (
	"encoding/json"
	"fmt"
	"net/http"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/util/dnsname"
)

// FQDNCachePath is where the agent API serves the FQDN cache (antctl get
// fqdncache), upstream's path.
const FQDNCachePath = "/fqdncache"

// FQDNCacheHandler serves the addresses the agent learned for the names of
// toFQDN rules, by name then address; ?domain= keeps the names a name or a
// wildcard pattern (*.example.com, as in a rule's fqdn) matches. An invalid
// pattern is refused naming the parameter.
func (c *Controller) FQDNCacheHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		domain := r.URL.Query().Get("domain")
		if domain != "" {
			domain = dnsname.Normalize(domain)
			if err := dnsname.Validate(domain); err != nil {
				http.Error(w, fmt.Sprintf("domain: %v", err), http.StatusBadRequest)
				return
			}
		}
		out := []apis.FQDNCacheEntry{}
		for _, e := range c.FQDNCache() {
			if domain != "" && !dnsname.Match(domain, e.Name) {
				continue
			}
			out = append(out, apis.FQDNCacheEntry{FQDNName: e.Name, IPAddress: e.Addr.String(), ExpirationTime: e.Expires.UTC()})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}
