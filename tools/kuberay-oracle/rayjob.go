package main

// RayJob scripts (kuberay-oracle -rayjob): KubeRay's own RayJob controller (ray.NewRayJobReconciler,
// controllers/ray/rayjob_controller.go) driven one reconcile at a time through a scripted world.
// Nothing of KubeRay's RayJob logic is reproduced here: validateRayJob, the JobDeploymentStatus
// state machine, initRayJobStatusIfNeed (job id and cluster name), getOrCreateRayClusterInstance
// and constructRayClusterForRayJob (the sidecar), createK8sJobIfNeed and getSubmitterTemplate
// (common.GetSubmitterTemplate, BuildJobSubmitCommand), reconcileServices, the deadlines, the
// backoff limit, suspension, the deletion rules and policies, and the finalizer are all KubeRay's.
// What the oracle scripts is what KubeRay reads from outside: the RayCluster's status (the RayCluster
// controller does not run), the head pod, the submitter Job's status, the Ray dashboard, the clock.
//
// Input (standard input): a JSON array of cases
//
//	[{"name": str,
//	  "rayjob": {RayJob manifest},
//	  "objects": [manifests created before the first step, e.g. a RayCluster for clusterSelector;
//	              a "status" in one is written through the status subresource],
//	  "steps": [step, ...]}]
//
// A step first changes the world, in this order, then calls Reconcile exactly once, then records
// what is there. Its keys, all optional (unknown keys are an error):
//
//	"age": n              n seconds pass: every timestamp below moves n seconds into the past (see Clock)
//	"spec": {...}         a JSON merge patch (RFC 7386) onto the RayJob's spec; the result is defaulted
//	                      and pruned by the CRD, and the generation goes up when the spec changed
//	"delete": true        the RayJob is deleted (with KubeRay's finalizer on it, the fake client only
//	                      sets deletionTimestamp)
//	"cluster_delete": true   the RayCluster named status.rayClusterName is deleted
//	"cluster_status": {...}  a JSON merge patch onto that RayCluster's status, e.g. {"state": "ready"}
//	"head_pod": null | {"submitter": null | {"exitCode": int, "reason": str, "ago": s}}
//	                      that RayCluster's head pod (name <cluster>-head, the labels
//	                      common.GetRayClusterHeadPod selects by, its spec the head group's template,
//	                      owned by the RayCluster) is created or updated: phase Running, every container
//	                      running except "ray-job-submitter", terminated with that exit code, reason
//	                      and finishedAt = now - ago (running when null); head_pod null deletes it
//	"submitter": {"conditions": [{"type": "Complete"|"Failed"|..., "status": "True" (default),
//	              "reason", "message", "ago": s}]}
//	                      the status of the submitter Job (named as common.RayJobK8sJobNamespacedName
//	                      names it): these conditions, lastTransitionTime = now - ago; a Complete
//	                      condition also sets succeeded 1 and completionTime, a Failed one failed 1
//	"job_info": null | {"jobStatus", "message", "startTime", "endTime", "entrypoint"}
//	                      what the dashboard's GetJobInfo answers from now on; null (the initial state):
//	                      the BadRequest "Job <id> does not exist on the cluster" the real client gives.
//	                      startTime/endTime are milliseconds before now (0 or absent: unset, as Ray's
//	                      0); a value of 1e12 or more is taken as Unix milliseconds as Ray reports them
//	"dashboard_error": str  GetJobInfo and SubmitJob fail with this error until a step sets "" again
//
// Scripting mistakes (a cluster_status before the RayJob names a RayCluster, a submitter before the
// Job exists) fail the whole run with a message naming the case and step.
//
// Output: a JSON array, one entry per case in input order:
//
//	{"name", "steps": [{
//	   "status": the RayJob's status (timestamps as {"ago": n}, see Clock) | "deleted",
//	   "finalizers": [...],
//	   "objects": [every RayCluster, batch Job and Service, as stored, metadata.creationTimestamp,
//	               resourceVersion, uid and managedFields dropped, sorted by kind then name],
//	   "events": ["Type Reason Message", ...],         // Events KubeRay recorded in this step
//	   "dashboard_calls": [{"op": "GetJobInfo"|"SubmitJob"|"StopJob"|..., "jobId", "url",
//	                        "request": {...}}, ...],   // in order; "url": the dashboard URL KubeRay gave
//	                                                   // the client factory; "request" (SubmitJob only):
//	                                                   // the body KubeRay's dashboardclient.ConvertRayJobToReq
//	                                                   // builds (entrypoint, runtime_env, metadata,
//	                                                   // entrypoint_resources, entrypoint_num_cpus/gpus,
//	                                                   // submission_id), with the real client's JSON names
//	   "result": {"requeueAfter": seconds, "error": str | null}}]}
//
// A panic in the reconciler is recovered and reported as the step's error ("panic: ...").
//
// The world. The client is controller-runtime's fake client (status subresource for RayJob,
// RayCluster, batch Job and the built-in kinds); the manager is main.go's stubManager; the
// utils.ClientProvider hands KubeRay a scripted dashboard (above) that records every call. No batch
// scheduler manager, no metrics manager, default feature gates (pkg/features: RayJobDeletionPolicy on,
// AsyncJobInfoQuery off), and the environment switches cleared (main.go's kuberayEnv and rayjobEnv
// below). Beyond main.go's API-server stand-ins (CRD defaulting and pruning, now also for the RayJob
// CRD of the module, config/crd/bases/ray.io_rayjobs.yaml, and for every RayCluster created; Service
// defaults), the oracle stands in for:
//   - uids: a created object without one gets 00000000-0000-4000-8000-<n>, n counting the case's
//     objects from 2 (the RayJob is main.go's fakeUID), so owner references are reproducible;
//   - the garbage collector: before each reconcile, an object whose owners are all gone is deleted
//     (again until none is), so a deleted RayJob's RayCluster, Job and Service are gone one step later;
//   - no status: a RayJob or RayCluster whose status was never written through the status
//     subresource is shown without one (status {} for the RayJob), as the API server would hold it;
//   - the RayCluster controller, for one object only: each RayCluster not being deleted gets its head
//     Service (common.BuildServiceForHeadPod, owned by the RayCluster) before each reconcile, since the
//     RayJob controller reads the dashboard URL off it (utils.FetchHeadServiceURL). Its status and
//     head pod are the script's.
//
// Names. k8s.io/apimachinery/pkg/util/rand is seeded with 1 at the start of every case, so the job
// id and RayCluster name KubeRay generates (<rayjob>-<5 random characters>) do not depend on the
// other cases or their order.
//
// Clock. KubeRay calls time.Now() directly; the oracle does not touch it. Instead every case has a
// virtual now (the "now" of the step keys above): the wall clock at the case's start, truncated to
// the second. A timestamp KubeRay writes into the RayJob's status later than that (time.Now() while
// the case runs) is set back to it on its way into the store (the API server would truncate it to the
// second anyway), and "age" moves every timestamp back: the RayJob's status (startTime, endTime,
// rayJobInfo, rayClusterStatus), each RayCluster's status, the Jobs' statuses (conditions, startTime,
// completionTime), the pods' container states, the dashboard's job start and end times, and the times
// KubeRay printed into the RayJob's status.message (in the layout it printed them in); not
// metadata (deletionTimestamp). Output reports a timestamp (a field named *Time, *Timestamp or *At)
// as {"ago": whole seconds before the virtual now} (0 for later ones); a time printed in a message,
// an Event or an error (KubeRay prints StartTime with %v, a submitter's finishedAt as time.DateTime)
// as "<n s ago>"; and a requeueAfter KubeRay derives from time.Until (the deletion TTLs) as of the
// virtual now, in whole seconds, a fixed one (3 s) as it is. So the output is the same on every run.
// KubeRay's own comparisons see the real clock, which runs up to a second or so (the truncation plus
// the case's run time) ahead of the virtual now: keep a script's ages at least 2 s short of a
// threshold it must not reach (past one, any margin will do).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/dashboardclient"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
)

