// Command kuberay-oracle prints what KubeRay's RayCluster controller, in its default
// configuration, creates for RayCluster documents. rayscale's differential test
// (tests/kuberay) compares rayscale's own rendering with this output.
//
//	kuberay-oracle [-crd FILE] [-batch-scheduler NAME] [FILE...]   (no FILE: read standard input)
//	kuberay-oracle [-crd FILE] -lifecycle  (multi-step scripts on standard input: lifecycle.go)
//	kuberay-oracle [-crd FILE] [-rayjob-crd FILE] -rayjob
//	                                       (KubeRay's RayJob controller, one reconcile per scripted
//	                                       step; cases on standard input: rayjob.go)
//
// -batch-scheduler NAME runs the reconciler as KubeRay's operator started with
// --batch-scheduler=NAME (batch.go); the PodGroups it makes are among the objects read back.
//
// Input: YAML (or JSON) documents; those whose kind is not RayCluster are skipped.
// Output: one JSON array on stdout, one entry per RayCluster document in input order:
//
//	{"index", "name", "namespace",
//	 "invalid": null | {"reason", "message"}, // KubeRay's validation refused the cluster
//	 "objects": [...],   // every Pod, Service, Ingress, Secret, ServiceAccount, Role,
//	                     // RoleBinding, Job and PodGroup the controller created, as the API would
//	                     // store them
//	 "cluster": {"metadata": {...}, "status": {...}}, // the RayCluster afterwards (finalizers, status)
//	 "events": [...], "errors": [...], "rounds": N}
//
// Nothing of KubeRay is reproduced here: the oracle runs KubeRay's own reconciler.
// ray.NewReconciler (controllers/ray) is given a stand-in manager whose client is
// controller-runtime's fake client, and RayClusterReconciler.Reconcile runs until
// nothing changes (at most maxRounds times). So every decision is KubeRay's, down to
// the unexported parts: rayClusterReconcile (setDefaults, ValidateRayClusterMetadata,
// ValidateRayClusterSpec, ValidateRayClusterUpgradeOptions, the GCS fault tolerance
// finalizer), the reconcile functions in their order (autoscaler ServiceAccount, Role
// and RoleBinding, Ingress, auth Secret, head Service, headless Service, serve Service,
// pods), buildHeadPod/buildWorkerPod (common.DefaultHeadPodTemplate,
// common.DefaultWorkerPodTemplate, common.BuildPod, the owner reference), createHeadPod
// (the upgrade-hash and version annotations), reconcileMultiHostWorkerGroup (replica
// names and indices) and calculateStatus. Feature gates keep their defaults
// (pkg/features), and the controller's environment switches are cleared before it
// runs, so it is the operator as installed with no options.
//
// What stands in for the API server, and only that, is done here:
//   - the structural defaulting and pruning of KubeRay's CRD (the CRD file of the
//     module, applied with apiextensions-apiserver's own defaulting and pruning code),
//     plus metadata the server sets: namespace "default" when absent, generation 1, a
//     fixed uid when absent;
//   - the defaults a new Service gets, some of which KubeRay's status reads back: type
//     ClusterIP, a cluster IP (always clusterIPFake), its ports' targetPort and protocol;
//   - generated names: the fake client appends 5 random characters to generateName;
//   - what the manager's cache does to an object it returns: its apiVersion and kind set
//     (controller-runtime's cache_reader.go; the fake client's typed Get leaves them empty).
//
// Not covered: admission (the CRD's OpenAPI and CEL validation, KubeRay's optional
// webhook), and pod or node status: pods stay as created (no phase), so the status is
// the one of a cluster whose pods are still being scheduled.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray"
)

const (
	maxRounds     = 8
	clusterIPFake = "10.96.0.10"
	fakeUID       = "00000000-0000-4000-8000-000000000001"
	crdFileName   = "ray.io_rayclusters.yaml"
)

// The environment switches KubeRay's RayCluster controller reads (os.Getenv in controllers/ray):
// cleared so that the oracle is KubeRay with its defaults whatever the caller's environment.
var kuberayEnv = []string{
	"CLUSTER_DOMAIN", "ENABLE_INIT_CONTAINER_INJECTION", "ENABLE_PROBES_INJECTION",
	"ENABLE_RANDOM_POD_DELETE", "ENABLE_GCS_FT_REDIS_CLEANUP", "ENABLE_DETERMINISTIC_HEAD_POD_NAME",
	"RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV", "ENABLE_LOGIN_SHELL", "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE",
	"USE_INGRESS_ON_OPENSHIFT",
}

