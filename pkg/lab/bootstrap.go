package lab

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// nodesReadNodesRole lets every node read all Node objects. Since Kubernetes
// 1.32 the Node authorizer only lets a node read its own Node, but the node
// simulator in reference-CNI mode routes to the other nodes' podCIDRs, which
// it learns from their Node objects (as antrea-agent will, with its own
// ServiceAccount).
const nodesReadNodesRole = "antrea-lab:nodes-read-nodes"

// bootstrapCluster creates the cluster objects the lab's own components need
// beyond what kube-apiserver bootstraps. It is idempotent.
func bootstrapCluster(ctx context.Context, c kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: nodesReadNodesRole},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRole %s: %w", role.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: nodesReadNodesRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: nodesReadNodesRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRoleBinding %s: %w", binding.Name, err)
	}
	return nil
}