// The environment switches KubeRay's RayJob controller reads, beyond main.go's kuberayEnv.
var rayjobEnv = []string{
	utils.RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS, utils.DELETE_RAYJOB_CR_AFTER_JOB_FINISHES,
}

const (
	rayjobCRDFileName = "ray.io_rayjobs.yaml"
	rayjobSeed        = 1
	absoluteMillis    = 1_000_000_000_000 // job_info times from here on are Unix milliseconds
)

type rayJobCase struct {
	Name    string           `json:"name"`
	RayJob  map[string]any   `json:"rayjob"`
	Objects []map[string]any `json:"objects"`
	Steps   []rayJobStep     `json:"steps"`
}

type rayJobStep struct {
	Age            int64            `json:"age"`
	Spec           map[string]any   `json:"spec"`
	Delete         bool             `json:"delete"`
	ClusterDelete  bool             `json:"cluster_delete"`
	ClusterStatus  map[string]any   `json:"cluster_status"`
	HeadPod        json.RawMessage  `json:"head_pod"` // absent: untouched; null: deleted
	Submitter      *submitterScript `json:"submitter"`
	JobInfo        json.RawMessage  `json:"job_info"` // absent: untouched; null: not found
	DashboardError *string          `json:"dashboard_error"`
}

type jobInfoScript struct {
	JobStatus  rayv1.JobStatus `json:"jobStatus"`
	Message    string          `json:"message"`
	StartTime  int64           `json:"startTime"`
	EndTime    int64           `json:"endTime"`
	Entrypoint string          `json:"entrypoint"`
}

type submitterScript struct {
	Conditions []struct {
		Type    batchv1.JobConditionType `json:"type"`
		Status  corev1.ConditionStatus   `json:"status"`
		Reason  string                   `json:"reason"`
		Message string                   `json:"message"`
		Ago     int64                    `json:"ago"`
	} `json:"conditions"`
}

type headPodScript struct {
	Submitter *struct {
		ExitCode int32  `json:"exitCode"`
		Reason   string `json:"reason"`
		Ago      int64  `json:"ago"`
	} `json:"submitter"`
}

type rayJobCaseResult struct {
	Name  string             `json:"name"`
	Steps []rayJobStepResult `json:"steps"`
}

type rayJobStepResult struct {
	Status         any              `json:"status"`
	Finalizers     []string         `json:"finalizers"`
	Objects        []map[string]any `json:"objects"`
	Events         []string         `json:"events"`
	DashboardCalls []map[string]any `json:"dashboard_calls"`
	Result         stepOutcome      `json:"result"`
}

type stepOutcome struct {
	RequeueAfter float64 `json:"requeueAfter"`
	Error        *string `json:"error"`
}

// schemaSet: kind -> apiVersion -> the structural schema of KubeRay's CRD.
type schemaSet map[string]map[string]*structuralschema.Structural

