package antctl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/antctl/query"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	controllerconfig "antrea.io/antrea/pkg/config/controller"
)

func newGetFeatureGatesCommand(g *getOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "featuregates",
		Aliases: []string{"featuregate", "fg"},
		Short:   "Show the feature gates of antrea-agent and antrea-controller",
		Long: `Show the feature gates of antrea-agent and antrea-controller: the gates this Antrea
implements with their value, and the upstream gates a conf file sets (accepted,
but without effect here).

From a laptop antctl reads the antrea-config ConfigMap (` + antreaNamespace + `/` + antreaConfigMap + `), what the
components load when they (re)start. In local mode it reads the conf files the
agent container mounts (--config-dir, ` + defaultConfigDir + `).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gates, err := g.featureGates(cmd.Context())
			if err != nil {
				return err
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, gates)
			}
			t := &table{header: []string{"COMPONENT", "FEATUREGATE", "STATUS", "NOTE"}}
			for _, fg := range gates {
				status := "Disabled"
				if fg.Enabled {
					status = "Enabled"
				}
				if !fg.Implemented {
					status = "Not implemented"
				}
				t.add(fg.Component, fg.Name, status, fg.Note)
			}
			return t.write(g.env.Out)
		},
	}
	// Upstream antctl's flag (pkg/antctl/raw/featuregates/command.go): antctl
	// reads the feature gates from the API server (or the conf files), through
	// the kubeconfig's own TLS settings, so there is no Antrea certificate to skip.
	var insecure bool
	cmd.Flags().BoolVar(&insecure, "insecure", false, "Accepted for upstream antctl's scripts; nothing to skip here (the gates come through kube-apiserver)")
	return cmd
}

// featureGates reads the conf files: local ones in local mode (unless a
// kubeconfig is given), else the ConfigMap.
func (g *getOptions) featureGates(ctx context.Context) ([]query.FeatureGate, error) {
	if g.local() && !g.kubeconfigGiven() {
		files := map[string][]byte{}
		for _, name := range []string{agentconfig.FileName, controllerconfig.FileName} {
			path := filepath.Join(g.configDir, name)
			b, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("local mode: %w", err)
			}
			files[name] = b
		}
		return query.FeatureGatesOf(files, func(file string) string { return filepath.Join(g.configDir, file) })
	}
	c, err := g.getClients()
	if err != nil {
		return nil, err
	}
	return query.ClusterFeatureGates(ctx, c)
}
