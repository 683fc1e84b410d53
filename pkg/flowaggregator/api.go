package flowaggregator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// FlowList is the answer of GET /flows.
type FlowList struct {
	Items []Flow `json:"items"`
}

// Handler serves the HTTP API:
//
//	GET /flows?pod=&namespace=&policy=&denied=true&limit=N  the latest records that pass the filters, oldest first
//	GET /flows/stream?(same filters)                     new records as they come, one JSON object a line
//	GET /metrics                                         Prometheus metrics
//	GET /healthz                                         ok
func Handler(store *Store, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /flows", func(w http.ResponseWriter, r *http.Request) {
		q, limit, err := parseFilter(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		items := store.List(q, limit)
		if items == nil {
			items = []Flow{}
		}
		_ = json.NewEncoder(w).Encode(FlowList{Items: items})
	})
	mux.HandleFunc("GET /flows/stream", func(w http.ResponseWriter, r *http.Request) {
		q, _, err := parseFilter(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fl, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming unsupported", http.StatusInternalServerError)
			return
		}
		ch, cancel := store.Subscribe(q, 1024)
		defer cancel()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		fl.Flush()
		enc := json.NewEncoder(w)
		for {
			select {
			case <-r.Context().Done():
				return
			case f := <-ch:
				if err := enc.Encode(&f); err != nil {
					return
				}
				fl.Flush()
			}
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return mux
}

// parseFilter reads the filter parameters; an unknown one is an error
// naming it.
func parseFilter(r *http.Request) (Filter, int, error) {
	var q Filter
	limit := 0
	for k, vs := range r.URL.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "pod":
			q.Pod = v
		case "namespace":
			q.Namespace = v
		case "policy":
			q.Policy = v
		case "denied":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return q, 0, fmt.Errorf("denied=%q: want true or false", v)
			}
			q.Denied = b
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return q, 0, fmt.Errorf("limit=%q: want a number, 0 or more", v)
			}
			limit = n
		default:
			return q, 0, fmt.Errorf("unknown parameter %q (want pod, namespace, policy, denied, limit)", k)
		}
	}
	return q, limit, nil
}
