package antctl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// podExec runs argv in a container of a pod, as kubectl exec does (the
// pods/exec subresource over WebSocket, falling back to SPDY), with stdout
// and stderr streamed to the writers. Tests replace execInPod.
type podExec func(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error

// execInPod is the exec antctl uses; check cluster and supportbundle run
// antctl itself in pods through it.
var execInPod = func(o *options) podExec {
	return func(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
		cfg, err := o.restConfig()
		if err != nil {
			return err
		}
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true},
				scheme.ParameterCodec)
		spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
		if err != nil {
			return fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
		}
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
		if err != nil {
			return fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
		}
		exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool { return true })
		if err != nil {
			return fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
		}
		if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr}); err != nil {
			return fmt.Errorf("exec %s in %s/%s: %w", strings.Join(argv, " "), ns, pod, err)
		}
		return nil
	}
}

// execOutput runs argv and returns its stdout; the error carries the last
// line of stderr.
func execOutput(ctx context.Context, ex podExec, ns, pod, container string, argv ...string) (string, error) {
	var out, errb bytes.Buffer
	err := ex(ctx, ns, pod, container, argv, &out, &errb)
	if err != nil {
		if msg := lastLine(errb.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
	}
	return out.String(), err
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}