type invalid struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type result struct {
	Index     int              `json:"index"`
	Name      string           `json:"name"`
	Namespace string           `json:"namespace"`
	Invalid   *invalid         `json:"invalid"`
	Objects   []map[string]any `json:"objects"`
	Cluster   map[string]any   `json:"cluster"`
	Events    []string         `json:"events"`
	Errors    []string         `json:"errors"`
	Rounds    int              `json:"rounds"`
}

// stubManager is the part of a controller-runtime manager that ray.NewReconciler uses.
// Any other method would panic on the nil embedded interface; none is called.
type stubManager struct {
	manager.Manager
	client   client.Client
	scheme   *runtime.Scheme
	recorder record.EventRecorder
}

func (m *stubManager) GetClient() client.Client                        { return m.client }
func (m *stubManager) GetScheme() *runtime.Scheme                      { return m.scheme }
func (m *stubManager) GetEventRecorderFor(string) record.EventRecorder { return m.recorder }
func (m *stubManager) GetFieldIndexer() client.FieldIndexer            { return noIndexer{} }

// noIndexer accepts the pod-UID index NewReconciler registers; the RayCluster controller
// never lists by it.
type noIndexer struct{}

func (noIndexer) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// listed is one kind of object the controller may create, read back after reconciling.
type listed struct {
	apiVersion, kind string
	list             func() client.ObjectList
}

var kinds = []listed{
	{"v1", "Pod", func() client.ObjectList { return &corev1.PodList{} }},
	{"v1", "Service", func() client.ObjectList { return &corev1.ServiceList{} }},
	{"v1", "Secret", func() client.ObjectList { return &corev1.SecretList{} }},
	{"v1", "ServiceAccount", func() client.ObjectList { return &corev1.ServiceAccountList{} }},
	{"networking.k8s.io/v1", "Ingress", func() client.ObjectList { return &networkingv1.IngressList{} }},
	{"rbac.authorization.k8s.io/v1", "Role", func() client.ObjectList { return &rbacv1.RoleList{} }},
	{"rbac.authorization.k8s.io/v1", "RoleBinding", func() client.ObjectList { return &rbacv1.RoleBindingList{} }},
	{"batch/v1", "Job", func() client.ObjectList { return &batchv1.JobList{} }},
}

func main() {
	crdPath := flag.String("crd", "", "KubeRay's RayCluster CRD (default: "+crdFileName+" next to the binary)")
	lifecycle := flag.Bool("lifecycle", false, "read lifecycle scripts (JSON) from standard input: see lifecycle.go")
	rayjob := flag.Bool("rayjob", false, "read RayJob cases (JSON) from standard input: see rayjob.go")
	rayjobCRDPath := flag.String("rayjob-crd", "", "KubeRay's RayJob CRD (default: "+rayjobCRDFileName+" of the module that build.sh recorded next to the binary)")
	flag.Parse()
	// KubeRay prints to stdout in places (utils.CheckName); the JSON goes to the real stdout.
	out := os.Stdout
	os.Stdout = os.Stderr
	ctrl.SetLogger(logr.Discard())
	for _, name := range kuberayEnv {
		_ = os.Unsetenv(name)
	}
	if err := run(*crdPath, *lifecycle, *rayjob, *rayjobCRDPath, flag.Args(), out); err != nil {
		fmt.Fprintln(os.Stderr, "kuberay-oracle:", err)
		os.Exit(1)
	}
}

func run(crdPath string, lifecycle, rayjob bool, rayjobCRD string, files []string, out io.Writer) error {
	if crdPath == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		crdPath = filepath.Join(filepath.Dir(exe), crdFileName)
	}
	schemas, err := loadSchemas(crdPath)
	if err != nil {
		return fmt.Errorf("%s: %w", crdPath, err)
	}
	if lifecycle {
		return runLifecycle(os.Stdin, schemas, out)
	}
	if rayjob {
		return runRayJob(os.Stdin, schemas, rayjobCRD, out)
	}
	if *raycronjobMode {
		return runRayCronJob(os.Stdin, out)
	}
	var docs []map[string]any
	if len(files) == 0 {
		if docs, err = readDocs(os.Stdin); err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		more, err := readDocs(fh)
		_ = fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		docs = append(docs, more...)
	}
	results := make([]result, 0, len(docs))
	for i, doc := range docs {
		res, err := render(doc, schemas)
		if err != nil {
			return fmt.Errorf("RayCluster document %d: %w", i, err)
		}
		res.Index = i
		results = append(results, res)
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(results)
}

