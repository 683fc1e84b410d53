package antctl

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func uiPod(name string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"component": "antrea-ui"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "antrea-ui", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
}

var uiSvc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "antrea-ui"},
	Spec: corev1.ServiceSpec{Selector: map[string]string{"component": "antrea-ui"},
		Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromString("http")}}}}

func TestUIForwardsToAReadyPodOfTheService(t *testing.T) {
	kube := kubefake.NewClientset(uiSvc, uiPod("antrea-ui-old", false), uiPod("antrea-ui-new", true))
	pod, port, err := uiBackend(t.Context(), kube)
	if err != nil || pod.Name != "antrea-ui-new" || port != 8080 {
		t.Fatalf("backend %v port %d err %v, want antrea-ui-new:8080", pod, port, err)
	}
}

func TestUIWithoutTheServiceSaysHowToDeployIt(t *testing.T) {
	_, _, err := uiBackend(t.Context(), kubefake.NewClientset())
	if err == nil || !strings.Contains(err.Error(), "ui.enable=true") {
		t.Errorf("err %v, want how to enable the UI", err)
	}
	_, _, err = uiBackend(t.Context(), kubefake.NewClientset(uiSvc, uiPod("antrea-ui-x", false)))
	if err == nil || !strings.Contains(err.Error(), "no ready Pod") {
		t.Errorf("err %v, want no ready Pod", err)
	}
}
