package antctl

import (
	"context"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
)

// fqdnCache reads the addresses a node's agent learned for the names of
// toFQDN rules (GET /fqdncache), those of names domain matches when given.
func (a *agentClient) fqdnCache(ctx context.Context, domain string) ([]apis.FQDNCacheEntry, error) {
	var q url.Values
	if domain != "" {
		q = url.Values{"domain": []string{domain}}
	}
	var out []apis.FQDNCacheEntry
	err := a.get(ctx, "/fqdncache", q, &out)
	return out, err
}

func newGetFQDNCacheCommand(g *getOptions) *cobra.Command {
	var domain string
	cmd := &cobra.Command{
		Use:   "fqdncache --node NODE [-d DOMAIN]",
		Short: "Show the addresses a Node's agent learned for the names of toFQDN rules",
		Long: `Show the FQDN cache of a Node's agent: for each name a toFQDN rule selects, the
addresses the Pods' DNS answers gave and when each expires (the answer's TTL,
at least fqdnCacheMinTTL; an expired address a live connection still uses stays
until that connection ends). -d keeps the names a name or a wildcard pattern
(*.example.com) matches. The cache is per Node: ask the Node of the Pods whose
lookups you are after.`,
		Example: `  antctl get fqdncache --node node-1
  antctl get fqdncache --node node-1 --domain '*.antrea.io'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ac, err := g.nodeAgentAPI(cmd, "a Node's FQDN cache")
			if err != nil {
				return err
			}
			entries, err := ac.fqdnCache(cmd.Context(), domain)
			if err != nil {
				return err
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, entries)
			}
			t := &table{header: []string{"FQDN", "ADDRESS", "EXPIRATION TIME"}}
			for _, e := range entries {
				t.add(e.FQDNName, e.IPAddress, e.ExpirationTime.UTC().Format(time.RFC3339))
			}
			return t.write(g.env.Out)
		},
	}
	cmd.Flags().String(nodeFlag, "", "The Node whose agent API to ask (local mode: this Node)")
	cmd.Flags().StringVarP(&domain, "domain", "d", "", "Only the names this name or wildcard pattern matches")
	return cmd
}
