package manifest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/yaml"

	"antrea.io/antrea/pkg/cni"
)

// The properties below hold for the committed manifest (what users apply)
// and for the renderings with other values that users are likely to choose.
var valueCombinations = [][]string{
	nil,
	{"tunnelType=vxlan"},
	{"ovs.datapathType=netdev", "defaultMTU=1400", "transportInterface=eth1"},
	{"featureGates.AntreaProxy=false", "logVerbosity=4", "kubeAPIServerOverride=https://10.0.0.1:6443"},
	{"controller.selfSignedCert=false", "tlsMinVersion=VersionTLS13", "antreaProxy.enable=false", "tunnelCsum=true"},
}

// forEachRendering runs check on the committed manifest and on the chart
// rendered with each of valueCombinations.
func forEachRendering(t *testing.T, check func(t *testing.T, objs objects)) {
	t.Run("committed manifest", func(t *testing.T) {
		check(t, decode(t, readManifest(t)))
	})
	for _, sets := range valueCombinations[1:] {
		t.Run(strings.Join(sets, ","), func(t *testing.T) {
			check(t, decode(t, render(t, sets...)))
		})
	}
}

// TestManifestHasEveryObjectOfAnInstall: the objects of the contract, each
// once, and nothing else.
func TestManifestHasEveryObjectOfAnInstall(t *testing.T) {
	want := []string{
		"APIService v1alpha1.stats.antrea.io",
		"APIService v1beta2.controlplane.antrea.io",
		"ClusterRole antctl",
		"ClusterRole antrea-agent",
		"ClusterRole antrea-controller",
		"ClusterRole antrea-metrics-reader",
		"ClusterRoleBinding antrea-agent",
		"ClusterRoleBinding antrea-agent-auth-delegator",
		"ClusterRoleBinding antrea-controller",
		"ClusterRoleBinding antrea-controller-auth-delegator",
		"ConfigMap antrea-ca",
		"ConfigMap antrea-config",
		"CustomResourceDefinition adminnetworkpolicies.policy.networking.k8s.io",
		"CustomResourceDefinition antreaagentinfos.crd.antrea.io",
		"CustomResourceDefinition antreacontrollerinfos.crd.antrea.io",
		"CustomResourceDefinition baselineadminnetworkpolicies.policy.networking.k8s.io",
		"CustomResourceDefinition bgppolicies.crd.antrea.io",
		"CustomResourceDefinition clustergroups.crd.antrea.io",
		"CustomResourceDefinition clusternetworkpolicies.crd.antrea.io",
		"CustomResourceDefinition clusternetworkpolicies.policy.networking.k8s.io",
		"CustomResourceDefinition egresses.crd.antrea.io",
		"CustomResourceDefinition externalippools.crd.antrea.io",
		"CustomResourceDefinition groups.crd.antrea.io",
		"CustomResourceDefinition networkpolicies.crd.antrea.io",
		"CustomResourceDefinition nodelatencymonitors.crd.antrea.io",
		"CustomResourceDefinition packetcaptures.crd.antrea.io",
		"CustomResourceDefinition supportbundlecollections.crd.antrea.io",
		"CustomResourceDefinition tiers.crd.antrea.io",
		"CustomResourceDefinition traceflows.crd.antrea.io",
		"CustomResourceDefinition trafficcontrols.crd.antrea.io",
		"DaemonSet antrea-agent",
		"Deployment antrea-controller",
		"MutatingWebhookConfiguration crdmutator.antrea.io",
		"Role antrea-agent-bgp-passwords",
		"Role antrea-agent-controller-ca",
		"Role antrea-agent-packetcapture-fileserver",
		"Role antrea-controller-ca-publisher",
		"RoleBinding antrea-agent-authentication-reader",
		"RoleBinding antrea-agent-bgp-passwords",
		"RoleBinding antrea-agent-controller-ca",
		"RoleBinding antrea-agent-packetcapture-fileserver",
		"RoleBinding antrea-controller-authentication-reader",
		"RoleBinding antrea-controller-ca-publisher",
		"Service antrea",
		"ServiceAccount antrea-agent",
		"ServiceAccount antrea-controller",
		"ValidatingWebhookConfiguration crdvalidator.antrea.io",
	}
	var got []string
	for _, o := range decode(t, readManifest(t)) {
		got = append(got, kindAndName(o))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("objects of %s:\n got %q\nwant %q", manifestFile, got, want)
	}
}