// rayjobCRD is the RayJob CRD of the module the oracle was built from (build.sh records its
// directory in module-dir next to the binary).
func rayjobCRD(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.ReadFile(filepath.Join(filepath.Dir(exe), "module-dir"))
	if err != nil {
		return "", fmt.Errorf("the RayJob CRD: give -rayjob-crd, or run the binary build.sh made: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(dir)), "config", "crd", "bases", rayjobCRDFileName), nil
}

func runRayJob(in io.Reader, clusterSchemas map[string]*structuralschema.Structural, crdFlag string, out io.Writer) error {
	for _, name := range rayjobEnv {
		_ = os.Unsetenv(name)
	}
	crd, err := rayjobCRD(crdFlag)
	if err != nil {
		return err
	}
	jobSchemas, err := loadSchemas(crd)
	if err != nil {
		return fmt.Errorf("%s: %w", crd, err)
	}
	schemas := schemaSet{"RayCluster": clusterSchemas, "RayJob": jobSchemas}
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	var cases []rayJobCase
	if err := dec.Decode(&cases); err != nil {
		return fmt.Errorf("rayjob cases: %w", err)
	}
	results := make([]rayJobCaseResult, 0, len(cases))
	for i, c := range cases {
		res, err := runRayJobCase(c, schemas)
		if err != nil {
			return fmt.Errorf("case %d (%s): %w", i, c.Name, err)
		}
		results = append(results, res)
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(results)
}

// admitDoc prunes and defaults a manifest by KubeRay's CRD of its kind, as the API server stores it.
func (s schemaSet) admitDoc(doc map[string]any) (map[string]any, error) {
	kind, _ := doc["kind"].(string)
	apiVersion, _ := doc["apiVersion"].(string)
	byVersion, ok := s[kind]
	if !ok {
		return doc, nil
	}
	sch, ok := byVersion[apiVersion]
	if !ok {
		return nil, fmt.Errorf("KubeRay's %s CRD has no version %q", kind, apiVersion)
	}
	obj := runtime.DeepCopyJSON(doc)
	pruning.Prune(obj, sch, true)
	defaulting.Default(obj, sch)
	return obj, nil
}

// admitRayCluster defaults and prunes a RayCluster in place (one KubeRay creates).
func (s schemaSet) admitRayCluster(rc *rayv1.RayCluster) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rc)
	if err != nil {
		return err
	}
	u["apiVersion"], u["kind"] = rayv1.GroupVersion.String(), "RayCluster"
	if u, err = s.admitDoc(u); err != nil {
		return err
	}
	*rc = rayv1.RayCluster{}
	return fromMap(u, rc)
}

// fromMap decodes a manifest (JSON numbers as float64 or int64) into a typed object, as the API
// server's JSON decoding would.
func fromMap(u map[string]any, obj any) error {
	data, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, obj)
}

// decode turns a manifest into a typed object of the scheme, admitted by its CRD; status kept.
func decode(doc map[string]any, schemas schemaSet, scheme *runtime.Scheme) (client.Object, error) {
	doc, err := schemas.admitDoc(doc)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: doc}
	raw, err := scheme.New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	obj, ok := raw.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", u.GroupVersionKind())
	}
	if err := fromMap(doc, obj); err != nil {
		return nil, err
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	obj.SetResourceVersion("")
	return obj, nil
}

// scriptedDashboard is the Ray dashboard of the script: GetJobInfo answers what the script says.
type scriptedDashboard struct {
	info    *utiltypes.RayJobInfo // nil: the job is not found
	failure string
	calls   []map[string]any
}

type scriptedProvider struct{ dash *scriptedDashboard }

func (p scriptedProvider) GetDashboardClient(context.Context, manager.Manager) func(*rayv1.RayCluster, string) (dashboardclient.RayDashboardClientInterface, error) {
	return func(_ *rayv1.RayCluster, url string) (dashboardclient.RayDashboardClientInterface, error) {
		return &dashboardConn{d: p.dash, url: url}, nil
	}
}

func (p scriptedProvider) GetHttpProxyClient(manager.Manager) func(string, string, string, int) utils.RayHttpProxyClientInterface {
	return func(string, string, string, int) utils.RayHttpProxyClientInterface { return nil }
}

// dashboardConn is one client KubeRay made (for one dashboard URL); every call is recorded.
type dashboardConn struct {
	d   *scriptedDashboard
	url string
}

var _ dashboardclient.RayDashboardClientInterface = (*dashboardConn)(nil)

func (c *dashboardConn) record(op, jobID string) map[string]any {
	call := map[string]any{"op": op, "jobId": jobID, "url": c.url}
	c.d.calls = append(c.d.calls, call)
	return call
}

func (c *dashboardConn) GetJobInfo(_ context.Context, jobID string) (*utiltypes.RayJobInfo, error) {
	c.record("GetJobInfo", jobID)
	if c.d.failure != "" {
		return nil, errors.New(c.d.failure)
	}
	if c.d.info == nil {
		// What the real client returns for an unknown id (dashboard_httpclient.go).
		return nil, apierrors.NewBadRequest("Job " + jobID + " does not exist on the cluster")
	}
	info := *c.d.info
	info.JobId, info.SubmissionId = jobID, jobID
	return &info, nil
}

func (c *dashboardConn) ListJobs(context.Context) (*[]utiltypes.RayJobInfo, error) {
	c.record("ListJobs", "")
	jobs := []utiltypes.RayJobInfo{}
	if c.d.info != nil {
		jobs = append(jobs, *c.d.info)
	}
	return &jobs, nil
}

func (c *dashboardConn) SubmitJob(ctx context.Context, rayJob *rayv1.RayJob) (string, error) {
	request, err := dashboardclient.ConvertRayJobToReq(rayJob)
	if err != nil {
		call := c.record("SubmitJob", rayJob.Status.JobId)
		call["error"] = err.Error()
		return "", err
	}
	return c.submit("SubmitJob", request)
}

