package antctl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	controllerconfig "antrea.io/antrea/pkg/config/controller"
)

// featureGate is one gate of one component as -o json|yaml print it.
type featureGate struct {
	Component string `json:"component"`
	Name      string `json:"name"`
	// Enabled is the gate's value (for a gate this Antrea does not
	// implement, the value the file gives it, which changes nothing).
	Enabled     bool   `json:"enabled"`
	Implemented bool   `json:"implemented"`
	Note        string `json:"note,omitempty"`
	// Source is the file or ConfigMap key read.
	Source string `json:"source"`
}

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
func (g *getOptions) featureGates(ctx context.Context) ([]featureGate, error) {
	files := map[string][]byte{}
	var where func(file string) string
	if g.local() && !g.kubeconfigGiven() {
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
		where = func(file string) string { return filepath.Join(g.configDir, file) }
	} else {
		c, err := g.getClients()
		if err != nil {
			return nil, err
		}
		cm, err := c.Kube.CoreV1().ConfigMaps(antreaNamespace).Get(ctx, antreaConfigMap, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %w", antreaNamespace, antreaConfigMap, err)
		}
		for _, name := range []string{agentconfig.FileName, controllerconfig.FileName} {
			if s, ok := cm.Data[name]; ok {
				files[name] = []byte(s)
			}
		}
		where = func(file string) string { return "configmap " + antreaNamespace + "/" + antreaConfigMap + " " + file }
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("neither %s nor %s found", where(agentconfig.FileName), controllerconfig.FileName)
	}
	var out []featureGate
	if b, ok := files[agentconfig.FileName]; ok {
		src := where(agentconfig.FileName)
		c, err := agentconfig.Parse(src, b)
		if err != nil {
			return nil, err
		}
		notes := map[string]string{}
		if c.FeatureGates[agentconfig.AntreaProxy] && !c.ProxyEnabled() {
			notes[agentconfig.AntreaProxy] = "antreaProxy.enable is false: AntreaProxy does not run"
		}
		gates, err := gatesOf("antrea-agent", src, b, c.FeatureGates, notes)
		if err != nil {
			return nil, err
		}
		out = append(out, gates...)
	}
	if b, ok := files[controllerconfig.FileName]; ok {
		src := where(controllerconfig.FileName)
		c, err := controllerconfig.Parse(src, b)
		if err != nil {
			return nil, err
		}
		gates, err := gatesOf(controllerName, src, b, c.FeatureGates, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, gates...)
	}
	return out, nil
}

// gatesOf lists a component's gates: those its config kept (implemented,
// with their effective value, defaults included), then the other gates the
// file sets (pkg/config accepts upstream's gates this Antrea lacks at their
// default and drops them).
func gatesOf(component, src string, raw []byte, implemented map[string]bool, notes map[string]string) ([]featureGate, error) {
	var file struct {
		FeatureGates map[string]any `json:"featureGates"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	var out []featureGate
	for _, name := range slices.Sorted(maps.Keys(implemented)) {
		out = append(out, featureGate{Component: component, Name: name, Enabled: implemented[name], Implemented: true,
			Note: notes[name], Source: src})
	}
	for _, name := range slices.Sorted(maps.Keys(file.FeatureGates)) {
		if _, ok := implemented[name]; ok {
			continue
		}
		on, _ := file.FeatureGates[name].(bool)
		out = append(out, featureGate{Component: component, Name: name, Enabled: on,
			Note: fmt.Sprintf("set to %t; not implemented by this Antrea", on), Source: src})
	}
	return out, nil
}