// TestAgentRunsOnEveryNode: a Node without Pod networking is useless, so the
// agent tolerates every taint, including those of NotReady Nodes (a Node is
// NotReady until its CNI is installed) and of control-plane Nodes; it is
// node-critical so that it is not preempted or evicted first.
func TestAgentRunsOnEveryNode(t *testing.T) {
	taints := []corev1.Taint{
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/network-unavailable", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/disk-pressure", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute},
		{Key: "example.com/soft", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	forEachRendering(t, func(t *testing.T, objs objects) {
		ds := agentDaemonSet(t, objs)
		spec := ds.Spec.Template.Spec
		for _, taint := range taints {
			if !tolerated(spec.Tolerations, taint) {
				t.Errorf("the antrea-agent DaemonSet does not tolerate the taint %s", taint.ToString())
			}
		}
		if spec.PriorityClassName != "system-node-critical" {
			t.Errorf("antrea-agent's priorityClassName is %q, want system-node-critical", spec.PriorityClassName)
		}
		if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("antrea-agent: hostNetwork %v, dnsPolicy %q; want the host network with ClusterFirstWithHostNet",
				spec.HostNetwork, spec.DNSPolicy)
		}
		if ds.Spec.UpdateStrategy.Type != "RollingUpdate" {
			t.Errorf("antrea-agent's update strategy is %q, want RollingUpdate", ds.Spec.UpdateStrategy.Type)
		}
		if got := ds.Spec.Template.Annotations["kubectl.kubernetes.io/default-container"]; got != "antrea-agent" {
			t.Errorf("kubectl's default container of antrea-agent Pods is %q, want antrea-agent", got)
		}
	})
}

// TestControllerRunsBeforePodNetworking: antrea-controller uses the host
// network, so it can and must be scheduled on a NotReady Node (no CNI yet)
// and on a control-plane Node.
func TestControllerRunsBeforePodNetworking(t *testing.T) {
	taints := []corev1.Taint{
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute},
	}
	forEachRendering(t, func(t *testing.T, objs objects) {
		d := controllerDeployment(t, objs)
		spec := d.Spec.Template.Spec
		for _, taint := range taints {
			if !tolerated(spec.Tolerations, taint) {
				t.Errorf("the antrea-controller Deployment does not tolerate the taint %s", taint.ToString())
			}
		}
		if !spec.HostNetwork || spec.PriorityClassName != "system-cluster-critical" || *d.Spec.Replicas != 1 {
			t.Errorf("antrea-controller: hostNetwork %v, priorityClassName %q, replicas %d; want true, system-cluster-critical, 1",
				spec.HostNetwork, spec.PriorityClassName, *d.Spec.Replicas)
		}
	})
}

func tolerated(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	for _, tol := range tolerations {
		if tol.ToleratesTaint(klog.Background(), &taint, false) {
			return true
		}
	}
	return false
}

// unnamedCreates are the creates a role may grant without naming objects
// (kube-apiserver cannot restrict a create by name), each with its reason.
var unnamedCreates = map[string]string{
	"ClusterRole antrea-controller tiers":                 "antrea-controller creates the static Tiers at start",
	"ClusterRole antrea-agent events":                     "AntreaProxy posts Warning Events on the Services it cannot wholly realize; Event names are generated",
	"ClusterRole antrea-agent antreaagentinfos":           "each agent creates the AntreaAgentInfo named after its Node (docs/monitoring.md)",
	"ClusterRole antrea-controller antreacontrollerinfos": "antrea-controller creates its AntreaControllerInfo at start",
	"ClusterRole antrea-agent nodestatssummaries":         "each agent posts its Node's policy stats (docs/network-policy-stats.md); nothing is stored",
	"ClusterRole antrea-agent nodelatencystats":           "each agent creates the NodeLatencyStats named after its Node (docs/node-latency-monitor.md); antrea-controller keeps the latest",
	"ClusterRole antctl traceflows":                       "antctl traceflow creates a Traceflow with a generated name (docs/traceflow.md)",
	"ClusterRole antrea-controller events":                "antrea-controller records Events on Egresses and ExternalIPPools (allocation, exhaustion); Event names are generated",
	"ClusterRole antctl pods/exec":                        "antctl runs its commands in the agent's container when the agent API is out of reach (docs/antctl.md)",
}

