package simulator

import (
	"context"
	"fmt"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// AgentSummary is what one agent received and holds.
type AgentSummary struct {
	Node            string `json:"node"`
	Messages        int    `json:"messages"`
	Bytes           int64  `json:"bytes"`
	WireBytes       int64  `json:"wireBytes"`
	Policies        int    `json:"policies"`
	AddressGroups   int    `json:"addressGroups"`
	AppliedToGroups int    `json:"appliedToGroups"`
	Synced          bool   `json:"synced"`
}

// Summary is every agent's summary with the median and max over agents.
type Summary struct {
	Agents                        []AgentSummary `json:"agents"`
	MessagesMedian, MessagesMax   int
	BytesMedian, BytesMax         int64
	WireBytesMedian, WireBytesMax int64
}

// Summarize reads every agent.
func (s *Simulator) Summarize() Summary {
	var out Summary
	var msgs []int
	var bytes, wire []int64
	for _, a := range s.agents {
		recs := a.Records()
		st := a.State()
		as := AgentSummary{Node: a.Node, Messages: len(recs), WireBytes: a.WireBytes(), Policies: len(st.Policies),
			AddressGroups: st.AddressGroups, AppliedToGroups: st.AppliedToGroups, Synced: a.Synced()}
		for _, r := range recs {
			as.Bytes += int64(r.Bytes)
		}
		out.Agents = append(out.Agents, as)
		msgs, bytes, wire = append(msgs, as.Messages), append(bytes, as.Bytes), append(wire, as.WireBytes)
	}
	out.MessagesMedian, out.MessagesMax = medMax(msgs)
	out.BytesMedian, out.BytesMax = medMax(bytes)
	out.WireBytesMedian, out.WireBytesMax = medMax(wire)
	return out
}

func medMax[T int | int64](v []T) (T, T) {
	if len(v) == 0 {
		return 0, 0
	}
	s := append([]T(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)-1]
}

// AsServiceAccount returns a config that authenticates with a token of
// the ServiceAccount "namespace/name" (TokenRequest, made with cfg's own
// rights), with cfg's client certificate and other credentials removed:
// the simulated agents then reach the API exactly as real agents do, as
// the antrea-agent ServiceAccount through kube-apiserver.
func AsServiceAccount(ctx context.Context, cfg *rest.Config, sa string) (*rest.Config, error) {
	ns, name, ok := strings.Cut(sa, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("service account %q: want namespace/name", sa)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	hours := int64(24 * 3600)
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hours}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of service account %s: %w", sa, err)
	}
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = tr.Status.Token
	c.Dial = cfg.Dial
	return c, nil
}