// readDocs returns the RayCluster documents of a YAML stream.
func readDocs(r io.Reader) ([]map[string]any, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs []map[string]any
	for {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil || doc == nil {
			continue // empty document or not an object
		}
		if doc["kind"] == "RayCluster" {
			docs = append(docs, doc)
		}
	}
}

// loadSchemas reads the structural schema of every version of KubeRay's RayCluster CRD,
// keyed by apiVersion (ray.io/v1, ...).
func loadSchemas(path string) (map[string]*structuralschema.Structural, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	out := map[string]*structuralschema.Structural{}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, err
		}
		s, err := structuralschema.NewStructural(internal)
		if err != nil {
			return nil, err
		}
		out[crd.Spec.Group+"/"+v.Name] = s
	}
	return out, nil
}

// admit does to a document what the API server does when it stores it under KubeRay's CRD.
func admit(doc map[string]any, schemas map[string]*structuralschema.Structural) (*rayv1.RayCluster, error) {
	apiVersion, _ := doc["apiVersion"].(string)
	schema, ok := schemas[apiVersion]
	if !ok {
		return nil, fmt.Errorf("KubeRay's CRD has no version %q", apiVersion)
	}
	obj := runtime.DeepCopyJSON(doc)
	pruning.Prune(obj, schema, true)
	defaulting.Default(obj, schema)
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	cluster := &rayv1.RayCluster{}
	if err := json.Unmarshal(data, cluster); err != nil {
		return nil, err
	}
	if cluster.Namespace == "" {
		cluster.Namespace = "default"
	}
	if cluster.UID == "" {
		cluster.UID = types.UID(fakeUID)
	}
	cluster.Generation = 1
	cluster.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cluster.ResourceVersion = ""
	cluster.Status = rayv1.RayClusterStatus{}
	return cluster, nil
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := rayv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := addPodGroupTypes(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// defaultService stands in for what the API server adds to a new Service: its type, a
// cluster IP (KubeRay's status.head.serviceIP), the ports' targetPort (status.endpoints)
// and protocol.
func defaultService(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if svc, ok := obj.(*corev1.Service); ok {
		if svc.Spec.Type == "" {
			svc.Spec.Type = corev1.ServiceTypeClusterIP
		}
		if svc.Spec.ClusterIP == "" && svc.Spec.Type != corev1.ServiceTypeExternalName {
			svc.Spec.ClusterIP = clusterIPFake
		}
		for i := range svc.Spec.Ports {
			port := &svc.Spec.Ports[i]
			if port.Protocol == "" {
				port.Protocol = corev1.ProtocolTCP
			}
			if port.TargetPort == intstr.FromInt32(0) || port.TargetPort == intstr.FromString("") {
				port.TargetPort = intstr.FromInt32(port.Port)
			}
		}
	}
	return c.Create(ctx, obj, opts...)
}

func render(doc map[string]any, schemas map[string]*structuralschema.Structural) (result, error) {
	cluster, err := admit(doc, schemas)
	if err != nil {
		return result{}, err
	}
	e, err := newEnv(cluster, false)
	if err != nil {
		return result{}, err
	}
	res := e.newResult()
	return res, e.settle(&res)
}

// env is one RayCluster on a fake API server with KubeRay's reconciler.
type env struct {
	ctx           context.Context
	c             client.WithWatch
	recorder      *record.FakeRecorder
	reconciler    *ray.RayClusterReconciler
	request       ctrl.Request
	cluster       *rayv1.RayCluster
	statusWritten bool
	made          int // pods created with generateName (lifecycle: their names are deterministic)
}

// newEnv: with `deterministic`, a pod created with generateName is named by podSuffix (as the
// rayscale side names its own), so that both sides of a lifecycle script hold the same names.
func newEnv(cluster *rayv1.RayCluster, deterministic bool) (*env, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	e := &env{cluster: cluster}
	noteStatus := func(name string) {
		if name == "status" {
			e.statusWritten = true
		}
	}
	create := func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if pod, ok := obj.(*corev1.Pod); ok && deterministic && pod.Name == "" && pod.GenerateName != "" {
			e.made++
			pod.Name = pod.GenerateName + podSuffix(e.made)
		}
		return defaultService(ctx, c, obj, opts...)
	}
	e.c = fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(cluster).
		WithStatusSubresource(&rayv1.RayCluster{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: create,
			Get:    getWithKind,
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				noteStatus(sub)
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				noteStatus(sub)
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	e.recorder = record.NewFakeRecorder(10000)
	e.ctx = ctrl.LoggerInto(context.Background(), logr.Discard())
	options, err := reconcilerOptions(e.ctx, e.c, scheme)
	if err != nil {
		return nil, err
	}
	e.reconciler = ray.NewReconciler(e.ctx, &stubManager{client: e.c, scheme: scheme, recorder: e.recorder}, options)
	e.request = ctrl.Request{NamespacedName: types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name}}
	return e, nil
}

func (e *env) newResult() result {
	return result{Name: e.cluster.Name, Namespace: e.cluster.Namespace, Objects: []map[string]any{}, Events: []string{}, Errors: []string{}}
}

// settle runs KubeRay's Reconcile until nothing changes (at most maxRounds times).
func (e *env) settle(res *result) error {
	var last []byte
	for rounds := 0; ; rounds++ {
		if rounds == maxRounds {
			res.Errors = append(res.Errors, fmt.Sprintf("still changing after %d rounds", maxRounds))
			return nil
		}
		res.Rounds++
		if _, err := e.reconciler.Reconcile(e.ctx, e.request); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("round %d: %v", res.Rounds, err))
		}
		drain(e.recorder, res)
		objects, after, err := collect(e.ctx, e.c, e.cluster)
		if err != nil {
			return err
		}
		if after != nil && !e.statusWritten {
			// Never written: the stored RayCluster has no status (the typed read-back would
			// show zero quantities).
			after["status"] = nil
		}
		res.Objects, res.Cluster = objects, after
		state, err := json.Marshal([]any{withoutClocks(objects), withoutClocks(after)})
		if err != nil {
			return err
		}
		if bytes.Equal(state, last) {
			return nil
		}
		last = state
	}
}