// unnamedWrites are the other writes a role may grant on objects the chart
// cannot name, each with its reason.
var unnamedWrites = map[string]string{
	"ClusterRole antrea-agent update antreaagentinfos":      "each agent refreshes the AntreaAgentInfo named after its Node (its heartbeat), as upstream",
	"ClusterRole antrea-controller delete antreaagentinfos": "antrea-controller deletes the AntreaAgentInfos of deleted Nodes (named after them)",
	"ClusterRole antctl delete traceflows":                  "antctl traceflow deletes the Traceflow it created once it has the result",
	"ClusterRole antrea-controller update egresses":         "antrea-controller writes into spec.egressIP the IP it allocated from the Egress's ExternalIPPool, as upstream's does",
	"ClusterRole antrea-controller patch events":            "the Event recorder counts a repeated Event (a pool still exhausted) by patching it",
	"ClusterRole antrea-agent patch nodes":                  "trafficEncryptionMode wireGuard: each agent writes its WireGuard public key (and backend) into its own Node's annotations, as upstream's agent does (one ClusterRole serves every node, so the Node cannot be named)",
	"ClusterRole antrea-agent patch pods":                   "NodePortLocal writes the annotation nodeportlocal.antrea.io on its Node's backend Pods (any Pod), as upstream's agent does",
	"ClusterRole antrea-controller patch services":          "ServiceExternalIP adds and removes the finalizer service.kubernetes.io/load-balancer-cleanup of the LoadBalancer Services it gives an IP (any Service), as cloud providers' service controllers do, and writes the default pool's annotation",
}

// nonResourceRoles may grant non-resource URLs: the roles a cluster admin
// binds to people and scrapers (docs/antctl.md, docs/prometheus-integration.md).
var nonResourceRoles = map[string]string{
	"ClusterRole antctl":                "the agent API's paths and the controller's non-API paths for antctl users",
	"ClusterRole antrea-metrics-reader": "/metrics of the agents and the controller for Prometheus",
	"ClusterRole antrea-agent":          "antctl get bgppolicy|bgppeers|bgproutes|fqdncache inside the agent container asks its own agent's API as the agent",
}

// secretReaders are the Roles that may read Secrets: each may get only the
// Secrets named here, for the reason given.
var secretReaders = map[string]map[string]string{
	"Role kube-system/antrea-agent-packetcapture-fileserver": {
		"antrea-packetcapture-fileserver-auth": "the credentials the agent uploads a PacketCapture's file with (upstream's Secret)"},
	"Role kube-system/antrea-agent-bgp-passwords": {
		"antrea-bgp-passwords": "the BGP peers' passwords (upstream's Secret), watched by name"},
}

// TestRBACIsLeastPrivilege: no wildcard, no Secrets but those of
// secretReaders (read, by name), and every write names
// the one object it may change, is a status report, or is one of
// unnamedCreates.
func TestRBACIsLeastPrivilege(t *testing.T) {
	writes := []string{"create", "update", "patch", "delete", "deletecollection", "bind", "escalate", "impersonate"}
	forEachRendering(t, func(t *testing.T, objs objects) {
		rules := rbacRules(objs)
		if len(rules) == 0 {
			t.Fatal("no Role or ClusterRole in the rendering")
		}
		for role, rs := range rules {
			for _, r := range rs {
				for _, field := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.ResourceNames} {
					if slices.Contains(field, rbacv1.VerbAll) {
						t.Errorf("%s grants a wildcard: %s", role, r.String())
					}
				}
				if _, ok := nonResourceRoles[role]; len(r.NonResourceURLs) > 0 && !ok {
					t.Errorf("%s grants non-resource URLs: %s", role, r.String())
				}
				if slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, "secrets") {
					allowed := secretReaders[role]
					ok := len(r.ResourceNames) > 0 && !slices.ContainsFunc(r.Verbs, func(v string) bool { return !slices.Contains([]string{"get", "list", "watch"}, v) }) && len(r.Resources) == 1
					for _, name := range r.ResourceNames {
						if _, named := allowed[name]; !named {
							ok = false
						}
					}
					if !ok {
						t.Errorf("%s grants access to Secrets beyond reading those secretReaders names: %s", role, r.String())
					}
				}
				for _, verb := range r.Verbs {
					if !slices.Contains(writes, verb) {
						continue
					}
					statusOnly := !slices.ContainsFunc(r.Resources, func(res string) bool { return !strings.HasSuffix(res, "/status") })
					_, excepted := unnamedCreates[role+" "+strings.Join(r.Resources, ",")]
					excepted = excepted && verb == "create" && len(r.Verbs) == 1
					if _, ok := unnamedWrites[role+" "+verb+" "+strings.Join(r.Resources, ",")]; ok && len(r.Verbs) == 1 {
						excepted = true
					}
					if len(r.ResourceNames) == 0 && !statusOnly && !excepted {
						t.Errorf("%s may %s any object of %v: a write must name its objects or be a status report: %s",
							role, verb, r.Resources, r.String())
					}
				}
			}
		}
		// The bindings bind the ServiceAccounts of the chart only.
		for _, b := range all[*rbacv1.ClusterRoleBinding](objs) {
			checkSubjects(t, "ClusterRoleBinding "+b.Name, b.Subjects)
		}
		for _, b := range all[*rbacv1.RoleBinding](objs) {
			checkSubjects(t, "RoleBinding "+b.Name, b.Subjects)
		}
	})
}