func (c *dashboardConn) SubmitJobReq(_ context.Context, request *utiltypes.RayJobRequest) (string, error) {
	return c.submit("SubmitJobReq", request)
}

func (c *dashboardConn) submit(op string, request *utiltypes.RayJobRequest) (string, error) {
	call := c.record(op, request.SubmissionId)
	body, err := json.Marshal(request)
	if err != nil {
		return "", err
	}
	var asSent map[string]any
	if err := json.Unmarshal(body, &asSent); err != nil {
		return "", err
	}
	call["request"] = asSent
	if c.d.failure != "" {
		return "", errors.New(c.d.failure)
	}
	return request.SubmissionId, nil
}

func (c *dashboardConn) GetJobLog(_ context.Context, jobName string) (*string, error) {
	c.record("GetJobLog", jobName)
	logs := ""
	return &logs, nil
}

func (c *dashboardConn) StopJob(_ context.Context, jobName string) error {
	c.record("StopJob", jobName)
	return nil
}

func (c *dashboardConn) DeleteJob(_ context.Context, jobName string) error {
	c.record("DeleteJob", jobName)
	return nil
}

func (c *dashboardConn) UpdateDeployments(context.Context, []byte) error {
	c.record("UpdateDeployments", "")
	return nil
}

func (c *dashboardConn) GetServeDetails(context.Context) (*utiltypes.ServeDetails, error) {
	c.record("GetServeDetails", "")
	return &utiltypes.ServeDetails{}, nil
}

func (c *dashboardConn) GetMultiApplicationStatus(context.Context) (map[string]*utiltypes.ServeApplicationStatus, error) {
	c.record("GetMultiApplicationStatus", "")
	return map[string]*utiltypes.ServeApplicationStatus{}, nil
}

// jobEnv is one RayJob on a fake API server with KubeRay's RayJob reconciler.
type jobEnv struct {
	ctx        context.Context
	c          client.WithWatch
	scheme     *runtime.Scheme
	schemas    schemaSet
	recorder   *record.FakeRecorder
	reconciler *ray.RayJobReconciler
	request    ctrl.Request
	dash       *scriptedDashboard
	now        time.Time // the case's virtual now (whole seconds)
	uids       int
	// statusWritten: the RayJobs and RayClusters ("Kind/namespace/name") whose status was written
	// through the status subresource; the typed read-back of another shows zero quantities where
	// the API server would hold no status at all.
	statusWritten map[string]bool
}

func runRayJobCase(c rayJobCase, schemas schemaSet) (rayJobCaseResult, error) {
	utilrand.Seed(rayjobSeed)
	out := rayJobCaseResult{Name: c.Name, Steps: []rayJobStepResult{}}
	e, err := newJobEnv(c, schemas)
	if err != nil {
		return out, err
	}
	for i, st := range c.Steps {
		if err := e.change(st); err != nil {
			return out, fmt.Errorf("step %d: %w", i, err)
		}
		e.dash.calls = []map[string]any{}
		drainEvents(e.recorder) // none expected: the world's changes record no Events
		res, recErr := e.reconcile()
		after := time.Now()
		step, err := e.observe()
		if err != nil {
			return out, fmt.Errorf("step %d: %w", i, err)
		}
		step.Result = e.outcome(res, recErr, after)
		out.Steps = append(out.Steps, step)
	}
	return out, nil
}

