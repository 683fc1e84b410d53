package query

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// Clients are the API clients the queries read. antctl builds them from its
// flags (or fakes in tests); another program from its own configuration with
// NewClients.
type Clients struct {
	Kube   kubernetes.Interface
	Antrea versioned.Interface
	// Realization returns, per internal NetworkPolicy name, the controller's
	// account of it: "realized/span" Nodes, as its table rendering (the
	// REALIZED column of kubectl get) shows. The controlplane objects do not
	// carry it.
	Realization func(ctx context.Context) (map[string]string, error)
}

// NewClients builds the clients for kube-apiserver at cfg.
func NewClients(cfg *rest.Config) (*Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	antrea, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controlplane client: %w", err)
	}
	rc := antrea.ControlplaneV1beta2().RESTClient()
	return &Clients{
		Kube:        kube,
		Antrea:      antrea,
		Realization: func(ctx context.Context) (map[string]string, error) { return PolicyRealization(ctx, rc) },
	}, nil
}