func checkSubjects(t *testing.T, binding string, subjects []rbacv1.Subject) {
	t.Helper()
	for _, s := range subjects {
		if s.Kind != rbacv1.ServiceAccountKind || s.Namespace != namespace ||
			(s.Name != "antrea-agent" && s.Name != "antrea-controller") {
			t.Errorf("%s binds %s %s/%s; want only the ServiceAccounts antrea-agent and antrea-controller", binding, s.Kind, s.Namespace, s.Name)
		}
	}
}

// nodePaths are the only paths of the Node that Antrea's Pods may mount
// (docs: the contract of issue #12): the CNI directories, Antrea's and OVS's
// run, state and log directories, the network namespaces of the Pods and the
// iptables lock.
var nodePaths = []string{
	"/opt/cni/bin",
	"/etc/cni/net.d",
	"/var/run/antrea",
	"/var/run/openvswitch",
	"/var/lib/antrea",
	"/var/log/antrea",
	"/var/log/antrea/openvswitch",
	"/var/run/netns",
	"/run/xtables.lock",
}

// TestPodsMountOnlyAntreasNodePaths: every hostPath volume is one of
// nodePaths, and each is mounted by some container (no dead volume).
func TestPodsMountOnlyAntreasNodePaths(t *testing.T) {
	forEachRendering(t, func(t *testing.T, objs objects) {
		for workload, spec := range podSpecs(t, objs) {
			mounted := map[string]bool{}
			for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
				for _, m := range c.VolumeMounts {
					mounted[m.Name] = true
				}
			}
			for _, v := range spec.Volumes {
				if !mounted[v.Name] {
					t.Errorf("%s: volume %s is mounted by no container", workload, v.Name)
				}
				if v.HostPath == nil {
					continue
				}
				if !slices.Contains(nodePaths, v.HostPath.Path) {
					t.Errorf("%s: volume %s mounts the Node's %s, which is not one of Antrea's paths %v",
						workload, v.Name, v.HostPath.Path, nodePaths)
				}
			}
		}
	})
}

// TestContainersAreWhatTheNodesRun: the agent Pod's containers, their
// images and commands; the probes point at what the components serve.
func TestContainersAreWhatTheNodesRun(t *testing.T) {
	forEachRendering(t, func(t *testing.T, objs objects) {
		spec := agentDaemonSet(t, objs).Spec.Template.Spec
		names := func(cs []corev1.Container) (n []string) {
			for _, c := range cs {
				n = append(n, c.Name)
			}
			return n
		}
		if got := names(spec.InitContainers); !slices.Equal(got, []string{"install-cni"}) {
			t.Errorf("antrea-agent init containers %v, want [install-cni]", got)
		}
		if got := names(spec.Containers); !slices.Equal(got, []string{"antrea-agent", "antrea-ovs"}) {
			t.Errorf("antrea-agent containers %v, want [antrea-agent antrea-ovs]", got)
		}
		for workload, spec := range podSpecs(t, objs) {
			for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
				image := "docker.io/antrea/antrea-agent:latest"
				if c.Name == "antrea-controller" {
					image = "docker.io/antrea/antrea-controller:latest"
				}
				if c.Image != image || c.ImagePullPolicy != corev1.PullIfNotPresent {
					t.Errorf("%s: container %s runs %s (%s), want %s (IfNotPresent)", workload, c.Name, c.Image, c.ImagePullPolicy, image)
				}
				if len(c.Command) == 0 {
					t.Errorf("%s: container %s has no command (the images have no entrypoint)", workload, c.Name)
				}
			}
		}
		socket, _ := confOf(t, objs, "antrea-agent.conf")["cniSocket"].(string)
		for _, c := range spec.Containers {
			if c.Name != "antrea-agent" {
				continue
			}
			if !slices.Contains(c.Args, "/etc/antrea/antrea-agent.conf") {
				t.Errorf("antrea-agent does not read /etc/antrea/antrea-agent.conf: args %v", c.Args)
			}
			// Ready when the CNI socket of the conf file exists.
			probe := c.ReadinessProbe
			if socket == "" || probe == nil || probe.Exec == nil || !slices.Contains(probe.Exec.Command, socket) {
				t.Errorf("antrea-agent's readiness probe does not test the cniSocket of its conf (%q): %+v", socket, probe)
			}
		}
	})
}

