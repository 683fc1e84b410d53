package query

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"antrea.io/antrea/pkg/flowaggregator"
)

// Where the Flow Aggregator is (build/yamls/flow-aggregator.yml): its
// Service, whose port "api" serves /flows.
const (
	FlowAggregatorNamespace = "flow-aggregator"
	FlowAggregatorService   = "flow-aggregator"
	FlowAggregatorAPIPort   = "api"
)

// FlowQuery selects records of the Flow Aggregator's API.
type FlowQuery struct {
	// Pod is a Pod name (either side), or namespace/name.
	Pod string
	// Namespace is either side's Pod namespace.
	Namespace string
	// Policy is a NetworkPolicy name (or namespace/name) on either side.
	Policy string
	// Denied keeps only denied connections.
	Denied bool
	// Limit keeps the newest Limit records (0: all the aggregator holds).
	Limit int
}

// Values are q as the API's parameters.
func (q FlowQuery) Values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"pod": q.Pod, "namespace": q.Namespace, "policy": q.Policy} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Denied {
		v.Set("denied", "true")
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// FlowGetter GETs a path of the Flow Aggregator's API with parameters and
// returns the body (antctl: through a port-forward).
type FlowGetter func(ctx context.Context, path string, params url.Values) ([]byte, error)

// Flows returns the records q selects, oldest first.
func Flows(ctx context.Context, get FlowGetter, q FlowQuery) ([]flowaggregator.Flow, error) {
	body, err := get(ctx, "/flows", q.Values())
	if err != nil {
		return nil, err
	}
	var l flowaggregator.FlowList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("the Flow Aggregator's answer: %w", err)
	}
	return l.Items, nil
}