func newJobEnv(c rayJobCase, schemas schemaSet) (*jobEnv, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	if c.RayJob == nil {
		return nil, errors.New("no rayjob")
	}
	doc := runtime.DeepCopyJSON(c.RayJob)
	if doc["kind"] != "RayJob" {
		return nil, fmt.Errorf("rayjob: kind %v, not RayJob", doc["kind"])
	}
	delete(doc, "status")
	obj, err := decode(doc, schemas, scheme)
	if err != nil {
		return nil, fmt.Errorf("rayjob: %w", err)
	}
	rayJob := obj.(*rayv1.RayJob)
	if rayJob.UID == "" {
		rayJob.UID = types.UID(fakeUID)
	}
	rayJob.Generation = 1

	e := &jobEnv{
		scheme:        scheme,
		schemas:       schemas,
		now:           time.Now().Truncate(time.Second),
		ctx:           ctrl.LoggerInto(context.Background(), logr.Discard()),
		uids:          1,
		statusWritten: map[string]bool{},
	}
	e.dash = &scriptedDashboard{calls: []map[string]any{}}
	e.c = fake.NewClientBuilder().
		WithScheme(scheme).
		WithStatusSubresource(&rayv1.RayJob{}, &rayv1.RayCluster{}, &batchv1.Job{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: e.create,
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				e.settleClock(obj)
				e.noteStatus(sub, obj)
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				e.settleClock(obj)
				e.noteStatus(sub, obj)
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	for i, m := range c.Objects {
		if err := e.createWithStatus(m); err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
	}
	if err := e.c.Create(e.ctx, rayJob); err != nil {
		return nil, fmt.Errorf("rayjob: %w", err)
	}
	e.recorder = record.NewFakeRecorder(10000)
	mgr := &stubManager{client: e.c, scheme: scheme, recorder: e.recorder}
	e.reconciler = ray.NewRayJobReconciler(e.ctx, mgr, ray.RayJobReconcilerOptions{}, scriptedProvider{dash: e.dash})
	e.request = ctrl.Request{NamespacedName: types.NamespacedName{Namespace: rayJob.Namespace, Name: rayJob.Name}}
	return e, nil
}

// create stands in for the API server on a create: CRD defaults for a RayCluster, a uid, the
// Service defaults of main.go.
func (e *jobEnv) create(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if rc, ok := obj.(*rayv1.RayCluster); ok {
		if err := e.schemas.admitRayCluster(rc); err != nil {
			return err
		}
	}
	if obj.GetUID() == "" {
		e.uids++
		obj.SetUID(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", e.uids)))
	}
	return defaultService(ctx, c, obj, opts...)
}

// createWithStatus creates one of the case's objects, then writes its status if it has one.
func (e *jobEnv) createWithStatus(doc map[string]any) error {
	obj, err := decode(doc, e.schemas, e.scheme)
	if err != nil {
		return err
	}
	full := obj.DeepCopyObject().(client.Object)
	if err := e.c.Create(e.ctx, obj); err != nil {
		return err
	}
	if _, ok := doc["status"]; !ok {
		return nil
	}
	full.SetResourceVersion(obj.GetResourceVersion())
	full.SetUID(obj.GetUID())
	return e.c.Status().Update(e.ctx, full)
}

func statusKey(obj client.Object) string {
	switch obj.(type) {
	case *rayv1.RayJob:
		return "RayJob/" + obj.GetNamespace() + "/" + obj.GetName()
	case *rayv1.RayCluster:
		return "RayCluster/" + obj.GetNamespace() + "/" + obj.GetName()
	}
	return ""
}

func (e *jobEnv) noteStatus(sub string, obj client.Object) {
	if key := statusKey(obj); key != "" && sub == "status" {
		e.statusWritten[key] = true
	}
}

// settleClock: a time KubeRay took from time.Now() during the case goes into the store as the
// virtual now.
func (e *jobEnv) settleClock(obj client.Object) {
	if rj, ok := obj.(*rayv1.RayJob); ok {
		for _, t := range rayJobTimes(&rj.Status) {
			if t.After(e.now) {
				t.Time = e.now
			}
		}
	}
}

func rayJobTimes(s *rayv1.RayJobStatus) []*metav1.Time {
	out := []*metav1.Time{s.StartTime, s.EndTime, s.RayJobStatusInfo.StartTime, s.RayJobStatusInfo.EndTime}
	return nonZero(append(out, rayClusterTimes(&s.RayClusterStatus)...))
}

func rayClusterTimes(s *rayv1.RayClusterStatus) []*metav1.Time {
	out := []*metav1.Time{s.LastUpdateTime}
	for _, t := range s.StateTransitionTimes {
		out = append(out, t)
	}
	for i := range s.Conditions {
		out = append(out, &s.Conditions[i].LastTransitionTime)
	}
	return nonZero(out)
}

func jobTimes(s *batchv1.JobStatus) []*metav1.Time {
	out := []*metav1.Time{s.StartTime, s.CompletionTime}
	for i := range s.Conditions {
		out = append(out, &s.Conditions[i].LastTransitionTime, &s.Conditions[i].LastProbeTime)
	}
	return nonZero(out)
}

func podTimes(s *corev1.PodStatus) []*metav1.Time {
	var out []*metav1.Time
	for i := range s.ContainerStatuses {
		state := &s.ContainerStatuses[i].State
		if state.Running != nil {
			out = append(out, &state.Running.StartedAt)
		}
		if state.Terminated != nil {
			out = append(out, &state.Terminated.StartedAt, &state.Terminated.FinishedAt)
		}
	}
	return nonZero(out)
}

func nonZero(ts []*metav1.Time) []*metav1.Time {
	out := ts[:0]
	for _, t := range ts {
		if t != nil && !t.IsZero() {
			out = append(out, t)
		}
	}
	return out
}

func (e *jobEnv) ago(seconds int64) metav1.Time {
	return metav1.NewTime(e.now.Add(-time.Duration(seconds) * time.Second))
}

// change applies a step's changes to the world, then the stand-ins (garbage collector, head Services).
func (e *jobEnv) change(st rayJobStep) error {
	if st.Age < 0 {
		return fmt.Errorf("age %d: time only moves forward", st.Age)
	}
	if st.Age > 0 {
		if err := e.age(time.Duration(st.Age) * time.Second); err != nil {
			return fmt.Errorf("age: %w", err)
		}
	}
	if st.Spec != nil {
		if err := e.patchSpec(st.Spec); err != nil {
			return fmt.Errorf("spec: %w", err)
		}
	}
	if st.Delete {
		rj, err := e.rayJob()
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		if err := e.c.Delete(e.ctx, rj); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	if st.ClusterDelete {
		rc, err := e.jobCluster()
		if err != nil {
			return fmt.Errorf("cluster_delete: %w", err)
		}
		if err := e.c.Delete(e.ctx, rc); err != nil {
			return fmt.Errorf("cluster_delete: %w", err)
		}
	}
	if st.ClusterStatus != nil {
		if err := e.patchClusterStatus(st.ClusterStatus); err != nil {
			return fmt.Errorf("cluster_status: %w", err)
		}
	}
	if st.HeadPod != nil {
		if err := e.setHeadPod(st.HeadPod); err != nil {
			return fmt.Errorf("head_pod: %w", err)
		}
	}
	if st.Submitter != nil {
		if err := e.setSubmitter(st.Submitter); err != nil {
			return fmt.Errorf("submitter: %w", err)
		}
	}
	if st.JobInfo != nil {
		if err := e.setJobInfo(st.JobInfo); err != nil {
			return fmt.Errorf("job_info: %w", err)
		}
	}
	if st.DashboardError != nil {
		e.dash.failure = *st.DashboardError
	}
	if err := e.collectGarbage(); err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}
	if err := e.headServices(); err != nil {
		return fmt.Errorf("head Services: %w", err)
	}
	return nil
}

func (e *jobEnv) rayJob() (*rayv1.RayJob, error) {
	rj := &rayv1.RayJob{}
	return rj, e.c.Get(e.ctx, e.request.NamespacedName, rj)
}

// jobCluster is the RayCluster the RayJob's status names.
func (e *jobEnv) jobCluster() (*rayv1.RayCluster, error) {
	rj, err := e.rayJob()
	if err != nil {
		return nil, err
	}
	if rj.Status.RayClusterName == "" {
		return nil, errors.New("the RayJob's status names no RayCluster yet")
	}
	rc := &rayv1.RayCluster{}
	return rc, e.c.Get(e.ctx, common.RayJobRayClusterNamespacedName(rj), rc)
}

// age moves every timestamp of the world (not metadata) d into the past.
func (e *jobEnv) age(d time.Duration) error {
	shift := func(ts []*metav1.Time) {
		for _, t := range ts {
			t.Time = t.Add(-d)
		}
	}
	if rj, err := e.rayJob(); err == nil {
		ts, message := rayJobTimes(&rj.Status), shiftText(rj.Status.Message, d)
		if len(ts) > 0 || message != rj.Status.Message {
			shift(ts)
			rj.Status.Message = message // a time KubeRay printed into it is as old as the others
			if err := e.c.Status().Update(e.ctx, rj); err != nil {
				return err
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	clusters := &rayv1.RayClusterList{}
	if err := e.c.List(e.ctx, clusters); err != nil {
		return err
	}
	for i := range clusters.Items {
		if ts := rayClusterTimes(&clusters.Items[i].Status); len(ts) > 0 {
			shift(ts)
			if err := e.c.Status().Update(e.ctx, &clusters.Items[i]); err != nil {
				return err
			}
		}
	}
	jobs := &batchv1.JobList{}
	if err := e.c.List(e.ctx, jobs); err != nil {
		return err
	}
	for i := range jobs.Items {
		if ts := jobTimes(&jobs.Items[i].Status); len(ts) > 0 {
			shift(ts)
			if err := e.c.Status().Update(e.ctx, &jobs.Items[i]); err != nil {
				return err
			}
		}
	}
	pods := &corev1.PodList{}
	if err := e.c.List(e.ctx, pods); err != nil {
		return err
	}
	for i := range pods.Items {
		if ts := podTimes(&pods.Items[i].Status); len(ts) > 0 {
			shift(ts)
			if err := e.c.Status().Update(e.ctx, &pods.Items[i]); err != nil {
				return err
			}
		}
	}
	if info := e.dash.info; info != nil {
		ms := uint64(d.Milliseconds())
		for _, t := range []*uint64{&info.StartTime, &info.EndTime} {
			if *t > ms {
				*t -= ms
			}
		}
	}
	return nil
}

// patchSpec: a merge patch onto the RayJob's spec, stored as the API server would (CRD defaults and
// pruning; generation + 1 when the spec changed).
func (e *jobEnv) patchSpec(patch map[string]any) error {
	rj, err := e.rayJob()
	if err != nil {
		return err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rj)
	if err != nil {
		return err
	}
	u["apiVersion"], u["kind"] = rayv1.GroupVersion.String(), "RayJob"
	u["spec"] = mergePatch(u["spec"], patch)
	if u, err = e.schemas.admitDoc(u); err != nil {
		return err
	}
	next := &rayv1.RayJob{}
	if err := fromMap(u, next); err != nil {
		return err
	}
	if !equalJSON(rj.Spec, next.Spec) {
		rj.Generation++
	}
	rj.Spec = next.Spec
	return e.c.Update(e.ctx, rj)
}

func (e *jobEnv) patchClusterStatus(patch map[string]any) error {
	rc, err := e.jobCluster()
	if err != nil {
		return err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rc)
	if err != nil {
		return err
	}
	status, _ := mergePatch(u["status"], patch).(map[string]any)
	next := rayv1.RayClusterStatus{}
	if err := fromMap(status, &next); err != nil {
		return err
	}
	rc.Status = next
	return e.c.Status().Update(e.ctx, rc)
}

func (e *jobEnv) setHeadPod(raw json.RawMessage) error {
	rc, err := e.jobCluster()
	if err != nil {
		return err
	}
	existing, err := common.GetRayClusterHeadPod(e.ctx, e.c, rc)
	if err != nil {
		return err
	}
	if string(raw) == "null" {
		if existing == nil {
			return nil
		}
		return e.c.Delete(e.ctx, existing)
	}
	var script headPodScript
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&script); err != nil {
		return err
	}
	pod := existing
	if pod == nil {
		pod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:      rc.Name + "-head",
				Namespace: rc.Namespace,
				Labels: map[string]string{
					utils.RayClusterLabelKey:  rc.Name,
					utils.RayNodeTypeLabelKey: string(rayv1.HeadNode),
					utils.RayNodeLabelKey:     "yes",
					utils.RayIDLabelKey:       utils.GenerateIdentifier(rc.Name, rayv1.HeadNode),
				},
			},
			Spec: *rc.Spec.HeadGroupSpec.Template.Spec.DeepCopy(),
		}
		if err := ctrl.SetControllerReference(rc, pod, e.scheme); err != nil {
			return err
		}
		if err := e.c.Create(e.ctx, pod); err != nil {
			return err
		}
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	names := []string{}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	if script.Submitter != nil && !contains(names, utils.SubmitterContainerName) {
		names = append(names, utils.SubmitterContainerName)
	}
	for _, name := range names {
		cs := corev1.ContainerStatus{
			Name: name, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: e.ago(0)}},
		}
		if name == utils.SubmitterContainerName && script.Submitter != nil {
			s := script.Submitter
			cs.Ready, cs.Started = false, ptrTo(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: s.ExitCode, Reason: s.Reason, StartedAt: e.ago(s.Ago), FinishedAt: e.ago(s.Ago),
			}}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, cs)
	}
	return e.c.Status().Update(e.ctx, pod)
}

func (e *jobEnv) setSubmitter(script *submitterScript) error {
	rj, err := e.rayJob()
	if err != nil {
		return err
	}
	job := &batchv1.Job{}
	if err := e.c.Get(e.ctx, common.RayJobK8sJobNamespacedName(rj), job); err != nil {
		return err
	}
	job.Status = batchv1.JobStatus{}
	for _, c := range script.Conditions {
		status := c.Status
		if status == "" {
			status = corev1.ConditionTrue
		}
		at := e.ago(c.Ago)
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{
			Type: c.Type, Status: status, Reason: c.Reason, Message: c.Message,
			LastTransitionTime: at, LastProbeTime: at,
		})
		if status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			job.Status.Succeeded = 1
			job.Status.CompletionTime = &at
		case batchv1.JobFailed:
			job.Status.Failed = 1
		}
	}
	return e.c.Status().Update(e.ctx, job)
}