// TestControllerAPIIsReachable: the APIService names the Service, whose
// target port is the container port the controller serves on, which is the
// apiPort of its conf; the probes use the same port.
func TestControllerAPIIsReachable(t *testing.T) {
	for _, sets := range [][]string{nil, {"controller.apiPort=10449"}} {
		t.Run(strings.Join(append([]string{"apiPort"}, sets...), " "), func(t *testing.T) {
			objs := decode(t, render(t, sets...))
			apiService := one[*apiregistrationv1.APIService](t, objs, "v1beta2.controlplane.antrea.io")
			ref := apiService.Spec.Service
			if ref == nil || ref.Namespace != namespace || ref.Port == nil {
				t.Fatalf("the APIService names no Service port in %s: %+v", namespace, ref)
			}
			if len(apiService.Spec.CABundle) != 0 || apiService.Spec.InsecureSkipTLSVerify {
				t.Errorf("the APIService must leave caBundle to antrea-controller and verify TLS")
			}
			svc := one[*corev1.Service](t, objs, ref.Name)
			var target *intstr.IntOrString
			for _, p := range svc.Spec.Ports {
				if p.Port == *ref.Port {
					target = &p.TargetPort
				}
			}
			if target == nil {
				t.Fatalf("Service %s has no port %d", svc.Name, *ref.Port)
			}
			d := controllerDeployment(t, objs)
			for k, v := range svc.Spec.Selector {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("Service %s selects %s=%s, which the antrea-controller Pod does not have", svc.Name, k, v)
				}
			}
			c := d.Spec.Template.Spec.Containers[0]
			var port int32
			for _, p := range c.Ports {
				if (target.Type == intstr.String && p.Name == target.StrVal) || (target.Type == intstr.Int && p.ContainerPort == target.IntVal) {
					port = p.ContainerPort
				}
			}
			if port == 0 {
				t.Fatalf("Service %s targets %s, which is no port of antrea-controller %v", svc.Name, target.String(), c.Ports)
			}
			conf := confOf(t, objs, "antrea-controller.conf")
			if got, ok := conf["apiPort"].(float64); !ok || int32(got) != port {
				t.Errorf("antrea-controller serves on apiPort %v of its conf, but the Service targets container port %d", conf["apiPort"], port)
			}
			for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.String() != target.String() || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
					t.Errorf("antrea-controller's probe does not get HTTPS on the API port: %+v", probe)
				}
			}
		})
	}
}

// TestResourcesAreTheValues: every container requests what its value says,
// and a container whose resources value is unset has no resources at all.
func TestResourcesAreTheValues(t *testing.T) {
	objs := decode(t, render(t, "agent.antreaOVS.resources=null"))
	for workload, spec := range podSpecs(t, objs) {
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			requests := c.Resources.Requests
			if c.Name == "antrea-ovs" {
				if len(requests) != 0 || len(c.Resources.Limits) != 0 {
					t.Errorf("%s: %s has resources %v although agent.antreaOVS.resources is null", workload, c.Name, c.Resources)
				}
				continue
			}
			if requests.Cpu().IsZero() {
				t.Errorf("%s: container %s requests no CPU", workload, c.Name)
			}
		}
	}
	objs = decode(t, render(t, "agent.antreaAgent.resources.limits.memory=1Gi"))
	for _, c := range agentDaemonSet(t, objs).Spec.Template.Spec.Containers {
		if c.Name == "antrea-agent" && c.Resources.Limits.Memory().String() != "1Gi" {
			t.Errorf("antrea-agent's memory limit is %v, want the value's 1Gi", c.Resources.Limits.Memory())
		}
	}
}

