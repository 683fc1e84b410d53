package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSinceDurationReadsUpstreamsForms(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "2h": 2 * time.Hour, "30m": 30 * time.Minute, "1h30m": 90 * time.Minute, "1d": 24 * time.Hour} {
		if got, err := SinceDuration(in); err != nil || got != want {
			t.Errorf("SinceDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "2", "-1h", "0s", "d", "1.5d"} {
		if _, err := SinceDuration(in); err == nil {
			t.Errorf("SinceDuration(%q) accepted", in)
		}
	}
}

func TestFileServerURLAddsTheSchemeUpstreamLetsBeLeftOut(t *testing.T) {
	for in, want := range map[string]string{
		"yourtestdomain.com:22/root/test":        "sftp://yourtestdomain.com:22/root/test",
		"sftp://yourtestdomain.com:22/root/test": "sftp://yourtestdomain.com:22/root/test",
		"https://files.example:443/up":           "https://files.example:443/up",
	} {
		if got := FileServerURL(in); got != want {
			t.Errorf("FileServerURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestACollectionExpiresExpirationMinutesAfterItStarted(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sbc := &SupportBundleCollection{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	if got := CollectionExpiration(sbc); !got.Equal(created.Add(60 * time.Minute)) {
		t.Errorf("not started, no expirationMinutes: %v, want the creation plus upstream's default 60m", got)
	}
	sbc.Spec.ExpirationMinutes = 10
	sbc.Status.Conditions = []SupportBundleCollectionCondition{{Type: CollectionStarted, Status: metav1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(created.Add(time.Minute))}}
	if got := CollectionExpiration(sbc); !got.Equal(created.Add(11 * time.Minute)) {
		t.Errorf("started a minute after its creation, 10 minutes: %v, want the start plus 10m", got)
	}
}