func (e *jobEnv) setJobInfo(raw json.RawMessage) error {
	if string(raw) == "null" {
		e.dash.info = nil
		return nil
	}
	var script jobInfoScript
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&script); err != nil {
		return err
	}
	millis := func(v int64) uint64 {
		switch {
		case v <= 0:
			return 0
		case v >= absoluteMillis:
			return uint64(v)
		default:
			return uint64(e.now.UnixMilli() - v)
		}
	}
	e.dash.info = &utiltypes.RayJobInfo{
		JobStatus: script.JobStatus, Message: script.Message, Entrypoint: script.Entrypoint,
		StartTime: millis(script.StartTime), EndTime: millis(script.EndTime),
	}
	return nil
}

// collectGarbage deletes what has owners, none of them left (background propagation, repeated).
func (e *jobEnv) collectGarbage() error {
	for {
		objects, err := e.everything()
		if err != nil {
			return err
		}
		alive := map[types.UID]bool{}
		for _, o := range objects {
			alive[o.GetUID()] = true
		}
		deleted := false
		for _, o := range objects {
			refs := o.GetOwnerReferences()
			if len(refs) == 0 || !o.GetDeletionTimestamp().IsZero() {
				continue
			}
			orphan := true
			for _, ref := range refs {
				if alive[ref.UID] {
					orphan = false
				}
			}
			if orphan {
				if err := e.c.Delete(e.ctx, o); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				deleted = true
			}
		}
		if !deleted {
			return nil
		}
	}
}

