package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SinceDuration reads spec.sinceTime: a Go duration (2h, 30m, 1h30m) or a
// number of days (1d), as upstream's docs give it. 0 when unset.
func SinceDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 32)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 2h, 30m or 1d", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", s)
	}
	return d, nil
}

// FileServerURL is spec.fileServer.url with its scheme: upstream lets the
// scheme sftp:// be left out.
func FileServerURL(url string) string {
	if !strings.Contains(url, "://") {
		return "sftp://" + url
	}
	return url
}

// BundleFileName is the name a Node's bundle is uploaded as: upstream's
// agent's <nodeName>_<collectionName>.tar.gz.
func BundleFileName(nodeName, collectionName string) string {
	return nodeName + "_" + collectionName + ".tar.gz"
}

// CollectionExpiration is a collection's deadline: the time of its Started
// condition (its creation before it started) plus spec.expirationMinutes
// (default 60). antrea-controller fails the Nodes that have not reported by
// then; an agent does not start after it.
func CollectionExpiration(sbc *SupportBundleCollection) time.Time {
	start := sbc.CreationTimestamp.Time
	for _, cond := range sbc.Status.Conditions {
		if cond.Type == CollectionStarted && cond.Status == metav1.ConditionTrue {
			start = cond.LastTransitionTime.Time
		}
	}
	return start.Add(time.Duration(ExpirationMinutes(sbc)) * time.Minute)
}

// ExpirationMinutes is spec.expirationMinutes, or its default when unset.
func ExpirationMinutes(sbc *SupportBundleCollection) int32 {
	if sbc.Spec.ExpirationMinutes <= 0 {
		return DefaultExpirationMinutes
	}
	return sbc.Spec.ExpirationMinutes
}
