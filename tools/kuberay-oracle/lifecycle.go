package main

// Lifecycle scripts (kuberay-oracle -lifecycle): one RayCluster through several steps, each a
// new version of the RayCluster as a user applies it, or its deletion. After each step KubeRay's
// reconciler runs until nothing changes, then the stand-in kubelet makes every pod Running and
// Ready and every Job complete, and the reconciler runs until nothing changes again. The answer
// of a step is what exists afterwards and the Events of the step.
//
// Input (standard input): a JSON array of scripts
//
//	[{"name": "...", "steps": [{"name": "...", "cluster": {RayCluster}} | {"name": "...", "delete": true}, ...]}]
//
// A string "pod:<group>/<replica index>[/<host index>]" in a worker group's
// scaleStrategy.workersToDelete is replaced by the name of the pod with those labels.
// Output: [{"index", "name", "namespace", "steps": [{"name" (the step's), "objects", "cluster",
// "events", "errors", "rounds", ...}]}]; "cluster" is null once the RayCluster is gone.
//
// What stands in for the API server and the kubelet, beyond main.go's: a pod created with
// generateName is named podSuffix(n) after its prefix, n counting the script's pods (the
// rayscale side names its pods the same way, so that both hold the same names and a choice
// by name is comparable); a spec change increments the generation; the kubelet gives a pod
// phase Running, the Ready condition and a pod IP derived from its name (through the status
// subresource, which the fake client gives built-in kinds).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

type lifecycleStep struct {
	Name    string         `json:"name"`
	Cluster map[string]any `json:"cluster,omitempty"`
	Delete  bool           `json:"delete,omitempty"`
}

type lifecycleScript struct {
	Name  string          `json:"name"`
	Steps []lifecycleStep `json:"steps"`
}

type scriptResult struct {
	Index     int      `json:"index"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Steps     []result `json:"steps"` // each named after its step
}

// podSuffix is the 5 characters after a pod's generateName: the first 5 hex digits of the
// SHA-256 of the decimal count.
func podSuffix(n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(n)))
	return hex.EncodeToString(sum[:])[:5]
}

// podIP is the kubelet's stand-in address of a pod: 10.244.x.y from the SHA-256 of its name.
func podIP(name string) string {
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("10.244.%d.%d", sum[0], sum[1]%254+1)
}

func runLifecycle(in io.Reader, schemas map[string]*structuralschema.Structural, out io.Writer) error {
	var scripts []lifecycleScript
	if err := json.NewDecoder(in).Decode(&scripts); err != nil {
		return fmt.Errorf("lifecycle scripts: %w", err)
	}
	results := make([]scriptResult, 0, len(scripts))
	for i, s := range scripts {
		res, err := runScript(s, schemas)
		if err != nil {
			return fmt.Errorf("script %d (%s): %w", i, s.Name, err)
		}
		res.Index = i
		results = append(results, res)
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(results)
}

func runScript(s lifecycleScript, schemas map[string]*structuralschema.Structural) (scriptResult, error) {
	if len(s.Steps) == 0 || s.Steps[0].Cluster == nil {
		return scriptResult{}, fmt.Errorf("the first step must give the RayCluster")
	}
	cluster, err := admit(s.Steps[0].Cluster, schemas)
	if err != nil {
		return scriptResult{}, err
	}
	e, err := newEnv(cluster, true)
	if err != nil {
		return scriptResult{}, err
	}
	out := scriptResult{Name: s.Name, Namespace: cluster.Namespace, Steps: []result{}}
	for i, st := range s.Steps {
		res := e.newResult()
		switch {
		case i == 0:
		case st.Delete:
			err = e.deleteCluster()
		default:
			err = e.apply(st.Cluster, schemas)
		}
		if err != nil {
			return out, fmt.Errorf("step %s: %w", st.Name, err)
		}
		if err := e.settle(&res); err != nil {
			return out, err
		}
		if err := e.kubelet(); err != nil {
			return out, err
		}
		if err := e.settle(&res); err != nil {
			return out, err
		}
		res.Name = st.Name
		out.Steps = append(out.Steps, res)
	}
	return out, nil
}

// apply stores a new version of the RayCluster as the API server would: defaulted and pruned,
// its status kept, the generation incremented when the spec changed.
func (e *env) apply(doc map[string]any, schemas map[string]*structuralschema.Structural) error {
	if err := e.resolvePodNames(doc); err != nil {
		return err
	}
	next, err := admit(doc, schemas)
	if err != nil {
		return err
	}
	rc := &rayv1.RayCluster{}
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(e.cluster), rc); err != nil {
		return err
	}
	if !reflect.DeepEqual(rc.Spec, next.Spec) {
		rc.Generation++
	}
	rc.Spec, rc.Labels, rc.Annotations = next.Spec, next.Labels, next.Annotations
	return e.c.Update(e.ctx, rc)
}

func (e *env) deleteCluster() error {
	rc := &rayv1.RayCluster{}
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(e.cluster), rc); err != nil {
		return err
	}
	return e.c.Delete(e.ctx, rc)
}

// resolvePodNames replaces "pod:<group>/<replica>[/<host>]" in workersToDelete by a pod's name.
func (e *env) resolvePodNames(doc map[string]any) error {
	spec, _ := doc["spec"].(map[string]any)
	groups, _ := spec["workerGroupSpecs"].([]any)
	for _, g := range groups {
		group, _ := g.(map[string]any)
		strategy, _ := group["scaleStrategy"].(map[string]any)
		names, _ := strategy["workersToDelete"].([]any)
		for i, n := range names {
			ref, ok := n.(string)
			if !ok || !strings.HasPrefix(ref, "pod:") {
				continue
			}
			name, err := e.podNamed(strings.Split(strings.TrimPrefix(ref, "pod:"), "/"))
			if err != nil {
				return err
			}
			names[i] = name
		}
	}
	return nil
}

func (e *env) podNamed(ref []string) (string, error) {
	labels := client.MatchingLabels{"ray.io/group": ref[0]}
	if len(ref) > 1 {
		labels["ray.io/worker-group-replica-index"] = ref[1]
	}
	if len(ref) > 2 {
		labels["ray.io/replica-host-index"] = ref[2]
	}
	pods := &corev1.PodList{}
	if err := e.c.List(e.ctx, pods, client.InNamespace(e.cluster.Namespace), labels); err != nil {
		return "", err
	}
	if len(pods.Items) != 1 {
		return "", fmt.Errorf("pod:%s matches %d pods", strings.Join(ref, "/"), len(pods.Items))
	}
	return pods.Items[0].Name, nil
}

// kubelet makes every pod Running and Ready (with an IP) and every Job complete.
func (e *env) kubelet() error {
	ns := client.InNamespace(e.cluster.Namespace)
	pods := &corev1.PodList{}
	if err := e.c.List(e.ctx, pods, ns); err != nil {
		return err
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase == corev1.PodRunning {
			continue
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = podIP(pod.Name)
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if err := e.c.Status().Update(e.ctx, pod); err != nil {
			return err
		}
	}
	jobs := &batchv1.JobList{}
	if err := e.c.List(e.ctx, jobs, ns); err != nil {
		return err
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if job.Status.Succeeded > 0 {
			continue
		}
		job.Status.Succeeded = 1
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		if err := e.c.Status().Update(e.ctx, job); err != nil {
			return err
		}
	}
	return nil
}