func (e *jobEnv) everything() ([]client.Object, error) {
	var out []client.Object
	lists := []client.ObjectList{
		&rayv1.RayJobList{}, &rayv1.RayClusterList{}, &batchv1.JobList{}, &corev1.ServiceList{}, &corev1.PodList{},
	}
	for _, list := range lists {
		if err := e.c.List(e.ctx, list); err != nil {
			return nil, err
		}
		switch l := list.(type) {
		case *rayv1.RayJobList:
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
		case *rayv1.RayClusterList:
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
		case *batchv1.JobList:
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
		case *corev1.ServiceList:
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
		case *corev1.PodList:
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
		}
	}
	return out, nil
}

// headServices: the RayCluster controller's head Service for every RayCluster that lacks one.
func (e *jobEnv) headServices() error {
	clusters := &rayv1.RayClusterList{}
	if err := e.c.List(e.ctx, clusters); err != nil {
		return err
	}
	for i := range clusters.Items {
		rc := &clusters.Items[i]
		if !rc.DeletionTimestamp.IsZero() {
			continue
		}
		svc, err := common.BuildServiceForHeadPod(e.ctx, *rc, nil, nil)
		if err != nil {
			return err
		}
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if err := ctrl.SetControllerReference(rc, svc, e.scheme); err != nil {
			return err
		}
		if err := e.c.Create(e.ctx, svc); err != nil {
			return err
		}
	}
	return nil
}

// reconcile calls KubeRay's Reconcile once; a panic becomes the error.
func (e *jobEnv) reconcile() (res ctrl.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return e.reconciler.Reconcile(e.ctx, e.request)
}

// outcome: the requeue as of the virtual now (see Clock) and the error.
func (e *jobEnv) outcome(res ctrl.Result, err error, after time.Time) stepOutcome {
	out := stepOutcome{RequeueAfter: res.RequeueAfter.Seconds()}
	if res.RequeueAfter%time.Millisecond != 0 {
		// time.Until(t) + 2s, taken at a moment just before `after`: t is whole seconds.
		out.RequeueAfter = math.Round((res.RequeueAfter + after.Sub(e.now)).Seconds())
	}
	if err != nil {
		msg := e.clockText(err.Error())
		out.Error = &msg
	}
	return out
}

