package query

import (
	"context"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	controllerconfig "antrea.io/antrea/pkg/config/controller"
)

// Where the manifest (build/yamls/antrea.yml) puts Antrea's configuration.
const (
	AntreaNamespace = "kube-system"
	AntreaConfigMap = "antrea-config"
	controllerName  = "antrea-controller"
)

// FeatureGate is one gate of one component.
type FeatureGate struct {
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

// ClusterFeatureGates reads the gates of the conf files in the antrea-config
// ConfigMap: what the components load when they (re)start.
func ClusterFeatureGates(ctx context.Context, c *Clients) ([]FeatureGate, error) {
	cm, err := c.Kube.CoreV1().ConfigMaps(AntreaNamespace).Get(ctx, AntreaConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", AntreaNamespace, AntreaConfigMap, err)
	}
	files := map[string][]byte{}
	for _, name := range []string{agentconfig.FileName, controllerconfig.FileName} {
		if s, ok := cm.Data[name]; ok {
			files[name] = []byte(s)
		}
	}
	return FeatureGatesOf(files, func(file string) string { return "configmap " + AntreaNamespace + "/" + AntreaConfigMap + " " + file })
}

// FeatureGatesOf reads the gates of the components' conf files, by file
// name (antrea-agent.conf, antrea-controller.conf); where says where a file
// came from, for the Source of its gates and the errors.
func FeatureGatesOf(files map[string][]byte, where func(file string) string) ([]FeatureGate, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("neither %s nor %s found", where(agentconfig.FileName), controllerconfig.FileName)
	}
	var out []FeatureGate
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
func gatesOf(component, src string, raw []byte, implemented map[string]bool, notes map[string]string) ([]FeatureGate, error) {
	var file struct {
		FeatureGates map[string]any `json:"FeatureGates"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	var out []FeatureGate
	for _, name := range slices.Sorted(maps.Keys(implemented)) {
		out = append(out, FeatureGate{Component: component, Name: name, Enabled: implemented[name], Implemented: true,
			Note: notes[name], Source: src})
	}
	for _, name := range slices.Sorted(maps.Keys(file.FeatureGates)) {
		if _, ok := implemented[name]; ok {
			continue
		}
		on, _ := file.FeatureGates[name].(bool)
		out = append(out, FeatureGate{Component: component, Name: name, Enabled: on,
			Note: fmt.Sprintf("set to %t; not implemented by this Antrea", on), Source: src})
	}
	return out, nil
}
