package query_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/antctl/query"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

func antreaPod(component, name, node, image string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: query.AntreaNamespace, Name: name, Labels: map[string]string{"component": component}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: component, Image: image}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: component, ImageID: "docker.io/" + image + "@sha256:0123"}}}}
}

func TestClusterVersionsReadTheAntreaPods(t *testing.T) {
	kube := kubefake.NewClientset(
		antreaPod("antrea-controller", "antrea-controller-x", "node-1", "antrea/antrea-controller:v2.1.0", true),
		antreaPod("antrea-agent", "antrea-agent-b", "node-2", "antrea/antrea-agent:latest", false),
		antreaPod("antrea-agent", "antrea-agent-a", "node-1", "antrea/antrea-agent:latest", true))
	v, err := query.ClusterVersions(context.Background(), &query.Clients{Kube: kube})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range v.Components {
		got = append(got, strings.Join([]string{c.Component, c.Version, c.Pod, c.Node, c.Status}, "|"))
	}
	want := []string{
		"antrea-controller|v2.1.0|kube-system/antrea-controller-x|node-1|Running, ready",
		"antrea-agent||kube-system/antrea-agent-a|node-1|Running, ready",
		"antrea-agent||kube-system/antrea-agent-b|node-2|Running, not ready",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("components\n%s\nwant (a tag that is a version is the version; agents by node)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(v.ControlplaneAPI, cpv1beta2.SchemeGroupVersion.String()+" is not served") {
		t.Errorf("controlplane API %q: the fake serves no API group", v.ControlplaneAPI)
	}
}