// TestConfFilesAreWhatTheComponentsRead: the conf files are YAML maps with
// the values of the chart, and the CNI network configuration is one that
// container runtimes (libcni) and antrea-cni accept.
func TestConfFilesAreWhatTheComponentsRead(t *testing.T) {
	forEachRendering(t, func(t *testing.T, objs objects) {
		agent := confOf(t, objs, "antrea-agent.conf")
		for _, key := range []string{"featureGates", "ovsBridge", "ovsDatapathType", "trafficEncapMode", "tunnelType",
			"defaultMTU", "transportInterface", "cniSocket", "kubeAPIServerOverride", "antreaProxy"} {
			if _, ok := agent[key]; !ok {
				t.Errorf("antrea-agent.conf has no %s", key)
			}
		}
		controller := confOf(t, objs, "antrea-controller.conf")
		for _, key := range []string{"featureGates", "apiPort", "selfSignedCert", "kubeAPIServerOverride"} {
			if _, ok := controller[key]; !ok {
				t.Errorf("antrea-controller.conf has no %s", key)
			}
		}
		conflist, err := libcni.ConfListFromBytes([]byte(configMap(t, objs).Data["antrea-cni.conflist"]))
		if err != nil {
			t.Fatalf("antrea-cni.conflist: %v", err)
		}
		if !slices.Contains(cni.SupportedVersions, conflist.CNIVersion) {
			t.Errorf("antrea-cni.conflist: cniVersion %s is not one antrea-cni supports %v", conflist.CNIVersion, cni.SupportedVersions)
		}
		if len(conflist.Plugins) == 0 || conflist.Plugins[0].Network.Type != "antrea" {
			t.Errorf("antrea-cni.conflist: the first plugin is not antrea: %+v", conflist.Plugins)
		}
	})
	objs := decode(t, render(t, "tunnelType=vxlan", "ovs.datapathType=netdev", "featureGates.AntreaProxy=false", "defaultMTU=1400"))
	agent := confOf(t, objs, "antrea-agent.conf")
	for key, want := range map[string]any{"tunnelType": "vxlan", "ovsDatapathType": "netdev", "defaultMTU": 1400.0,
		"featureGates": map[string]any{"AntreaProxy": false, "FlowExporter": false, "PacketCapture": false, "NodeLatencyMonitor": false, "NodeNetworkPolicy": false, "BGPPolicy": false, "Egress": true, "ServiceExternalIP": true, "EgressTrafficShaping": false, "NodePortLocal": true, "SupportBundleCollection": false, "TrafficControl": false, "L7NetworkPolicy": false}} {
		if got, _ := json.Marshal(agent[key]); string(got) != mustJSON(t, want) {
			t.Errorf("antrea-agent.conf: %s is %s, want %s", key, got, mustJSON(t, want))
		}
	}
}

// TestEveryListedFeatureGateIsAccepted: each gate the conf files list can be
// set through the values: the schema's list of gates and the chart's agree.
func TestEveryListedFeatureGateIsAccepted(t *testing.T) {
	objs := decode(t, render(t))
	gates := map[string]string{}
	for _, file := range []string{"antrea-agent.conf", "antrea-controller.conf"} {
		fg, _ := confOf(t, objs, file)["featureGates"].(map[string]any)
		for g := range fg {
			gates[g] = file
		}
	}
	if len(gates) == 0 {
		t.Fatal("the conf files list no feature gate")
	}
	for g, file := range gates {
		fg, _ := confOf(t, decode(t, render(t, "featureGates."+g+"=false")), file)["featureGates"].(map[string]any)
		if fg[g] != false {
			t.Errorf("featureGates.%s=false is not in %s: %v", g, file, fg)
		}
	}
}

// confOf parses a conf file of the ConfigMap.
func confOf(t *testing.T, objs objects, file string) map[string]any {
	t.Helper()
	data, ok := configMap(t, objs).Data[file]
	if !ok {
		t.Fatalf("ConfigMap antrea-config has no %s", file)
	}
	conf := map[string]any{}
	if err := yaml.Unmarshal([]byte(data), &conf); err != nil {
		t.Fatalf("%s is not YAML: %v", file, err)
	}
	return conf
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
