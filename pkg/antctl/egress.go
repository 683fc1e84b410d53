package antctl

import (
	"context"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/antctl/query"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

func newGetEgressCommand(g *getOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "egress [NAME]",
		Aliases: []string{"egresses", "eg"},
		Short:   "Show Egresses: their IP, its pool, the Node holding it (crd.antrea.io/v1beta1)",
		Long: `Show the Egresses (docs/egress.md): the Egress IP (spec.egressIP, allocated by antrea-controller
from the pool when the Egress gave none), the ExternalIPPool, the Node that holds the IP as the
agents report it (status.egressNode), and whether antrea-controller could allocate the IP.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.getClients()
			if err != nil {
				return err
			}
			egresses, err := query.Egresses(cmd.Context(), c, firstArg(args))
			if err != nil {
				return err
			}
			if g.output != outputTable {
				if len(args) == 1 {
					return writeObject(g.env.Out, g.output, egresses[0])
				}
				return writeObject(g.env.Out, g.output, egresses)
			}
			return writeEgressTable(g.env.Out, egresses)
		},
	}
}

func newGetExternalIPPoolCommand(g *getOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "externalippool [NAME]",
		Aliases: []string{"externalippools", "eip"},
		Short:   "Show ExternalIPPools: their ranges and how many IPs are used (crd.antrea.io/v1beta1)",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runExternalIPPools(cmd.Context(), args)
		},
	}
}

func (g *getOptions) runExternalIPPools(ctx context.Context, args []string) error {
	c, err := g.getClients()
	if err != nil {
		return err
	}
	pools, err := query.ExternalIPPools(ctx, c, firstArg(args))
	if err != nil {
		return err
	}
	if g.output != outputTable {
		if len(args) == 1 {
			return writeObject(g.env.Out, g.output, pools[0])
		}
		return writeObject(g.env.Out, g.output, pools)
	}
	return writeExternalIPPoolTable(g.env.Out, pools)
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// writeEgressTable prints one row per Egress.
func writeEgressTable(w io.Writer, egresses []crdv1beta1.Egress) error {
	t := &table{header: []string{"NAME", "EGRESSIP", "EXTERNALIPPOOL", "NODE", "IP-ALLOCATED"}}
	for _, eg := range egresses {
		ip, pool := eg.Spec.EgressIP, eg.Spec.ExternalIPPool
		if len(eg.Spec.EgressIPs) > 0 {
			ip = strings.Join(eg.Spec.EgressIPs, ",")
		}
		if len(eg.Spec.ExternalIPPools) > 0 {
			pool = strings.Join(eg.Spec.ExternalIPPools, ",")
		}
		allocated := "-"
		for _, c := range eg.Status.Conditions {
			if c.Type == crdv1beta1.IPAllocated {
				allocated = string(c.Status)
				if c.Reason != "" && c.Status != "True" {
					allocated += " (" + c.Reason + ")"
				}
			}
		}
		t.add(eg.Name, orNone(ip), orNone(pool), orNone(eg.Status.EgressNode), allocated)
	}
	return t.write(w)
}

// writeExternalIPPoolTable prints one row per pool.
func writeExternalIPPoolTable(w io.Writer, pools []crdv1beta1.ExternalIPPool) error {
	t := &table{header: []string{"NAME", "RANGES", "TOTAL", "USED"}}
	for _, p := range pools {
		var ranges []string
		for _, r := range p.Spec.IPRanges {
			if r.CIDR != "" {
				ranges = append(ranges, r.CIDR)
			} else {
				ranges = append(ranges, r.Start+"-"+r.End)
			}
		}
		t.add(p.Name, orNone(strings.Join(ranges, ",")), strconv.Itoa(p.Status.Usage.Total), strconv.Itoa(p.Status.Usage.Used))
	}
	return t.write(w)
}
