package query

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// SortByEffectivePriority is the --sort-by value that orders policies as
// the data plane evaluates them (upstream antctl's effectivePriority).
const SortByEffectivePriority = "effectivePriority"

// k8sNPTierPriority is where K8s NetworkPolicies sit among the Tiers: after
// the application Tier and the AdminNetworkPolicies (251), before the
// baseline Tier (docs/antrea-network-policy.md, "Tiers").
const k8sNPTierPriority = crdv1beta1.BaselineTierPriority - 1

// SortPolicies orders policies by sortBy: "" by name, effectivePriority as
// they are evaluated (Tier priority, then priority, then name), anything
// else a JSONPath into the object (".sourceRef.name"), as upstream antctl's
// --sort-by.
func SortPolicies(ps []cpv1beta2.NetworkPolicy, sortBy string) error {
	if sortBy != SortByEffectivePriority {
		return SortBy(ps, sortBy, func(p *cpv1beta2.NetworkPolicy) (string, any) { return p.Name, p })
	}
	tier := func(p *cpv1beta2.NetworkPolicy) int32 {
		if p.TierPriority == nil {
			return k8sNPTierPriority
		}
		return *p.TierPriority
	}
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := &ps[i], &ps[j]
		if ta, tb := tier(a), tier(b); ta != tb {
			return ta < tb
		}
		if a.Priority != nil && b.Priority != nil && *a.Priority != *b.Priority {
			return *a.Priority < *b.Priority
		}
		return a.Name < b.Name
	})
	return nil
}

// SortBy orders items by the value of a JSONPath expression on the object
// each stands for (as its JSON form holds it): numbers numerically, anything
// else as text, ties by name. An empty expression orders by name. of gives
// an item's name and object.
func SortBy[T any](items []T, expr string, of func(*T) (name string, obj any)) error {
	name := func(t *T) string { n, _ := of(t); return n }
	if expr == "" {
		sort.SliceStable(items, func(i, j int) bool { return name(&items[i]) < name(&items[j]) })
		return nil
	}
	jp := jsonpath.New("sort-by").AllowMissingKeys(true)
	if err := jp.Parse(jsonPathTemplate(expr)); err != nil {
		return fmt.Errorf("--sort-by %q: %w", expr, err)
	}
	keys := make([]string, len(items))
	for i := range items {
		_, obj := of(&items[i])
		k, err := jsonPathValue(jp, obj)
		if err != nil {
			return fmt.Errorf("--sort-by %q: %w", expr, err)
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		if ka != kb {
			return lessValue(ka, kb)
		}
		return name(&items[idx[a]]) < name(&items[idx[b]])
	})
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

// jsonPathTemplate accepts ".a.b", "{.a.b}" and "a.b", as kubectl's --sort-by.
func jsonPathTemplate(expr string) string {
	if strings.HasPrefix(expr, "{") {
		return expr
	}
	if !strings.HasPrefix(expr, ".") {
		expr = "." + expr
	}
	return "{" + expr + "}"
}

func jsonPathValue(jp *jsonpath.JSONPath, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var obj any
	if err := json.Unmarshal(b, &obj); err != nil {
		return "", err
	}
	results, err := jp.FindResults(obj)
	if err != nil {
		return "", err
	}
	for _, r := range results {
		for _, x := range r {
			if x.IsValid() && x.CanInterface() {
				return fmt.Sprint(x.Interface()), nil
			}
		}
	}
	return "", nil
}

// lessValue compares two values as numbers when both are, else as text.
func lessValue(a, b string) bool {
	fa, ea := strconv.ParseFloat(a, 64)
	fb, eb := strconv.ParseFloat(b, 64)
	if ea == nil && eb == nil {
		return fa < fb
	}
	return a < b
}
