package app

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
)

// caPublishPeriod is how often the published CA is compared with the
// serving one: a rotated certificate file (the generic API server reloads
// it) or an edited ConfigMap is corrected within it.
const caPublishPeriod = 30 * time.Second

// publishCA keeps the ConfigMap kube-system/antrea-ca (key ca.crt) equal to
// the serving CA, which the agents verify the controller with when they
// dial it directly (package agent/controllerclient).
func publishCA(ctx context.Context, kube kubernetes.Interface, caBundle func() ([]byte, error)) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		ca, err := caBundle()
		if err == nil {
			err = SetCAConfigMap(ctx, kube, controlplane.ControllerNamespace, ca)
		}
		if err != nil {
			klog.ErrorS(err, "Could not publish the serving CA", "configMap", controlplane.ControllerNamespace+"/"+controlplane.CAConfigMapName)
		}
	}, caPublishPeriod)
}

// SetCAConfigMap creates or updates the ConfigMap antrea-ca of namespace so
// that its ca.crt is ca.
func SetCAConfigMap(ctx context.Context, kube kubernetes.Interface, namespace string, ca []byte) error {
	cms := kube.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, controlplane.CAConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: controlplane.CAConfigMapName, Namespace: namespace, Labels: map[string]string{"app": "antrea"}},
			Data:       map[string]string{controlplane.CAConfigMapKey: string(ca)},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", namespace, controlplane.CAConfigMapName, err)
		}
		klog.InfoS("Published the serving CA", "configMap", namespace+"/"+controlplane.CAConfigMapName)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, controlplane.CAConfigMapName, err)
	}
	if cm.Data[controlplane.CAConfigMapKey] == string(ca) {
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[controlplane.CAConfigMapKey] = string(ca)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating ConfigMap %s/%s: %w", namespace, controlplane.CAConfigMapName, err)
	}
	klog.InfoS("Published the serving CA", "configMap", namespace+"/"+controlplane.CAConfigMapName)
	return nil
}
