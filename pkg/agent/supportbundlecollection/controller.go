// Package supportbundlecollection is the agent's side of
// SupportBundleCollection (crd.antrea.io/v1alpha1, docs/support-bundle-guide.md).
//
// The agent watches the CRD itself and works on a collection once
// antrea-controller has listed this Node in its status.nodes as Pending
// (pkg/controller/supportbundlecollection chose the Nodes): it reads the
// file server's credentials from the Secret of spec.authentication.authSecret,
// collects this Node's support bundle (pkg/supportbundle, the logs written
// since spec.sinceTime), uploads it as <nodeName>_<collectionName>.tar.gz
// (pkg/util/fileserver), and writes its Node's result into status.nodes:
// Collected, or Failed with why. A failure is also a Warning Event on the
// collection.
//
// One collection at a time: a single worker takes them in the order they
// came; the others wait in the queue. A Node whose result is written is
// never collected again (a restarted agent skips it), and a collection past
// its expiration is left to antrea-controller, which fails the Node.
// The credentials are used for the upload only: they are never logged, nor
// written into an Event or the status.
package supportbundlecollection

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1alpha1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1alpha1"
	"antrea.io/antrea/pkg/util/fileserver"
	"antrea.io/antrea/pkg/util/namequeue"
)

// Uploader uploads content as name to a file server (fileserver.Upload).
type Uploader func(ctx context.Context, s fileserver.Server, name string, content io.Reader) error

// Collector writes this Node's support bundle to w, with the log files
// written since since (all of them when zero).
type Collector func(ctx context.Context, since time.Time, w io.Writer) error

// Config is what the controller needs.
type Config struct {
	NodeName string
	// Client writes status.nodes; Kube reads the credentials' Secret.
	Client   versioned.Interface
	Kube     kubernetes.Interface
	Informer crdinformers.SupportBundleCollectionInformer
	Collect  Collector
	// Upload defaults to fileserver.Upload.
	Upload Uploader
	// Recorder records the Warning Events of failures.
	Recorder record.EventRecorder
	// TempDir holds a bundle while it is uploaded (default os.TempDir()).
	TempDir string
}

// Controller collects this Node's bundle for the collections that ask it.
type Controller struct {
	cfg    Config
	lister crdlisters.SupportBundleCollectionLister
	synced cache.InformerSynced
	queue  *namequeue.Queue
	now    func() time.Time
	// results are the results collected but not yet written (a failed
	// status write is retried without collecting again). Worker only.
	results map[string]crdv1alpha1.SupportBundleCollectionNodeResult
	// reported are the collections (by name, with their UID) whose result
	// this agent wrote: the lister may still show them Pending for a moment,
	// and a sync then must not collect again. Worker only.
	reported map[string]types.UID
}

// NewController watches SupportBundleCollections.
func NewController(cfg Config) (*Controller, error) {
	if cfg.Upload == nil {
		cfg.Upload = fileserver.Upload
	}
	c := &Controller{
		cfg:      cfg,
		lister:   cfg.Informer.Lister(),
		synced:   cfg.Informer.Informer().HasSynced,
		now:      time.Now,
		results:  map[string]crdv1alpha1.SupportBundleCollectionNodeResult{},
		reported: map[string]types.UID{},
	}
	c.queue = namequeue.New("SupportBundleCollection", cfg.Informer.Informer(), c.sync)
	return c, nil
}

// Run collects until ctx ends, one collection at a time.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	klog.InfoS("Started the SupportBundleCollection controller", "node", c.cfg.NodeName)
	c.queue.Run(ctx)
}

// pending says whether antrea-controller lists this Node as Pending in a
// collection that has not expired.
func (c *Controller) pending(sbc *crdv1alpha1.SupportBundleCollection) bool {
	for _, n := range sbc.Status.Nodes {
		if n.Name == c.cfg.NodeName {
			return n.State == crdv1alpha1.NodePending && c.now().Before(crdv1alpha1.CollectionExpiration(sbc))
		}
	}
	return false
}

// sync collects and uploads this Node's bundle for one collection, if it
// still waits for it, and writes the result.
func (c *Controller) sync(ctx context.Context, name string) error {
	sbc, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		delete(c.results, name)
		delete(c.reported, name)
		return nil
	}
	if err != nil {
		return err
	}
	if uid, ok := c.reported[name]; ok && uid == sbc.UID {
		return nil
	}
	result, ok := c.results[name]
	if !ok {
		if !c.pending(sbc) {
			return nil
		}
		result = c.collect(ctx, sbc)
		if ctx.Err() != nil {
			return nil // stopping: the next run collects it
		}
		c.results[name] = result
	}
	if err := c.report(ctx, name, result); err != nil {
		return err
	}
	delete(c.results, name)
	c.reported[name] = sbc.UID
	return nil
}

