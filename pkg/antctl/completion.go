package antctl

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/antctl/query"
)

// Dynamic shell completion (cobra's `antctl completion bash|zsh` scripts call
// `antctl __complete ...`). Names come from the API server; a completion that
// cannot reach it offers nothing rather than failing the shell.

const completionTimeout = 5 * time.Second

func (o *options) complete(cmd *cobra.Command, toComplete string, list func(ctx context.Context, c *Clients) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	c, err := o.getClients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	names, err := list(ctx, c)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (o *options) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return o.complete(cmd, toComplete, func(ctx context.Context, c *Clients) ([]string, error) {
		list, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		return names, nil
	})
}

func (o *options) completePods(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	ns, _ := o.namespace()
	return o.complete(cmd, toComplete, func(ctx context.Context, c *Clients) ([]string, error) {
		list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names, nil
	})
}

func (o *options) completeNodes(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return o.complete(cmd, toComplete, func(ctx context.Context, c *Clients) ([]string, error) {
		return query.NodeNames(ctx, c.Kube)
	})
}

// completeLocalPods offers this node's pods in local mode (from OVSDB), the
// cluster's from a laptop.
func (o *options) completeLocalPods(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	c, err := o.agentConfig()
	if err != nil {
		return o.completePods(cmd, args, toComplete)
	}
	ns, _ := o.namespace()
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	store, err := (&localNode{conf: c}).interfaces(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, i := range store.GetInterfacesByType(interfacestore.ContainerInterface) {
		if i.PodNamespace == ns && strings.HasPrefix(i.PodName, toComplete) {
			out = append(out, i.PodName)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