// drain moves the recorded events into the result; a validation Warning makes it invalid.
func drain(recorder *record.FakeRecorder, res *result) {
	for {
		select {
		case event := <-recorder.Events:
			res.Events = append(res.Events, event)
			parts := strings.SplitN(event, " ", 3)
			if len(parts) == 3 && parts[0] == corev1.EventTypeWarning && strings.HasPrefix(parts[1], "InvalidRayCluster") && res.Invalid == nil {
				res.Invalid = &invalid{Reason: parts[1], Message: parts[2]}
			}
		default:
			return
		}
	}
}

// collect reads back everything in the cluster's namespace, and the RayCluster itself.
func collect(ctx context.Context, c client.Client, cluster *rayv1.RayCluster) ([]map[string]any, map[string]any, error) {
	objects := []map[string]any{}
	for _, k := range kinds {
		list := k.list()
		if err := c.List(ctx, list, client.InNamespace(cluster.Namespace)); err != nil {
			return nil, nil, err
		}
		items := reflect.ValueOf(list).Elem().FieldByName("Items")
		for i := 0; i < items.Len(); i++ {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(items.Index(i).Addr().Interface())
			if err != nil {
				return nil, nil, err
			}
			u["apiVersion"], u["kind"] = k.apiVersion, k.kind
			clean(u)
			objects = append(objects, u)
		}
	}
	sort.SliceStable(objects, func(i, j int) bool {
		return key(objects[i]) < key(objects[j])
	})
	rc := &rayv1.RayCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), rc); apierrors.IsNotFound(err) {
		return objects, nil, nil // deleted (lifecycle scripts)
	} else if err != nil {
		return nil, nil, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rc)
	if err != nil {
		return nil, nil, err
	}
	clean(u)
	after := map[string]any{"metadata": u["metadata"], "status": u["status"]}
	return objects, after, nil
}

func key(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return fmt.Sprint(obj["kind"], "/", name)
}

// clean drops what only the fake API server writes (resourceVersion) and empty placeholders
// of the typed conversion (creationTimestamp: null, status: {}).
func clean(u map[string]any) {
	if meta, ok := u["metadata"].(map[string]any); ok {
		delete(meta, "resourceVersion")
		if meta["creationTimestamp"] == nil {
			delete(meta, "creationTimestamp")
		}
	}
	if status, ok := u["status"].(map[string]any); ok && len(status) == 0 {
		delete(u, "status")
	}
}

// withoutClocks is a copy without wall-clock times, to tell when reconciling has settled.
func withoutClocks(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range t {
			switch k {
			case "lastUpdateTime", "lastTransitionTime", "stateTransitionTimes":
				continue
			}
			out[k] = withoutClocks(val)
		}
		return out
	case []map[string]any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = withoutClocks(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = withoutClocks(val)
		}
		return out
	default:
		return v
	}
}
