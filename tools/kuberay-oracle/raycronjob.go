package main

// RayCronJob cases (kuberay-oracle -raycronjob): KubeRay's own RayCronJob controller
// (ray.NewRayCronJobReconciler, controllers/ray/raycronjob_controller.go) driven one reconcile at a
// time on a virtual clock. Nothing of KubeRay's logic is reproduced: the validation
// (utils.ValidateRayCronJobSpec: robfig/cron's ParseStandard, ValidateRayJobSpec on the template),
// suspend, the tick (schedule.Next from lastScheduleTime or the creation time), the RayJob built
// (constructRayJob), the status update and the requeue are KubeRay's. The clock is a
// k8s.io/utils/clock/testing FakeClock put into the reconciler's unexported clock field; the
// operator's local time zone (a schedule without CRON_TZ= is read in it) is UTC, as in KubeRay's image.
//
// Input (standard input): a JSON array of cases
//
//	[{"name": str,
//	  "raycronjob": {RayCronJob manifest; metadata.creationTimestamp is kept, a missing uid is
//	                 main.go's fakeUID},
//	  "steps": [{"at": RFC 3339 time (fractions of a second allowed): the clock for this reconcile,
//	             "spec": {...} a JSON merge patch onto the RayCronJob's spec first (optional)}]}]
//
// Output: a JSON array, one entry per case in input order:
//
//	{"name", "template": the RayCronJob's jobTemplate as KubeRay's types write it,
//	 "steps": [{
//	   "created": [RayJobs created in this step: {"metadata": {name, namespace, labels, annotations,
//	               ownerReferences}, "spec": {...}}],
//	   "status": the RayCronJob's status after the step,
//	   "events": ["Type Reason Message", ...],   // Events KubeRay recorded in this step
//	   "result": {"requeueAfter": seconds, "error": str | null}}]}
//
// A panic in the reconciler is recovered and reported as the step's error ("panic: ...").

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"time"
	"unsafe"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray"
)

var raycronjobMode = flag.Bool("raycronjob", false, "read RayCronJob cases (JSON) from standard input: see raycronjob.go")

type cronCase struct {
	Name       string         `json:"name"`
	RayCronJob map[string]any `json:"raycronjob"`
	Steps      []cronStep     `json:"steps"`
}

type cronStep struct {
	At   string         `json:"at"`
	Spec map[string]any `json:"spec,omitempty"`
}

type cronCaseResult struct {
	Name     string           `json:"name"`
	Template any              `json:"template"`
	Steps    []cronStepResult `json:"steps"`
}

type cronStepResult struct {
	Created []map[string]any `json:"created"`
	Status  any              `json:"status"`
	Events  []string         `json:"events"`
	Result  map[string]any   `json:"result"`
}

func runRayCronJob(in io.Reader, out io.Writer) error {
	time.Local = time.UTC // KubeRay's image: the operator's local zone is UTC
	var cases []cronCase
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cases); err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	results := make([]cronCaseResult, 0, len(cases))
	for _, c := range cases {
		res, err := runCronCase(c)
		if err != nil {
			return fmt.Errorf("case %q: %w", c.Name, err)
		}
		results = append(results, res)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", " ")
	return enc.Encode(results)
}

func runCronCase(c cronCase) (cronCaseResult, error) {
	res := cronCaseResult{Name: c.Name, Steps: []cronStepResult{}}
	scheme, err := newScheme()
	if err != nil {
		return res, err
	}
	raw, err := json.Marshal(c.RayCronJob)
	if err != nil {
		return res, err
	}
	cron := &rayv1.RayCronJob{}
	if err := json.Unmarshal(raw, cron); err != nil {
		return res, fmt.Errorf("raycronjob: %w", err)
	}
	if cron.UID == "" {
		cron.UID = types.UID(fakeUID)
	}
	cron.Generation = 1
	res.Template = cron.Spec.JobTemplate
	ctx := ctrl.LoggerInto(context.Background(), logr.Discard())
	c8s := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cron).WithStatusSubresource(&rayv1.RayCronJob{}).Build()
	recorder := record.NewFakeRecorder(10000)
	reconciler := ray.NewRayCronJobReconciler(&stubManager{client: c8s, scheme: scheme, recorder: recorder})
	clock := clocktesting.NewFakeClock(time.Now())
	field := reflect.ValueOf(reconciler).Elem().FieldByName("clock")
	if !field.IsValid() {
		return res, errors.New("RayCronJobReconciler has no clock field")
	}
	reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Set(reflect.ValueOf(clock))
	key := types.NamespacedName{Namespace: cron.Namespace, Name: cron.Name}
	for i, st := range c.Steps {
		at, err := time.Parse(time.RFC3339Nano, st.At)
		if err != nil {
			return res, fmt.Errorf("step %d: at: %w", i, err)
		}
		if st.Spec != nil {
			patch, err := json.Marshal(map[string]any{"spec": st.Spec})
			if err != nil {
				return res, err
			}
			obj := &rayv1.RayCronJob{}
			if err := c8s.Get(ctx, key, obj); err != nil {
				return res, fmt.Errorf("step %d: %w", i, err)
			}
			if err := c8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return res, fmt.Errorf("step %d: spec: %w", i, err)
			}
		}
		clock.SetTime(at)
		before, err := rayJobNames(ctx, c8s)
		if err != nil {
			return res, err
		}
		result, rerr := reconcileCron(ctx, reconciler, key)
		step := cronStepResult{Created: []map[string]any{}, Events: drainCronEvents(recorder), Result: map[string]any{
			"requeueAfter": result.RequeueAfter.Seconds(), "error": nil,
		}}
		if rerr != nil {
			step.Result["error"] = rerr.Error()
		}
		jobs := &rayv1.RayJobList{}
		if err := c8s.List(ctx, jobs); err != nil {
			return res, err
		}
		for _, job := range jobs.Items {
			if before[job.Name] {
				continue
			}
			step.Created = append(step.Created, map[string]any{
				"metadata": map[string]any{
					"name": job.Name, "namespace": job.Namespace, "labels": job.Labels,
					"annotations": job.Annotations, "ownerReferences": job.OwnerReferences,
				},
				"spec": job.Spec,
			})
		}
		now := &rayv1.RayCronJob{}
		if err := c8s.Get(ctx, key, now); err != nil {
			return res, err
		}
		step.Status = now.Status
		res.Steps = append(res.Steps, step)
	}
	return res, nil
}

func reconcileCron(ctx context.Context, r *ray.RayCronJobReconciler, key types.NamespacedName) (result ctrl.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
}

func rayJobNames(ctx context.Context, c client.Client) (map[string]bool, error) {
	jobs := &rayv1.RayJobList{}
	if err := c.List(ctx, jobs); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, job := range jobs.Items {
		names[job.Name] = true
	}
	return names, nil
}

func drainCronEvents(r *record.FakeRecorder) []string {
	events := []string{}
	for {
		select {
		case e := <-r.Events:
			events = append(events, e)
		default:
			return events
		}
	}
}
