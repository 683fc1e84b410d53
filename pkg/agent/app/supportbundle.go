package app

import (
	"context"
	"path/filepath"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/supportbundle"
	"antrea.io/antrea/pkg/version"
)

// setupSupportBundle serves the agent API's /supportbundle.
func setupSupportBundle(_ context.Context, d *deps) (component, error) {
	d.api.handle("/supportbundle", supportbundle.Handler(func(tail int64) *supportbundle.Collector {
		return supportBundleCollector(d.o, tail)
	}))
	return nil, nil
}

// supportBundleCollector is the agent API's /supportbundle collector: this
// node's state (pkg/supportbundle) with the agent's own goroutine and heap
// profiles.
func supportBundleCollector(o Options, tailBytes int64) *supportbundle.Collector {
	conf := agentconfig.Defaults()
	conf.OVSRunDir, conf.OVSBridge, conf.OVSDatapathType = o.OVSRunDir, o.OVSBridge, o.DatapathType
	conf.ClientConnection.Kubeconfig = o.Kubeconfig
	dir := ""
	if o.ConfigFile != "" {
		dir = filepath.Dir(o.ConfigFile)
	}
	return supportbundle.AgentCollector(supportbundle.AgentOptions{Node: o.NodeName, Version: version.String("antrea-agent"),
		ConfigDir: dir, Conf: conf, LogDir: "/var/log/antrea", TailBytes: tailBytes, InProcess: true})
}