// collect makes and uploads the bundle; the result says how it went.
func (c *Controller) collect(ctx context.Context, sbc *crdv1alpha1.SupportBundleCollection) crdv1alpha1.SupportBundleCollectionNodeResult {
	ctx, cancel := context.WithDeadline(ctx, crdv1alpha1.CollectionExpiration(sbc))
	defer cancel()
	start := c.now()
	fileName := crdv1alpha1.BundleFileName(c.cfg.NodeName, sbc.Name)
	klog.InfoS("Collecting this Node's support bundle", "supportBundleCollection", sbc.Name, "node", c.cfg.NodeName, "file", fileName)
	err := c.collectAndUpload(ctx, sbc, fileName)
	if err != nil {
		klog.ErrorS(err, "Could not collect this Node's support bundle", "supportBundleCollection", sbc.Name, "node", c.cfg.NodeName)
		msg := err.Error()
		c.cfg.Recorder.Eventf(sbc, corev1.EventTypeWarning, string(crdv1alpha1.CollectionFailure), "Node %s: %s", c.cfg.NodeName, msg)
		return crdv1alpha1.SupportBundleCollectionNodeResult{Name: c.cfg.NodeName, State: crdv1alpha1.NodeFailed, Message: msg}
	}
	klog.InfoS("Uploaded this Node's support bundle", "supportBundleCollection", sbc.Name, "node", c.cfg.NodeName, "file", fileName,
		"duration", c.now().Sub(start))
	return crdv1alpha1.SupportBundleCollectionNodeResult{Name: c.cfg.NodeName, State: crdv1alpha1.NodeCollected}
}

// collectAndUpload returns an error that never holds the credentials.
func (c *Controller) collectAndUpload(ctx context.Context, sbc *crdv1alpha1.SupportBundleCollection, fileName string) error {
	spec := &sbc.Spec
	if spec.Authentication.AuthType != crdv1alpha1.BasicAuthentication {
		return fmt.Errorf("authType %s is not supported (only BasicAuthentication)", spec.Authentication.AuthType)
	}
	ref := spec.Authentication.AuthSecret
	if ref == nil {
		return errors.New("spec.authentication.authSecret is not set")
	}
	secret, err := c.cfg.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsForbidden(err) {
		// Upstream's guide binds antrea-controller to the Secret; here the
		// agents read it.
		return fmt.Errorf("reading the file server's credentials from Secret %s/%s: antrea-agent may not read it: "+
			"bind the ServiceAccount kube-system/antrea-agent to a Role that may get it (docs/support-bundle-guide.md; "+
			"upstream's guide binds antrea-controller, but here the agents read the Secret): %w", ref.Namespace, ref.Name, err)
	}
	if err != nil {
		return fmt.Errorf("reading the file server's credentials from Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	server, err := fileserver.ServerFromSecret(crdv1alpha1.FileServerURL(spec.FileServer.URL), spec.FileServer.HostPublicKey, secret)
	if err != nil {
		return err
	}
	var since time.Time
	if d, err := crdv1alpha1.SinceDuration(spec.SinceTime); err != nil {
		return fmt.Errorf("spec.sinceTime: %w", err)
	} else if d > 0 {
		since = c.now().Add(-d)
	}
	f, err := os.CreateTemp(c.cfg.TempDir, "supportbundle-*.tar.gz")
	if err != nil {
		return fmt.Errorf("a file for the bundle: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	if err := c.cfg.Collect(ctx, since, f); err != nil {
		return fmt.Errorf("collecting the bundle: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("reading the bundle back: %w", err)
	}
	if err := c.cfg.Upload(ctx, server, fileName, f); err != nil {
		if errors.Is(err, fileserver.ErrAuthentication) {
			return fmt.Errorf("uploading %s: authentication failed (the username and password of Secret %s/%s)",
				fileName, ref.Namespace, ref.Name)
		}
		// fileserver's errors do not hold the credentials; make sure.
		msg := err.Error()
		for _, s := range []string{server.Password} {
			if s != "" {
				msg = strings.ReplaceAll(msg, s, "[redacted]")
			}
		}
		return fmt.Errorf("uploading %s: %s", fileName, msg)
	}
	return nil
}

// report writes this Node's result into status.nodes, unless it is no
// longer Pending there (antrea-controller failed it at expiration).
func (c *Controller) report(ctx context.Context, name string, result crdv1alpha1.SupportBundleCollectionNodeResult) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sbc, err := c.cfg.Client.CrdV1alpha1().SupportBundleCollections().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		sbc = sbc.DeepCopy()
		for i := range sbc.Status.Nodes {
			n := &sbc.Status.Nodes[i]
			if n.Name != c.cfg.NodeName {
				continue
			}
			if n.State != crdv1alpha1.NodePending {
				return nil
			}
			*n = result
			_, err := c.cfg.Client.CrdV1alpha1().SupportBundleCollections().UpdateStatus(ctx, sbc, metav1.UpdateOptions{})
			return err
		}
		return nil
	})
}
