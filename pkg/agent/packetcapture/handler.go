package packetcapture

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"

	"k8s.io/klog/v2"
)

// APIPath is where the agent API serves the capture files:
// GET APIPath + NAME answers the pcapng file of PacketCapture NAME.
const APIPath = "/packetcaptures/"

// Handler serves the files of the captures this agent completed: 404 for
// a capture it does not hold, 409 while it runs.
func (c *Controller) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, APIPath)
		f, err := c.File(name)
		switch {
		case errors.Is(err, errRunning):
			http.Error(w, "packet capture "+name+" is still running", http.StatusConflict)
			return
		case errors.Is(err, os.ErrNotExist):
			http.Error(w, "this agent holds no file of packet capture "+name, http.StatusNotFound)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.pcapng"`)
		if _, err := io.Copy(w, f); err != nil {
			klog.ErrorS(err, "Could not send a packet capture file", "packetCapture", name)
		}
	})
}
