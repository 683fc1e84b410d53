package antctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/version"
)

// versionInfo is antctl version's answer: antctl's own build, and what the
// cluster tells (query.ClusterVersions).
type versionInfo struct {
	Client query.ComponentVersion `json:"client"`
	// ControlplaneAPI says whether kube-apiserver serves
	// controlplane.antrea.io/v1beta2 (the controller's API).
	ControlplaneAPI string                   `json:"controlplaneAPI,omitempty"`
	Components      []query.ComponentVersion `json:"components,omitempty"`
	// Notes say what antctl could not read, and why.
	Notes []string `json:"notes,omitempty"`
}

func newVersionCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the versions of antctl, the controller and every agent",
		Long: `Show the version of antctl, whether the controller's API is served, and for
antrea-controller and each antrea-agent their pod, node, image (with its digest)
and status. The controller and agents do not serve their build version yet:
their image tag and digest identify what runs. In local mode antctl also reads
this node's OVS version from OVSDB.`,
		Args: cobra.NoArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			o.preRun(cmd)
			return checkOutput(output)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := o.version(cmd.Context())
			if output != outputTable {
				if werr := writeObject(o.env.Out, output, info); werr != nil {
					return werr
				}
				return err
			}
			t := &table{header: []string{"COMPONENT", "VERSION", "POD", "NODE", "IMAGE", "STATUS"}}
			for _, c := range append([]query.ComponentVersion{info.Client}, info.Components...) {
				img := c.Image
				if c.ImageID != "" {
					img += "@" + shortDigest(c.ImageID)
				}
				t.add(c.Component, c.Version, c.Pod, c.Node, img, c.Status)
			}
			if werr := t.write(o.env.Out); werr != nil {
				return werr
			}
			if info.ControlplaneAPI != "" {
				fmt.Fprintf(o.env.Out, "controlplane API: %s\n", info.ControlplaneAPI)
			}
			for _, n := range info.Notes {
				fmt.Fprintf(o.env.Err, "note: %s\n", n)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "Output format: "+strings.Join(outputFormats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// version gathers what can be read; the error is for a cluster antctl
// could not reach at all (what it read is still returned).
func (o *options) version(ctx context.Context) (*versionInfo, error) {
	sha := version.GitSHA
	if len(sha) > 12 {
		sha = sha[:12]
	}
	info := &versionInfo{Client: query.ComponentVersion{Component: "antctl",
		Version: fmt.Sprintf("%s (git %s, tree %s)", version.Version, sha, version.GitTreeState)}}
	if c, err := o.agentConfig(); err == nil {
		ovs := query.ComponentVersion{Component: "ovs (this node)", Node: o.env.NodeName}
		if v, err := (&localNode{conf: c}).ovsVersion(ctx); err == nil {
			ovs.Version = v
		} else {
			info.Notes = append(info.Notes, fmt.Sprintf("OVS version: %v", err))
		}
		info.Components = append(info.Components, ovs)
	}
	c, err := o.getClients()
	if err != nil {
		return info, err
	}
	cv, err := query.ClusterVersions(ctx, c)
	info.ControlplaneAPI = cv.ControlplaneAPI
	info.Components = append(info.Components, cv.Components...)
	info.Notes = append(info.Notes, cv.Notes...)
	return info, err
}

// shortDigest cuts an image ID to its digest's first 12 hex digits.
func shortDigest(id string) string {
	if i := strings.LastIndex(id, "sha256:"); i >= 0 {
		d := id[i+len("sha256:"):]
		if len(d) > 12 {
			d = d[:12]
		}
		return "sha256:" + d
	}
	return id
}