// observe records the RayJob, the objects, the Events and the dashboard calls after a reconcile.
func (e *jobEnv) observe() (rayJobStepResult, error) {
	step := rayJobStepResult{Finalizers: []string{}, Objects: []map[string]any{}, Events: []string{}, DashboardCalls: e.dash.calls}
	rj, err := e.rayJob()
	switch {
	case apierrors.IsNotFound(err):
		step.Status = "deleted"
	case err != nil:
		return step, err
	default:
		status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rj.Status)
		if err != nil {
			return step, err
		}
		if !e.statusWritten[statusKey(rj)] {
			status = map[string]any{}
		}
		step.Status = e.clockless(status)
		step.Finalizers = append(step.Finalizers, rj.Finalizers...)
	}
	for _, event := range drainEvents(e.recorder) {
		step.Events = append(step.Events, e.clockText(event))
	}
	objects, err := e.everything()
	if err != nil {
		return step, err
	}
	for _, o := range objects {
		kind := ""
		switch typed := o.(type) {
		case *rayv1.RayCluster:
			kind = "RayCluster"
		case *batchv1.Job:
			kind = "Job"
		case *corev1.Service:
			kind = "Service"
			// A Service of a user's headService gets KubeRay's ports in Go's map order
			// (common.BuildServiceForHeadPod sorts only its own): shown sorted by name, as the
			// default head Service is, so that a second run answers the same.
			svc := typed.DeepCopy()
			sort.SliceStable(svc.Spec.Ports, func(i, j int) bool { return svc.Spec.Ports[i].Name < svc.Spec.Ports[j].Name })
			o = svc
		default:
			continue
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return step, err
		}
		gvk, err := e.c.GroupVersionKindFor(o)
		if err != nil {
			return step, err
		}
		u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), kind
		clean(u)
		if key := statusKey(o); key != "" && !e.statusWritten[key] {
			delete(u, "status")
		}
		if meta, ok := u["metadata"].(map[string]any); ok {
			for _, k := range []string{"creationTimestamp", "resourceVersion", "uid", "managedFields"} {
				delete(meta, k)
			}
		}
		step.Objects = append(step.Objects, e.clockless(u).(map[string]any))
	}
	sort.SliceStable(step.Objects, func(i, j int) bool {
		a, b := step.Objects[i], step.Objects[j]
		if a["kind"] != b["kind"] {
			return fmt.Sprint(a["kind"]) < fmt.Sprint(b["kind"])
		}
		return objectName(a) < objectName(b)
	})
	return step, nil
}

func objectName(u map[string]any) string {
	meta, _ := u["metadata"].(map[string]any)
	return fmt.Sprint(meta["namespace"], "/", meta["name"])
}

func drainEvents(recorder *record.FakeRecorder) []string {
	var out []string
	if recorder == nil {
		return out
	}
	for {
		select {
		case event := <-recorder.Events:
			out = append(out, event)
		default:
			return out
		}
	}
}

var (
	rfc3339Value = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)
	// Go's time.Time.String() (with or without a monotonic reading) and time.DateTime inside text.
	timeInText = regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?( [+-]\d{4} [A-Za-z0-9+-]+)?( m=[+-]\d+\.\d+)?`)
)

func (e *jobEnv) agoOf(t time.Time) int64 {
	ago := int64(e.now.Sub(t) / time.Second)
	if ago < 0 {
		return 0
	}
	return ago
}

// clockless replaces timestamps by their age (see Clock): the RFC 3339 value of a field whose name
// ends in Time, Timestamp or At, or of a map named stateTransitionTimes, becomes {"ago": n}; the times
// printed inside a "message" become "<n s ago>". Other strings (user data) are left alone.
func (e *jobEnv) clockless(v any) any {
	return e.clocklessAt(v, "")
}

func (e *jobEnv) clocklessAt(v any, key string) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if key == "stateTransitionTimes" {
				out[k] = e.clocklessAt(val, "time")
			} else {
				out[k] = e.clocklessAt(val, k)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = e.clocklessAt(val, key)
		}
		return out
	case string:
		timeKey := strings.HasSuffix(strings.ToLower(key), "time") || strings.HasSuffix(key, "Timestamp") || strings.HasSuffix(key, "At")
		if timeKey && rfc3339Value.MatchString(t) {
			if at, err := time.Parse(time.RFC3339Nano, t); err == nil {
				return map[string]any{"ago": e.agoOf(at)}
			}
		}
		if key == "message" {
			return e.clockText(t)
		}
		return t
	default:
		return v
	}
}

// shiftText moves the times printed inside a text d into the past, in the layout they were printed in.
func shiftText(s string, d time.Duration) string {
	return timeInText.ReplaceAllStringFunc(s, func(m string) string {
		text := m
		if i := strings.Index(text, " m="); i >= 0 {
			text = text[:i]
		}
		if at, err := time.Parse(goTimeLayout, text); err == nil {
			return at.Add(-d).Format(goTimeLayout)
		}
		if at, err := time.ParseInLocation(time.DateTime, text, time.Local); err == nil {
			return at.Add(-d).Format(time.DateTime)
		}
		return m
	})
}

// goTimeLayout is time.Time.String()'s layout (without the monotonic reading).
const goTimeLayout = "2006-01-02 15:04:05.999999999 -0700 MST"

// clockText replaces the times printed inside a text by "<n s ago>".
func (e *jobEnv) clockText(s string) string {
	return timeInText.ReplaceAllStringFunc(s, func(m string) string {
		text := m
		if i := strings.Index(text, " m="); i >= 0 {
			text = text[:i]
		}
		at, err := time.Parse(goTimeLayout, text)
		if err != nil {
			if at, err = time.ParseInLocation(time.DateTime, text, time.Local); err != nil {
				return m
			}
		}
		return fmt.Sprintf("<%d s ago>", e.agoOf(at))
	})
}

// mergePatch applies a JSON merge patch (RFC 7386).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return runtime.DeepCopyJSONValue(patch)
	}
	out := map[string]any{}
	if t, ok := target.(map[string]any); ok {
		for k, v := range t {
			out[k] = v
		}
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = mergePatch(out[k], v)
		}
	}
	return out
}

func equalJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
